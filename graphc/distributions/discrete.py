"""``Categorical`` and ``Bernoulli`` (PyTorch's parameterisations, properties and messages).

>>> import graphc as gc
>>> from graphc.distributions import Categorical
>>> gc.manual_seed(0)
>>> d = Categorical(logits=gc.tensor([0.0, 0.0, 10.0]))
>>> d.sample((4,)).numpy().tolist()
[2, 2, 2, 2]
>>> round(float(d.log_prob(gc.tensor(2))), 5)
-9e-05
"""
from __future__ import annotations

import numpy as np

from ..core.grad_mode import no_grad
from ..core.tensor import Tensor
from ..nn import functional as F
from ..ops import creation
from ..ops.surface import TOP_LEVEL
from . import constraints
from .distribution import Distribution, as_params, broadcast, draw, finfo, lazy_property

__all__ = ["Categorical", "Bernoulli"]


def _as_tensor(value) -> Tensor:
    if isinstance(value, Tensor):
        return value
    return as_params(value)[0]


def clamp_probs(probs: Tensor) -> Tensor:
    """``probs`` kept ``eps`` away from 0 and 1 (``torch.distributions.utils.clamp_probs``)."""
    eps = float(finfo(probs.dtype).eps)
    return probs.clamp(min=eps, max=1 - eps)


def _pick(table: Tensor, index: Tensor) -> Tensor:
    """``table[..., index]`` along the last dim, broadcasting ``index`` over leading dims: a
    one-hot select (graphc's composite for ``gather(-1, index.unsqueeze(-1)).squeeze(-1)``)."""
    hot = F.one_hot(index.long(), int(table.shape[-1])) > 0.5
    zero = creation.zeros((), dtype=table.dtype)
    return TOP_LEVEL["where"](hot, table, zero).sum(-1)


class Categorical(Distribution):
    """A distribution over ``0 .. K-1`` given ``probs`` (normalised along the last dim) or
    ``logits`` (unnormalised log-probabilities); batch dims lead.

    Sampling uses the Gumbel-max trick (``argmax(logits + Gumbel noise)``), which draws the same
    distribution as ``torch.multinomial`` from graphc's generator (numbers differ from torch's).

    >>> import graphc as gc
    >>> d = gc.distributions.Categorical(probs=gc.tensor([[0.25, 0.75], [0.5, 0.5]]))
    >>> d.batch_shape, d.event_shape, d.sample((3,)).shape
    ((2,), (), (3, 2))
    >>> d.probs.numpy().tolist()
    [[0.25, 0.75], [0.5, 0.5]]
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            probs = _as_tensor(probs)
            if probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            logits = _as_tensor(logits)
            if logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = F.log_softmax(logits, -1)  # logits - logits.logsumexp(-1, keepdim=True)
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self._param.shape[-1]
        super().__init__(tuple(self._param.shape[:-1]), (), validate_args)

    @lazy_property
    def logits(self) -> Tensor:
        return clamp_probs(self.probs).log()

    @lazy_property
    def probs(self) -> Tensor:
        return F.softmax(self.logits, -1)

    @property
    def param_shape(self) -> tuple:
        return tuple(self._param.shape)

    @property
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    @property
    def mean(self) -> Tensor:
        return creation.full(self._batch_shape, float("nan"), dtype=self.probs.dtype)

    @property
    def mode(self) -> Tensor:
        return self.probs.argmax(-1)

    @property
    def variance(self) -> Tensor:
        return creation.full(self._batch_shape, float("nan"), dtype=self.probs.dtype)

    def sample(self, sample_shape=()) -> Tensor:
        """Class indices (int64) of shape ``sample_shape + batch_shape``, without gradients."""
        shape = self._extended_shape(sample_shape) + (self._num_events,)
        with no_grad():
            u = draw(shape, self.logits, "uniform").clamp(min=float(finfo(self.logits.dtype).tiny))
            return (self.logits - (-u.log()).log()).argmax(-1)

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return _pick(self.logits, value)

    def entropy(self) -> Tensor:
        min_real = float(finfo(self.logits.dtype).min)
        return -(self.logits.clamp(min=min_real) * self.probs).sum(-1)

    def enumerate_support(self, expand=True) -> Tensor:
        values = creation.arange(self._num_events).reshape((-1,) + (1,) * len(self._batch_shape))
        return values.expand(-1, *self._batch_shape) if expand else values


class Bernoulli(Distribution):
    """0/1 outcomes with success probability ``probs`` or log-odds ``logits``; samples are floats
    of the parameter's dtype, as in PyTorch.

    >>> import graphc as gc
    >>> d = gc.distributions.Bernoulli(logits=gc.tensor([0.0, 2.0]))
    >>> [round(p, 4) for p in d.probs.numpy().tolist()]
    [0.5, 0.8808]
    >>> [round(v, 4) for v in d.log_prob(gc.tensor([1.0, 0.0])).numpy().tolist()]
    [-0.6931, -2.1269]
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            self.probs = _as_tensor(probs)
        else:
            self.logits = _as_tensor(logits)
        self._param = self.probs if probs is not None else self.logits
        super().__init__(tuple(self._param.shape), (), validate_args)

    @lazy_property
    def logits(self) -> Tensor:
        p = clamp_probs(self.probs)
        return p.log() - (-p).log1p()

    @lazy_property
    def probs(self) -> Tensor:
        return self.logits.sigmoid()

    @property
    def param_shape(self) -> tuple:
        return tuple(self._param.shape)

    @property
    def mean(self) -> Tensor:
        return self.probs

    @property
    def mode(self) -> Tensor:
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        nan = creation.full((), float("nan"), dtype=self.probs.dtype)
        return TOP_LEVEL["where"](self.probs == 0.5, nan, mode)

    @property
    def variance(self) -> Tensor:
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        with no_grad():
            return (draw(shape, self.probs, "uniform") < self.probs).to(self.probs.dtype)

    def _bce(self, target) -> Tensor:
        """``binary_cross_entropy_with_logits(logits, target, reduction='none')``, broadcasting."""
        logits, target = broadcast(self.logits, target)
        return logits.clamp(min=0) - logits * target + (-logits.abs()).exp().log1p()

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return -self._bce(value.to(self.logits.dtype))

    def entropy(self) -> Tensor:
        return self._bce(self.probs)

    def enumerate_support(self, expand=True) -> Tensor:
        values = creation.tensor(np.array([0.0, 1.0]), dtype=self._param.dtype)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        return values.expand(-1, *self._batch_shape) if expand else values
