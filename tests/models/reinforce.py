"""REINFORCE in the style of pytorch/examples' ``reinforcement_learning/reinforce.py``: a
``Policy`` network with ``saved_log_probs`` and ``rewards`` lists, ``select_action`` drawing
from ``Categorical(probs)`` and saving ``m.log_prob(action)``, and ``finish_episode``
computing discounted returns, normalising them with ``.std()`` and ``eps``, and stepping Adam
on ``torch.cat(policy_loss).sum()``.

gym is not used: ``CartPole`` below is the classic cart-pole written in numpy (gym's
``CartPole-v1`` dynamics, seeded by its own ``RandomState``). ``make_update_step`` is the same
update over a whole episode's states and actions at once (one forward over the stacked states),
the form a compiler can trace.

Plain PyTorch: tests/test_issue34_model_files.py runs this text unchanged with PyTorch and
with another library bound to ``torch``.
"""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Categorical

gamma = 0.99
eps = np.finfo(np.float32).eps.item()


class CartPole:
    """gym's CartPole-v1 in numpy: push the cart left (0) or right (1); reward 1 per step until
    the pole falls or the cart leaves the track (or ``max_steps``)."""

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
    def __init__(self):
        super(Policy, self).__init__()
        self.affine1 = nn.Linear(4, 128)
        self.dropout = nn.Dropout(p=0.6)
        self.affine2 = nn.Linear(128, 2)

        self.saved_log_probs = []
        self.rewards = []

    def forward(self, x):
        x = self.affine1(x)
        x = self.dropout(x)
        x = F.relu(x)
        action_scores = self.affine2(x)
        return F.softmax(action_scores, dim=1)


def make_optimizer(policy, lr=1e-2):
    return optim.Adam(policy.parameters(), lr=lr)


def select_action(policy, state):
    state = torch.from_numpy(state).float().unsqueeze(0)
    probs = policy(state)
    m = Categorical(probs)
    action = m.sample()
    policy.saved_log_probs.append(m.log_prob(action))
    return action.item()


def finish_episode(policy, optimizer):
    R = 0
    policy_loss = []
    returns = []
    for r in policy.rewards[::-1]:
        R = r + gamma * R
        returns.insert(0, R)
    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + eps)
    for log_prob, R in zip(policy.saved_log_probs, returns):
        policy_loss.append(-log_prob * R)
    optimizer.zero_grad()
    policy_loss = torch.cat(policy_loss).sum()
    policy_loss.backward()
    optimizer.step()
    del policy.rewards[:]
    del policy.saved_log_probs[:]
    return policy_loss.item()


def run_episode(policy, env):
    """One episode of the example's ``main()`` loop: act, store the reward, until done."""
    state, ep_reward, states, actions = env.reset(), 0, [], []
    for t in range(1, 10000):  # Don't infinite loop while learning
        states.append(state)
        action = select_action(policy, state)
        actions.append(action)
        state, reward, done = env.step(action)
        policy.rewards.append(reward)
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


def make_update_step(policy, optimizer):
    """``finish_episode``'s update over a whole episode at once: the policy run on the stacked
    states, ``Categorical(probs).log_prob(actions)`` for all steps."""
    def update(states, actions, returns):
        probs = policy(states)
        m = Categorical(probs)
        returns = (returns - returns.mean()) / (returns.std() + eps)
        policy_loss = (-m.log_prob(actions) * returns).sum()
        optimizer.zero_grad()
        policy_loss.backward()
        optimizer.step()
        return policy_loss
    return update
