"""More reductions, each a composite over existing ops (autodiff gives the gradients):
all/any, prod (a halving tree of multiplies, so zeros get PyTorch's gradient), cumsum (a
triangular mask), cumprod, count_nonzero, var/std (correction or unbiased), var_mean/std_mean, logsumexp, amin and
Tensor.norm (p = 2, 1, inf, -inf, 0, 'fro', 'nuc' or any other number).
"""
from __future__ import annotations

import builtins
import math

import numpy as np

from ..core.dispatch import apply
from ..core.tensor import Tensor
from ..executor.backends import backend_of
from ..ir.errors import ShapeError, TraceError
from ..ir.types import is_static
from .linalg_core import svdvals
from .reductions import _dims, _flip, amax
from .shaping_more import movedim
from .surface import torchsymbol

_METHOD_AND_TOP = dict(functional=False)


def _const(input, array):
    """A constant on the input's device (eager) or recorded into the trace."""
    if input._tracer is None:
        array = backend_of(input.array).asarray(array)
    return Tensor(array)


def _static_axis(input, dim, what):
    rank = max(input.ndim, 1)
    if not -rank <= int(dim) < rank:
        raise ShapeError(f"{what}: dim {dim} is out of range for a rank-{input.ndim} tensor")
    axis = int(dim) % rank
    if input.ndim and not is_static(input.dims[axis]):
        raise TraceError(f"{what} along a symbolic dim ({input.dims[axis]}) of a traced tensor is not supported "
                         f"(the composite needs the dim's size); take {what} along a static dim",
                         input._tracer.user_location())
    return axis


def _nonzero(input):
    return input if input.dtype.name == "bool" else apply("ne", [input, 0])


def _bool_reduce(input, dim, keepdim, want_all):
    hits = apply("logical_not", [_nonzero(input)]) if want_all else _nonzero(input)
    count = apply("sum", [hits], {"dims": _dims(dim), "keepdim": keepdim})
    out = apply("eq" if want_all else "gt", [count, 0])
    return out.cast("uint8") if input.dtype.name == "uint8" else out  # PyTorch keeps uint8


@torchsymbol(**_METHOD_AND_TOP)
def all(input, dim=None, keepdim=False):  # noqa: A001 - PyTorch's name
    """True where every element along ``dim`` (an int, a tuple, None: all) is non-zero; bool
    (uint8 for uint8 inputs, as PyTorch).

    >>> import graphc as gc
    >>> gc.tensor([[1.0, 0.0], [2.0, 3.0]]).all(1).numpy().tolist()
    [False, True]
    """
    return _bool_reduce(input, dim, keepdim, True)


@torchsymbol(**_METHOD_AND_TOP)
def any(input, dim=None, keepdim=False):  # noqa: A001 - PyTorch's name
    """True where some element along ``dim`` is non-zero.

    >>> import graphc as gc
    >>> gc.tensor([[1.0, 0.0], [0.0, 0.0]]).any(1).numpy().tolist()
    [True, False]
    """
    return _bool_reduce(input, dim, keepdim, False)


def _promote_int(input, dtype):
    if dtype is not None:
        return input.cast(dtype if isinstance(dtype, str) else _dtype_name(dtype))
    return input if input.dtype.is_float else input.cast("int64")  # PyTorch: integers and bools in int64


def _dtype_name(dtype):
    from ..ir.types import DType

    return DType.from_any(dtype).name


@torchsymbol(**_METHOD_AND_TOP)
def prod(input, dim=None, keepdim=False, dtype=None):
    """The product along ``dim`` (all elements when None); integers and bools in int64. A
    halving tree of multiplies, so the gradient at zeros is PyTorch's (the product of the
    others). The dim must be static.

    >>> import graphc as gc
    >>> gc.tensor([[1.0, 2.0], [3.0, 4.0]]).prod(1).numpy().tolist()
    [2.0, 12.0]
    """
    x = _promote_int(input, dtype)
    if dim is None:
        x, axis = x.reshape(-1), 0
        if not is_static(x.dims[0]):
            raise TraceError("prod of every element of a tensor with a symbolic dim is not supported; "
                             "reduce along static dims", input._tracer.user_location())
    else:
        if x.ndim == 0:
            return x
        axis = _static_axis(x, dim, "prod")
    size = int(x.shape[axis])
    if size == 0:
        shape = list(x.shape)
        shape[axis] = 1
        x, size = _const(input, np.ones(shape, x.dtype.numpy)), 1
    while size > 1:
        half = size // 2
        low = _part(x, axis, 0, half)
        high = _part(x, axis, half, 2 * half)
        rest = _part(x, axis, 2 * half, size) if size % 2 else None
        x = low * high
        if rest is not None:
            from .creation import cat

            x = cat([x, rest], axis)
        size = half + size % 2
    if dim is None:
        return x.reshape(())
    return x if keepdim else x.squeeze(axis)


