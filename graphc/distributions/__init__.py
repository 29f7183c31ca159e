"""Probability distributions with ``torch.distributions``'s API (``gc.distributions``).

Sampling draws from graphc's generator (``gc.manual_seed``); inside a compiled function a
sample is a ``random`` node that draws fresh numbers each time the plan runs. ``log_prob``,
``entropy`` and ``rsample`` are composites of graphc ops, so they trace and differentiate.

>>> import graphc as torch
>>> from graphc.distributions import Categorical
>>> torch.manual_seed(0)
>>> dist = Categorical(logits=torch.zeros(4))
>>> action = dist.sample()
>>> action.shape, round(float(dist.log_prob(action)), 4), round(float(dist.entropy()), 4)
((), -1.3863, 1.3863)
"""
from . import constraints
from .continuous import Normal, Uniform
from .discrete import Bernoulli, Categorical
from .distribution import Distribution
from .multivariate_normal import MultivariateNormal

__all__ = ["Bernoulli", "Categorical", "Distribution", "MultivariateNormal", "Normal", "Uniform", "constraints"]
