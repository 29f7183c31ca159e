"""Actor-critic in the style of pytorch/examples' ``reinforcement_learning/actor_critic.py``: one
``Policy`` with an action head (softmax) and a value head, ``SavedAction(log_prob, value)``
namedtuples, ``select_action`` sampling ``Categorical(probs)``, and ``finish_episode``:
normalised discounted returns, advantages ``R - value.item()``, ``F.smooth_l1_loss(value,
torch.tensor([R]))`` for the critic, ``torch.stack(...).sum()`` of both losses, one Adam step.

The environment is the numpy cart-pole of reinforce.py (copied here: each model file stands
alone). ``make_update_step`` is the same update over a whole episode at once, for a compiler.

Plain PyTorch: tests/test_issue34_model_files.py runs this text unchanged with PyTorch and
with another library bound to ``torch``.
"""
import math
from collections import namedtuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Categorical

gamma = 0.99
eps = np.finfo(np.float32).eps.item()

SavedAction = namedtuple('SavedAction', ['log_prob', 'value'])


class CartPole:
    """gym's CartPole-v1 in numpy (see reinforce.py)."""

    def __init__(self, seed=0, max_steps=200):
        self.gravity, self.masscart, self.masspole, self.length = 9.8, 1.0, 0.1, 0.5
        self.total_mass = self.masspole + self.masscart
        self.polemass_length = self.masspole * self.length
        self.force_mag, self.tau = 10.0, 0.02
        self.theta_threshold_radians = 12 * 2 * math.pi / 360
        self.x_threshold = 2.4
        self.max_steps = max_steps
        self.rng = np.random.RandomState(seed)

    def reset(self):
        self.state = self.rng.uniform(low=-0.05, high=0.05, size=(4,))
        self.steps = 0
        return np.array(self.state, dtype=np.float32)

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state
        force = self.force_mag if action == 1 else -self.force_mag
        costheta, sintheta = math.cos(theta), math.sin(theta)
        temp = (force + self.polemass_length * theta_dot ** 2 * sintheta) / self.total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * costheta ** 2 / self.total_mass))
        xacc = temp - self.polemass_length * thetaacc * costheta / self.total_mass
        x, x_dot = x + self.tau * x_dot, x_dot + self.tau * xacc
        theta, theta_dot = theta + self.tau * theta_dot, theta_dot + self.tau * thetaacc
        self.state = (x, x_dot, theta, theta_dot)
        self.steps += 1
        done = bool(x < -self.x_threshold or x > self.x_threshold
                    or theta < -self.theta_threshold_radians or theta > self.theta_threshold_radians
                    or self.steps >= self.max_steps)
        return np.array(self.state, dtype=np.float32), 1.0, done


class Policy(nn.Module):
    """
    implements both actor and critic in one model
    """
    def __init__(self):
        super(Policy, self).__init__()
        self.affine1 = nn.Linear(4, 128)

        # actor's layer
        self.action_head = nn.Linear(128, 2)

        # critic's layer
        self.value_head = nn.Linear(128, 1)

        # action & reward buffer
        self.saved_actions = []
        self.rewards = []

    def forward(self, x):
        """
        forward of both actor and critic
        """
        x = F.relu(self.affine1(x))

        # actor: choses action to take from state s_t
        # by returning probability of each action
        action_prob = F.softmax(self.action_head(x), dim=-1)

        # critic: evaluates being in the state s_t
        state_values = self.value_head(x)

        # return values for both actor and critic as a tuple of 2 values:
        # 1. a list with the probability of each action over the action space
        # 2. the value from state s_t
        return action_prob, state_values


def make_optimizer(model, lr=3e-2):
    return optim.Adam(model.parameters(), lr=lr)


def select_action(model, state):
    state = torch.from_numpy(state).float()
    probs, state_value = model(state)

    # create a categorical distribution over the list of probabilities of actions
    m = Categorical(probs)

    # and sample an action using the distribution
    action = m.sample()

    # save to action buffer
    model.saved_actions.append(SavedAction(m.log_prob(action), state_value))

    # the action to take (left or right)
    return action.item()


def finish_episode(model, optimizer):
    """
    Training code. Calculates actor and critic loss and performs backprop.
    """
    R = 0
    saved_actions = model.saved_actions
    policy_losses = []  # list to save actor (policy) loss
    value_losses = []  # list to save critic (value) loss
    returns = []  # list to save the true values

    # calculate the true value using rewards returned from the environment
    for r in model.rewards[::-1]:
        # calculate the discounted value
        R = r + gamma * R
        returns.insert(0, R)

    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + eps)

    for (log_prob, value), R in zip(saved_actions, returns):
        advantage = R - value.item()

        # calculate actor (policy) loss
        policy_losses.append(-log_prob * advantage)

        # calculate critic (value) loss using L1 smooth loss
        value_losses.append(F.smooth_l1_loss(value, torch.tensor([R])))

    # reset gradients
    optimizer.zero_grad()

    # sum up all the values of policy_losses and value_losses
    loss = torch.stack(policy_losses).sum() + torch.stack(value_losses).sum()

    # perform backprop
    loss.backward()
    optimizer.step()

    # reset rewards and action buffer
    del model.rewards[:]
    del model.saved_actions[:]
    return loss.item()


def run_episode(model, env):
    """One episode of the example's ``main()`` loop."""
    state, ep_reward, states, actions = env.reset(), 0, [], []
    for t in range(1, 10000):
        states.append(state)
        action = select_action(model, state)
        actions.append(action)
        state, reward, done = env.step(action)
        model.rewards.append(reward)
        ep_reward += reward
        if done:
            break
    return ep_reward, np.stack(states), np.array(actions, dtype=np.int64)


def discounted_returns(rewards):
    R, returns = 0, []
    for r in rewards[::-1]:
        R = r + gamma * R
        returns.insert(0, R)
    return np.array(returns, dtype=np.float32)


def make_update_step(model, optimizer):
    """``finish_episode``'s update over a whole episode at once (the advantage's value detached,
    as ``value.item()`` makes it a number)."""
    def update(states, actions, returns):
        probs, values = model(states)
        m = Categorical(probs)
        returns = (returns - returns.mean()) / (returns.std() + eps)
        values = values.squeeze(-1)
        advantage = returns - values.detach()
        policy_loss = (-m.log_prob(actions) * advantage).sum()
        value_loss = F.smooth_l1_loss(values, returns, reduction='sum')
        loss = policy_loss + value_loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss
    return update
