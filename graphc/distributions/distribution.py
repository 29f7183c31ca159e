"""The ``Distribution`` base class and the helpers every distribution shares.

Parameters are graphc tensors (Python numbers become tensors of the other arguments' dtype,
float32 when all are numbers, as ``torch.distributions`` does). Everything is built from
existing graphc ops, so ``log_prob``/``entropy``/``rsample`` trace into compiled plans and
differentiate like any other composite.

Random draws come from graphc's generator (``gc.manual_seed``): eagerly from the global one;
inside a compiled function as ``random`` nodes that draw fresh numbers from the plan's own
generator at every run (as ``gc.randn_like`` of a traced tensor does).

>>> import graphc as gc
>>> d = gc.distributions.Normal(0.0, 1.0)
>>> d.batch_shape, d.event_shape
((), ())
>>> round(float(d.log_prob(gc.tensor(0.0))), 4)
-0.9189
"""
from __future__ import annotations

import numpy as np

from ..core.grad_mode import enable_grad, no_grad
from ..core.symint import SymInt
from ..core.tensor import Tensor
from ..core.tracer import current_tracer
from ..ops import creation

__all__ = ["Distribution"]


def _is_eager(t) -> bool:
    return isinstance(t, Tensor) and t._tracer is None


def as_params(*values):
    """Tensors for ``values``: numbers take the dtype of the first tensor among them (float32
    if none), as ``torch.distributions.utils.broadcast_all``; the results broadcast together."""
    dtype = next((v.dtype for v in values if isinstance(v, Tensor)), None)
    out = []
    for v in values:
        if isinstance(v, Tensor):
            out.append(v)
        elif isinstance(v, np.ndarray):
            out.append(creation.as_tensor(v))
        else:
            out.append(creation.tensor(float(v) if isinstance(v, (int, float, np.number)) else v, dtype=dtype))
    return broadcast(*out)


def static(d) -> bool:
    """A plain number, not a symbolic dim (SymInt subclasses int: comparing one pins the plan)."""
    return isinstance(d, (int, np.integer)) and not isinstance(d, SymInt)


def broadcast_shape(*shapes) -> tuple:
    """numpy's broadcasting of shapes whose dims may be symbolic (a traced batch size)."""
    rank = max((len(s) for s in shapes), default=0)
    result = []
    for i in range(rank):
        dims = [s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0]
        pick = next((d for d in dims if not (static(d) and d == 1)), 1)
        for d in dims:
            if static(d) and static(pick) and d not in (1, pick):
                raise ValueError(f"shapes {[tuple(s) for s in shapes]} do not broadcast together")
        result.append(pick)
    return tuple(result)


def same_shape(a, b) -> bool:
    """``a == b`` for shapes of plain ints; False when a dim is symbolic (comparing a SymInt
    would pin the plan to the example batch size), so the caller expands, a no-op there."""
    a, b = tuple(a), tuple(b)
    return len(a) == len(b) and all(static(x) and static(y) and x == y for x, y in zip(a, b))


def broadcast(*tensors):
    """The tensors expanded to their common shape (``torch.broadcast_tensors``)."""
    shape = broadcast_shape(*(tuple(t.shape) for t in tensors))
    return tuple(t if same_shape(t.shape, shape) else t.expand(*shape) for t in tensors)


def draw(shape, like: Tensor, distribution: str) -> Tensor:
    """Samples (``"uniform"`` in [0, 1) or ``"normal"``) of ``shape`` and ``like``'s dtype: a
    ``random`` node of the running trace (fresh each plan run) or an eager draw."""
    shape = tuple(shape)
    if like._tracer is not None:
        base = like if same_shape(like.shape, shape) else like.expand(*shape)
        return creation.randn_like(base) if distribution == "normal" else creation.rand_like(base)
    tracer = current_tracer()
    if tracer is not None and hasattr(tracer, "draw"):
        return tracer.draw([d.sym if isinstance(d, SymInt) else int(d) for d in shape], distribution, like.dtype)
    make = creation.randn if distribution == "normal" else creation.rand
    return make(*shape, dtype=like.dtype, device=like.device)


class lazy_property:
    """A parameter derived on first read and then kept (``probs`` of a Categorical given
    ``logits``); as PyTorch's, it is not validated (the given parameter is), and it is derived
    with gradients recorded even when first read under ``no_grad`` (``sample()`` reads
    ``logits`` there; a later ``log_prob`` must still reach the parameters)."""

    def __init__(self, fn):
        self.fn = fn
        self.__doc__ = fn.__doc__

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        with enable_grad():
            value = self.fn(instance)
        instance.__dict__[self.fn.__name__] = value
        return value


