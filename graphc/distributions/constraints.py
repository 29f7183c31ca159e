"""The constraints ``torch.distributions.constraints`` names, checked on eager values (numpy).

Their reprs are PyTorch's, so validation messages read the same.

>>> import graphc as gc
>>> from graphc.distributions import constraints
>>> constraints.positive, constraints.unit_interval
(GreaterThan(lower_bound=0.0), Interval(lower_bound=0.0, upper_bound=1.0))
>>> bool(constraints.positive.check(gc.tensor([1.0, -1.0])).numpy()[1])
False
"""
from __future__ import annotations

import numpy as np

from ..ops import creation

__all__ = ["Constraint", "real", "positive", "unit_interval", "boolean", "simplex", "real_vector", "lower_cholesky",
           "positive_definite", "greater_than", "interval", "half_open_interval", "less_than", "integer_interval", "dependent"]


class Constraint:
    """``check(value)`` a bool tensor (eager values), ``check_all(value, dist)`` one bool."""

    is_discrete = False
    event_dim = 0

    def ok(self, x: np.ndarray, dist=None) -> np.ndarray:
        raise NotImplementedError

    def check(self, value, dist=None):
        return creation.tensor(self.ok(value.numpy(), dist))

    def check_all(self, value, dist=None) -> bool:
        return bool(np.all(self.ok(value.numpy(), dist)))

    def __repr__(self) -> str:
        return type(self).__name__[1:] + "()"


class _Dependent(Constraint):
    """A support that depends on the distribution's parameters (never validated as an argument)."""

    is_dependent = True

    def __init__(self, is_discrete=False, event_dim=0):
        self.is_discrete, self.event_dim = is_discrete, event_dim

    def ok(self, x, dist=None):
        raise ValueError("Cannot determine validity of dependent constraint")


class _Real(Constraint):
    def ok(self, x, dist=None):
        return x == x


class _GreaterThan(Constraint):
    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def ok(self, x, dist=None):
        return _bound(self.lower_bound) < x

    def __repr__(self):
        return f"GreaterThan(lower_bound={_bound_repr(self.lower_bound)})"


def _bound(b):
    return b.numpy() if hasattr(b, "numpy") else b


def _bound_repr(b) -> str:
    """A bound as PyTorch prints it in messages: the number, or the shape of a tensor bound."""
    if hasattr(b, "shape"):
        return str(float(b.numpy().reshape(-1)[0])) if int(np.prod(b.shape, dtype=np.int64)) == 1 else \
            f"Size({list(b.shape)})"
    return str(b)


class _Interval(Constraint):
    """``[lower_bound, upper_bound]``; bounds may be tensors (Uniform's support)."""

    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def ok(self, x, dist=None):
        return (_bound(self.lower_bound) <= x) & (x <= _bound(self.upper_bound))

    def __repr__(self):
        return f"Interval(lower_bound={_bound_repr(self.lower_bound)}, upper_bound={_bound_repr(self.upper_bound)})"


class _HalfOpenInterval(_Interval):
    def ok(self, x, dist=None):
        return (_bound(self.lower_bound) <= x) & (x < _bound(self.upper_bound))

    def __repr__(self):
        return (f"HalfOpenInterval(lower_bound={_bound_repr(self.lower_bound)}, "
                f"upper_bound={_bound_repr(self.upper_bound)})")


class _LessThan(Constraint):
    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def ok(self, x, dist=None):
        return x < _bound(self.upper_bound)

    def __repr__(self):
        return f"LessThan(upper_bound={_bound_repr(self.upper_bound)})"


class _IntegerInterval(Constraint):
    is_discrete = True

    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def ok(self, x, dist=None):
        return (x % 1 == 0) & (self.lower_bound <= x) & (x <= self.upper_bound)

    def __repr__(self):
        return f"IntegerInterval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _Boolean(Constraint):
    is_discrete = True

    def ok(self, x, dist=None):
        return (x == 0) | (x == 1)


class _Simplex(Constraint):
    event_dim = 1

    def ok(self, x, dist=None):
        return np.all(x >= 0, axis=-1) & (np.abs(x.sum(-1) - 1) < 1e-6)


class _IndependentReal(Constraint):
    """``IndependentConstraint(Real(), 1)``: real vectors (Categorical's logits)."""

    event_dim = 1

    def ok(self, x, dist=None):
        return np.all(x == x, axis=-1)

    def __repr__(self):
        return "IndependentConstraint(Real(), 1)"


class _LowerCholesky(Constraint):
    event_dim = 2

    def ok(self, x, dist=None):
        lower = np.all(np.tril(x) == x, axis=(-2, -1))
        return lower & np.all(np.diagonal(x, axis1=-2, axis2=-1) > 0, axis=-1)


class _PositiveDefinite(Constraint):
    event_dim = 2

    def ok(self, x, dist=None):
        symmetric = np.all(np.isclose(x, np.swapaxes(x, -1, -2), atol=1e-6), axis=(-2, -1))
        flat = x.reshape((-1,) + x.shape[-2:])
        positive = np.array([bool(np.all(np.linalg.eigvalsh(m) > 0)) for m in flat]).reshape(x.shape[:-2])
        return symmetric & positive


dependent = _Dependent()
real = _Real()
positive = _GreaterThan(0.0)
unit_interval = _Interval(0.0, 1.0)
boolean = _Boolean()
simplex = _Simplex()
real_vector = _IndependentReal()
lower_cholesky = _LowerCholesky()
positive_definite = _PositiveDefinite()
greater_than = _GreaterThan
interval = _Interval
half_open_interval = _HalfOpenInterval
less_than = _LessThan
integer_interval = _IntegerInterval
