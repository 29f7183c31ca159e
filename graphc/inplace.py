"""In-place tensor methods (``normal_``, ``uniform_``, ``fill_``, ``zero_``, ``copy_``,
``add_``/``sub_``/``mul_``/``div_``/``clamp_`` and ``t[i] = v``), eager only.

They write into the tensor's array, so a compiled plan that shares it (a model's parameters)
sees the new values: ``model.fc.weight.data.normal_(0, 0.01)`` after ``gc.compile`` changes
what the plan computes. A graph never mutates its inputs, so inside a traced function they
raise a ``TraceError`` (write ``x = x * 2`` there instead).
"""
from __future__ import annotations

import numpy as np

from .autograd import is_grad_enabled
from .executor.backends import backend_of
from .ir.errors import GraphcError, ShapeError, TraceError
from .ir.types import promote
from .random import generator
from .surface import torchsymbol
from .tensor import Tensor

_METHOD_ONLY = dict(top=False, functional=False)


def _eager(tensor: Tensor, what: str) -> None:
    if tensor._tracer is not None:
        raise TraceError(f"{what} changes a tensor in place, which a compiled graph cannot record (graphc graphs "
                         "never mutate their inputs): initialise weights before gc.compile, and inside the model "
                         "write x = x.op(...) instead", tensor._tracer.user_location())
    if tensor._grad_fn is not None and is_grad_enabled():
        from .tracer import user_source

        raise GraphcError(f"{what} on a tensor computed with gradients recorded: its gradient would go wrong; write "
                          "x = x.op(...) instead (or change it inside gc.no_grad())", f"at {user_source()}")


def _on_backend(tensor: Tensor, value):
    """``value`` (a Tensor, array or scalar) as an array on ``tensor``'s device."""
    value = value.array if isinstance(value, Tensor) else value
    if not isinstance(value, (np.ndarray, np.generic)) and not hasattr(value, "__cuda_array_interface__"):
        return value  # Python scalars and lists: numpy/cupy convert them on assignment
    source, target = backend_of(value), backend_of(tensor.array)
    return value if source is target else target.asarray(source.to_numpy(value))


def _write(tensor: Tensor, index, value, what: str) -> Tensor:
    try:
        tensor.array[index] = _on_backend(tensor, value)
    except (ValueError, IndexError, TypeError) as e:
        raise ShapeError(f"{what}: cannot write {_describe(value)} into a tensor of shape "
                         f"{tuple(tensor.array.shape)}: {e}") from None
    tensor._version += 1  # an op that saved this tensor for backward() now refuses it
    return tensor


def _describe(value) -> str:
    shape = getattr(value, "shape", None)
    return f"shape {tuple(shape)}" if shape is not None else repr(value)


def _need_float(tensor: Tensor, what: str) -> None:
    if not tensor.dtype.is_float:
        raise GraphcError(f"{what} needs a floating-point tensor, got {tensor.dtype.name}")


@torchsymbol(**_METHOD_ONLY)
def normal_(input, mean=0.0, std=1.0):
    """Fill with samples from N(mean, std**2) drawn from graphc's seeded generator; returns the tensor.

    >>> import graphc as gc
    >>> gc.manual_seed(0)
    >>> w = gc.zeros(1000).normal_(0.0, 0.01)
    >>> 0.009 < float(w.numpy().std()) < 0.011
    True
    """
    _eager(input, "normal_")
    _need_float(input, "normal_")
    if not std >= 0:
        raise GraphcError(f"normal_ expects std >= 0, got {std}")
    return _write(input, ..., generator().normal(mean, std, size=input.shape), "normal_")


@torchsymbol(**_METHOD_ONLY)
def uniform_(input, a=0.0, b=1.0):
    """Fill with samples from U[a, b) (PyTorch's ``from``/``to``); returns the tensor.

    >>> import graphc as gc
    >>> w = gc.zeros(1000).uniform_(-0.1, 0.1)
    >>> bool((w.numpy() >= -0.1).all() and (w.numpy() <= 0.1).all())
    True
    """
    _eager(input, "uniform_")
    _need_float(input, "uniform_")
    if not a <= b:
        raise GraphcError(f"uniform_ expects a <= b, got a={a} > b={b}")
    return _write(input, ..., generator().uniform(a, b, size=input.shape), "uniform_")


@torchsymbol(**_METHOD_ONLY)
def fill_(input, value):
    """Set every element to ``value`` (a number or a 0-d tensor); returns the tensor.

    >>> import graphc as gc
    >>> gc.zeros(3).fill_(2.5).numpy().tolist()
    [2.5, 2.5, 2.5]
    """
    _eager(input, "fill_")
    if isinstance(value, Tensor) and value.ndim:
        raise ShapeError(f"fill_ takes a number or a 0-d tensor, got shape {value.shape}")
    return _write(input, ..., value, "fill_")


@torchsymbol(**_METHOD_ONLY)
def zero_(input):
    """Set every element to 0; returns the tensor."""
    return fill_(input, 0)


@torchsymbol(**_METHOD_ONLY)
def copy_(input, src):
    """Copy ``src`` (broadcast to this shape, cast to this dtype, from any device) into the
    tensor; returns the tensor.

    >>> import graphc as gc
    >>> gc.zeros(2, 2).copy_(gc.tensor([1.0, 2.0])).numpy().tolist()
    [[1.0, 2.0], [1.0, 2.0]]
    """
    _eager(input, "copy_")
    return _write(input, ..., src, "copy_")


def setitem(tensor: Tensor, index, value) -> None:
    """``t[index] = value`` (numpy's indexing rules; bool or int tensors index too)."""
    _eager(tensor, "t[...] = value")
    parts = index if isinstance(index, tuple) else (index,)
    parts = tuple(_on_backend(tensor, p) if isinstance(p, Tensor) else p for p in parts)
    _write(tensor, parts if isinstance(index, tuple) else parts[0], value, "t[...] = value")


def _inplace(op_name: str, compute):
    def method(input, *args, **kwargs):
        _eager(input, f"{op_name}_")
        out = compute(input, *args, **kwargs)
        if promote(input.dtype, out.dtype) is not input.dtype:
            raise GraphcError(f"{op_name}_: the result is {out.dtype.name}, which cannot be stored in place in a "
                              f"{input.dtype.name} tensor (as in PyTorch); use the out-of-place {op_name}")
        return _write(input, ..., out, f"{op_name}_")
    method.__name__ = method.__qualname__ = f"{op_name}_"
    method.__doc__ = f"In-place ``{op_name}``: computes it, writes the result into the tensor, returns the tensor."
    return torchsymbol(**_METHOD_ONLY)(method)


add_ = _inplace("add", lambda x, other, alpha=1: x + (other if alpha == 1 else other * alpha))
sub_ = _inplace("sub", lambda x, other, alpha=1: x - (other if alpha == 1 else other * alpha))
mul_ = _inplace("mul", lambda x, other: x * other)
div_ = _inplace("div", lambda x, other: x / other)
clamp_ = _inplace("clamp", lambda x, min=None, max=None: x.clamp(min, max))  # noqa: A006