def finfo(dtype):
    return np.finfo(dtype.numpy if hasattr(dtype, "numpy") else np.dtype(dtype.name))


class Distribution:
    """``torch.distributions.Distribution``: shapes, argument validation and the sampling API.

    Subclasses set ``arg_constraints`` (name -> constraint), ``support``, ``has_rsample`` and
    call ``super().__init__(batch_shape, event_shape, validate_args)``. Validation follows
    PyTorch 2.13: on by default (``Distribution.set_default_validate_args(False)`` turns it
    off), with PyTorch's messages; it reads eager tensors only (traced values are not known
    until the plan runs, so they are not checked).

    >>> import graphc as gc
    >>> try:
    ...     gc.distributions.Normal(0.0, -1.0)
    ... except ValueError as e:
    ...     print(str(e).splitlines()[0])
    Expected parameter scale (Tensor of shape ()) of distribution Normal(loc: 0.0, scale: -1.0) to satisfy the constraint GreaterThan(lower_bound=0.0), but found invalid values:
    """

    has_rsample = False
    has_enumerate_support = False
    _validate_args = True  # PyTorch: __debug__
    arg_constraints: dict = {}
    support = None

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        if value not in (True, False):
            raise ValueError
        Distribution._validate_args = value

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape = tuple(batch_shape)
        self._event_shape = tuple(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            for param, constraint in self.arg_constraints.items():
                if getattr(constraint, "is_dependent", False):
                    continue
                if param not in self.__dict__ and isinstance(getattr(type(self), param, None), lazy_property):
                    continue  # a lazily derived parameter: the given one is checked
                value = getattr(self, param)
                if not _is_eager(value):
                    continue
                if not constraint.check_all(value, self):
                    raise ValueError(f"Expected parameter {param} (Tensor of shape {tuple(value.shape)}) of distribution "
                                     f"{self!r} to satisfy the constraint {constraint!r}, but found invalid values:\n"
                                     f"{value}")

    @property
    def batch_shape(self) -> tuple:
        return self._batch_shape

    @property
    def event_shape(self) -> tuple:
        return self._event_shape

    def _extended_shape(self, sample_shape=()) -> tuple:
        if isinstance(sample_shape, (int, np.integer)):
            sample_shape = (sample_shape,)
        return tuple(sample_shape) + self._batch_shape + self._event_shape

    def sample(self, sample_shape=()) -> Tensor:
        """Samples without gradients (``rsample`` under ``no_grad`` unless overridden)."""
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} has no rsample (not reparameterizable); use sample()")

    def sample_n(self, n: int) -> Tensor:
        return self.sample((n,))

    def log_prob(self, value) -> Tensor:
        raise NotImplementedError

    def entropy(self) -> Tensor:
        raise NotImplementedError

    def cdf(self, value) -> Tensor:
        raise NotImplementedError

    @property
    def mean(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement mean")

    @property
    def mode(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement mode")

    @property
    def variance(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement variance")

    @property
    def stddev(self) -> Tensor:
        return self.variance.sqrt()

    def perplexity(self) -> Tensor:
        return self.entropy().exp()

    def _validate_sample(self, value) -> None:
        """PyTorch's checks of a ``log_prob`` argument: a tensor, broadcastable, in the support."""
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        event_dim_start = len(value.shape) - len(self._event_shape)
        if not same_shape(value.shape[event_dim_start:], self._event_shape):
            raise ValueError(f"The right-most size of value must match event_shape: {tuple(value.shape)} vs "
                             f"{self._event_shape}.")
        actual = tuple(value.shape)
        expected = self._batch_shape + self._event_shape
        for i, j in zip(reversed(actual), reversed(expected)):
            if static(i) and static(j) and i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: {actual} vs {expected}.")
        if self.support is not None and _is_eager(value) and not self.support.check_all(value, self):
            raise ValueError(f"Expected value argument (Tensor of shape {actual}) to be within the support "
                             f"({self.support!r}) of the distribution {self!r}, but found invalid values:\n{value}")

    def __repr__(self) -> str:
        names = [k for k in self.arg_constraints if k in self.__dict__]
        args = ", ".join(f"{k}: {self._param_repr(self.__dict__[k])}" for k in names)
        return f"{type(self).__name__}({args})"

    @staticmethod
    def _param_repr(value) -> str:
        shape = tuple(value.shape)
        if _is_eager(value) and int(np.prod(shape, dtype=np.int64)) == 1:
            return str(float(value.numpy().reshape(-1)[0]))
        return f"Size({list(shape)})"
