"""``Normal`` and ``Uniform``: reparameterised (``rsample``), so gradients flow through samples.

>>> import graphc as gc
>>> from graphc.distributions import Normal
>>> loc = gc.tensor([0.0, 1.0], requires_grad=True)
>>> gc.manual_seed(0)
>>> x = Normal(loc, 2.0).rsample((5,))
>>> x.shape
(5, 2)
>>> x.sum().backward(); loc.grad.numpy().tolist()
[5.0, 5.0]
"""
from __future__ import annotations

import math

from ..core.tensor import Tensor
from . import constraints
from .distribution import Distribution, as_params, draw

__all__ = ["Normal", "Uniform"]


def _numbers(*values) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


class Normal(Distribution):
    """``Normal(loc, scale)``: Gaussian with mean ``loc`` and standard deviation ``scale``
    (broadcast together; numbers become float32 tensors).

    >>> import graphc as gc
    >>> d = gc.distributions.Normal(gc.tensor([0.0, 1.0]), gc.tensor([1.0, 2.0]))
    >>> d.batch_shape, d.variance.numpy().tolist()
    ((2,), [1.0, 4.0])
    >>> [round(v, 4) for v in d.entropy().numpy().tolist()]
    [1.4189, 2.1121]
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = as_params(loc, scale)
        batch_shape = () if _numbers(loc, scale) else tuple(self.loc.shape)
        super().__init__(batch_shape, (), validate_args)

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def stddev(self) -> Tensor:
        return self.scale

    @property
    def variance(self) -> Tensor:
        return self.scale ** 2

    def rsample(self, sample_shape=()) -> Tensor:
        """``loc + eps * scale`` with ``eps ~ N(0, 1)``: differentiable in ``loc`` and ``scale``."""
        eps = draw(self._extended_shape(sample_shape), self.loc, "normal")
        return self.loc + eps * self.scale

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        var = self.scale ** 2
        return -((value - self.loc) ** 2) / (2 * var) - self.scale.log() - math.log(math.sqrt(2 * math.pi))

    def cdf(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + ((value - self.loc) / self.scale / math.sqrt(2)).erf())

    def entropy(self) -> Tensor:
        return 0.5 + 0.5 * math.log(2 * math.pi) + self.scale.log()


class Uniform(Distribution):
    """``Uniform(low, high)``: uniform on ``[low, high)``; ``low < high`` is validated.

    >>> import graphc as gc
    >>> d = gc.distributions.Uniform(0.0, 4.0)
    >>> float(d.mean), float(d.variance), round(float(d.entropy()), 4)
    (2.0, 1.3333333730697632, 1.3863)
    >>> float(d.log_prob(gc.tensor(1.0))) == float(-d.entropy())
    True
    """

    arg_constraints = {"low": constraints.dependent, "high": constraints.dependent}
    has_rsample = True

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = as_params(low, high)
        batch_shape = () if _numbers(low, high) else tuple(self.low.shape)
        super().__init__(batch_shape, (), validate_args)
        if self._validate_args and self.low._tracer is None and self.high._tracer is None:
            for name, constraint in (("low", constraints.less_than(self.high)),
                                     ("high", constraints.greater_than(self.low))):
                value = getattr(self, name)
                if not constraint.check_all(value):
                    raise ValueError(f"Expected parameter {name} (Tensor of shape {tuple(value.shape)}) of distribution "
                                     f"{self!r} to satisfy the constraint {constraint!r}, but found invalid values:\n"
                                     f"{value}")

    @property
    def support(self):
        """``Interval(low, high)`` as PyTorch 2.13 checks it (``log_prob(high)`` is ``-inf``)."""
        return constraints.interval(self.low, self.high)

    @property
    def mean(self) -> Tensor:
        return (self.high + self.low) / 2

    @property
    def mode(self) -> Tensor:
        return self.low * float("nan")

    @property
    def stddev(self) -> Tensor:
        return (self.high - self.low) / 12 ** 0.5

    @property
    def variance(self) -> Tensor:
        return (self.high - self.low) ** 2 / 12

    def rsample(self, sample_shape=()) -> Tensor:
        """``low + u * (high - low)`` with ``u ~ U[0, 1)``: differentiable in both bounds."""
        u = draw(self._extended_shape(sample_shape), self.low, "uniform")
        return self.low + u * (self.high - self.low)

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        lb = (self.low <= value).to(self.low.dtype)
        ub = (self.high > value).to(self.low.dtype)
        return (lb * ub).log() - (self.high - self.low).log()

    def cdf(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.low) / (self.high - self.low)).clamp(min=0, max=1)

    def entropy(self) -> Tensor:
        return (self.high - self.low).log()