def _part(x, axis, start, stop):
    slices = [(None, None, 1)] * x.ndim
    slices[axis] = (start, stop, 1)
    return apply("slice", [x], {"slices": slices, "drop": []})


@torchsymbol(**_METHOD_AND_TOP)
def cumsum(input, dim, dtype=None):
    """Running sums along ``dim`` (integers and bools in int64), through a constant
    triangular mask; the dim must be static (not a traced batch dim).

    >>> import graphc as gc
    >>> gc.tensor([1.0, 2.0, 3.0]).cumsum(0).numpy().tolist()
    [1.0, 3.0, 6.0]
    """
    x = _promote_int(input, dtype)
    if x.ndim == 0:
        return x
    axis = _static_axis(x, dim, "cumsum")
    n = int(x.shape[axis])
    moved = x.movedim(axis, -1).unsqueeze(-1)  # (..., n, 1)
    upper = _const(input, np.triu(np.ones((n, n), dtype=bool)))
    out = apply("sum", [apply("where", [upper, moved, 0])], {"dims": (-2,), "keepdim": False})
    return out.movedim(-1, axis)


@torchsymbol(**_METHOD_AND_TOP)
def cumprod(input, dim, dtype=None):
    """Running products along ``dim`` (integers and bools in int64): one multiply per step,
    so the gradient at zeros is PyTorch's; the dim must be static.

    >>> import graphc as gc
    >>> gc.tensor([1.0, 2.0, 3.0]).cumprod(0).numpy().tolist()
    [1.0, 2.0, 6.0]
    """
    from .creation import cat

    x = _promote_int(input, dtype)
    if x.ndim == 0:
        return x
    axis = _static_axis(x, dim, "cumprod")
    n = int(x.shape[axis])
    if n <= 1:
        return x
    steps = [_part(x, axis, 0, 1)]
    for i in range(1, n):
        steps.append(steps[-1] * _part(x, axis, i, i + 1))
    return cat(steps, axis)


@torchsymbol(**_METHOD_AND_TOP)
def count_nonzero(input, dim=None):
    """The number of non-zero elements along ``dim`` (int64).

    >>> import graphc as gc
    >>> gc.count_nonzero(gc.tensor([0.0, 1.0, 2.0])).item()
    2
    """
    return apply("sum", [_nonzero(input)], {"dims": _dims(dim), "keepdim": False})


def _correction(unbiased, correction):
    if correction is not None:
        return correction
    return 1 if unbiased is None or unbiased else 0


def _count(x, dims):
    axes = range(x.ndim) if dims is None else [d % max(x.ndim, 1) for d in dims]
    sizes = [x.dims[a] for a in axes] if x.ndim else []
    if builtins.all(is_static(s) for s in sizes):
        return math.prod(int(s) for s in sizes)
    return apply("sum", [apply("add", [apply("mul", [x.detach(), 0.0]), 1.0])], {"dims": dims, "keepdim": True})


def _var_mean(input, dim, unbiased, keepdim, correction):
    if isinstance(dim, bool):  # var(x, unbiased) in the old signature
        dim, unbiased = None, dim
    if not input.dtype.is_float:
        raise ShapeError(f"var/std need a floating-point input, got {input.dtype.name}")
    dims = _dims(dim)
    mean = apply("mean", [input], {"dims": dims, "keepdim": True})
    diff = input - mean
    total = apply("sum", [diff * diff], {"dims": dims, "keepdim": True})
    n = _count(input, dims)
    c = _correction(unbiased, correction)
    var = total / builtins.max(n - c, 0) if isinstance(n, int) else total / (n - c)
    if not keepdim:  # a sum over the kept size-1 dims drops them
        var = apply("sum", [var], {"dims": dims, "keepdim": False})
        mean = apply("sum", [mean], {"dims": dims, "keepdim": False})
    return var, mean


@torchsymbol(**_METHOD_AND_TOP)
def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """The variance along ``dim`` with ``correction`` (default 1; ``unbiased=False`` is 0), as PyTorch.

    >>> import graphc as gc
    >>> gc.tensor([1.0, 2.0, 3.0, 4.0]).var().item()
    1.6666666269302368
    """
    return _var_mean(input, dim, unbiased, keepdim, correction)[0]


def _sqrt(x):
    """sqrt whose gradient at 0 is 0 (PyTorch's std/norm backward masks it), not inf * 0 = NaN."""
    zero = apply("eq", [x, 0.0])
    return apply("where", [zero, 0.0, apply("where", [zero, 1.0, x]).sqrt()])


@torchsymbol(**_METHOD_AND_TOP)
def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """The standard deviation: ``var(...).sqrt()``.

    >>> import graphc as gc
    >>> gc.tensor([1.0, 3.0]).std(unbiased=False).item()
    1.0
    """
    return _sqrt(_var_mean(input, dim, unbiased, keepdim, correction)[0])


@torchsymbol(method=False, functional=False)
def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """``(var, mean)`` along ``dim``, as ``torch.var_mean``."""
    return _var_mean(input, dim, unbiased, keepdim, correction)


@torchsymbol(method=False, functional=False)
def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """``(std, mean)`` along ``dim``, as ``torch.std_mean``."""
    var_, mean_ = _var_mean(input, dim, unbiased, keepdim, correction)
    return _sqrt(var_), mean_


@torchsymbol(**_METHOD_AND_TOP)
def logsumexp(input, dim, keepdim=False):
    """``log(sum(exp(x)))`` along ``dim``, shifted by the (finite) max for stability; integers
    give float32.

    >>> import graphc as gc
    >>> round(gc.tensor([0.0, 0.0]).logsumexp(0).item(), 6)
    0.693147
    """
    x = input if input.dtype.is_float else input.cast("float32")
    dims = _dims(dim)
    if x.ndim == 0:
        return x
    top = amax(x, dims, keepdim=True).detach()
    top = apply("where", [apply("isinf", [top]), 0.0, top])
    out = apply("sum", [(x - top).exp()], {"dims": dims, "keepdim": True}).log() + top
    if not keepdim:
        out = apply("sum", [out], {"dims": dims, "keepdim": False})  # drops the kept size-1 dims
    return out


@torchsymbol(**_METHOD_AND_TOP)
def amin(input, dim=None, keepdim=False):
    """Min over one or several dims (values only; ties share the gradient evenly).

    >>> import graphc as gc
    >>> gc.tensor([[1.0, 5.0], [7.0, 2.0]]).amin(1).numpy().tolist()
    [1.0, 2.0]
    """
    return _flip(apply("max", [_flip(input)], {"dims": _dims(dim), "keepdim": keepdim}))


@torchsymbol(**_METHOD_AND_TOP)
def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    """The vector p-norm over ``dim`` (all elements when None): p = 2 / 'fro' (the default),
    1, inf, -inf, 0 (the count of non-zeros) or any other number; p = 'nuc' is the nuclear norm
    of the matrices in ``dim`` (the last two dims when None).

    >>> import graphc as gc
    >>> gc.tensor([3.0, 4.0]).norm().item()
    5.0
    """
    x = input if dtype is None else input.cast(_dtype_name(dtype))
    if not x.dtype.is_float:
        raise ShapeError(f"norm needs a floating-point input, got {x.dtype.name}")
    if p == "nuc":  # the nuclear norm of the matrices in dims (the last two when None)
        return _nuclear(x, (-2, -1) if dim is None else dim, keepdim)
    dims = _dims(dim)
    if p in ("fro", 2, 2.0):
        return _sqrt(apply("sum", [x * x], {"dims": dims, "keepdim": keepdim}))
    a = x.abs()
    if p in (1, 1.0):
        return apply("sum", [a], {"dims": dims, "keepdim": keepdim})
    if p == math.inf:
        return amax(a, dims, keepdim)
    if p == -math.inf:
        return amin(a, dims, keepdim)
    if isinstance(p, str):
        raise ShapeError(f"norm: p = {p!r} is not supported ('fro', 'nuc', a number or inf)")
    attrs = {"dims": dims, "keepdim": keepdim}
    if p == 0:  # the count of non-zeros; the finite part of x * 0 keeps PyTorch's zero gradient
        count = apply("sum", [apply("ne", [x, 0.0]).cast(x.dtype.name)], attrs)
        finite = apply("logical_not", [apply("logical_or", [apply("isnan", [x]), apply("isinf", [x])])])
        return count + apply("sum", [apply("where", [finite, x, 0.0]) * 0.0], attrs)
    return _power_norm(a, float(p), attrs)


def _power_norm(a, p, attrs):
    """sum(|x|^p)^(1/p) with PyTorch's subgradient 0 where |x| or the norm is 0: a zero adds
    0 (p > 0) or inf (p < 0) through a constant branch, so no 0 * inf reaches the gradient."""
    is_zero = apply("eq", [a, 0.0])
    powered = apply("where", [is_zero, 0.0 if p > 0 else math.inf, apply("where", [is_zero, 1.0, a]) ** p])
    total = apply("sum", [powered], attrs)
    degenerate = apply("eq", [total, 0.0 if p > 0 else math.inf])  # the norm is 0 there
    return apply("where", [degenerate, 0.0, apply("where", [degenerate, 1.0, total]) ** (1.0 / p)])


def _nuclear(x, dim, keepdim):
    """The sum of the singular values of the matrices in the two dims ``dim``."""
    d0, d1 = (d % x.ndim for d in dim)
    out = svdvals(movedim(x, (d0, d1), (-2, -1))).sum(-1)
    if keepdim:
        for d in sorted((d0, d1)):
            out = out.unsqueeze(d)
    return out
