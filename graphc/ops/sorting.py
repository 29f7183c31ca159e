"""Sorting and order statistics: ``sort``, ``argsort``, ``msort``, ``kthvalue``, ``median``,
``nanmedian``, ``mode``, ``quantile``, ``nanquantile``.

The positions come from the int64 primitives ``argsort`` and ``mode_index`` (ir/ops/sort.py:
stable, NaN largest); the values are ``gather``s of the input at them, so the gradient is
scattered back to the chosen elements, as PyTorch's. Which order statistic a row takes is an
int64 tensor computed from the row's length (and NaN count), so a traced batch dim compiles.
Ties: ``median``/``kthvalue`` take the element the stable sort puts there (PyTorch's
quickselect may name another of equal value), ``mode`` the last position of the smallest most
frequent value, as PyTorch on CPU.
"""
from __future__ import annotations

from collections import namedtuple

from ..core.dispatch import apply
from ..core.tensor import Tensor
from ..ir.errors import ShapeError
from .scatter_ops import _axis, gather
from .surface import torchsymbol

_METHOD_AND_TOP = dict(functional=False)
SortResult = namedtuple("sort", ["values", "indices"])
KthvalueResult = namedtuple("kthvalue", ["values", "indices"])
MedianResult = namedtuple("median", ["values", "indices"])
ModeResult = namedtuple("mode", ["values", "indices"])


def _argsort(input, axis, descending):
    return apply("argsort", [input], {"dim": axis, "descending": bool(descending)})


@torchsymbol(**_METHOD_AND_TOP)
def sort(input, dim=-1, descending=False, stable=False):
    """``(values, indices)`` sorted along ``dim`` (stable; NaN counts as the largest).

    >>> import graphc as gc
    >>> v, i = gc.tensor([3.0, 1.0, 2.0]).sort(descending=True)
    >>> v.numpy().tolist(), i.numpy().tolist()
    ([3.0, 2.0, 1.0], [0, 2, 1])
    """
    if input.ndim == 0:
        return SortResult(input * 1 if input.dtype.is_float else input, _zeros_index(input))
    axis = _axis(dim, input.ndim, "sort")
    indices = _argsort(input, axis, descending)
    return SortResult(gather(input, axis, indices), indices)


@torchsymbol(**_METHOD_AND_TOP)
def argsort(input, dim=-1, descending=False, stable=False):
    """The indices that sort ``input`` along ``dim`` (stable: equal values keep their order).

    >>> import graphc as gc
    >>> gc.tensor([2.0, 1.0, 2.0, 0.0]).argsort().numpy().tolist()
    [3, 1, 0, 2]
    """
    if input.ndim == 0:
        return _zeros_index(input)
    return _argsort(input, _axis(dim, input.ndim, "argsort"), descending)


@torchsymbol(**_METHOD_AND_TOP)
def msort(input):
    """``sort(input, dim=0).values``.

    >>> import graphc as gc
    >>> gc.msort(gc.tensor([[2.0, 1.0], [0.0, 3.0]])).numpy().tolist()
    [[0.0, 1.0], [2.0, 3.0]]
    """
    return sort(input, 0).values


def _zeros_index(input, shape=None):
    return apply("full", [], {"shape": list(input.dims if shape is None else shape), "value": 0.0, "dtype": "int64"})


def _kept(input, axis):
    """``input``'s dims with ``axis`` at 1 (symbolic dims kept)."""
    dims = list(input.dims)
    dims[axis] = 1
    return dims


def _row_length(input, axis):
    """The length of ``dim`` as an int64 tensor of the kept shape (a traced dim's run-time size)."""
    ones = apply("full", [], {"shape": list(input.dims), "value": 1.0, "dtype": "int64"})
    return apply("sum", [ones], {"dims": (axis,), "keepdim": True})


def _nan_count(input, axis):
    return apply("sum", [apply("isnan", [input]).long()], {"dims": (axis,), "keepdim": True})


def _pick(input, axis, position, keepdim, result):
    """The element at sorted ``position`` (int64, kept shape) of each row: (values, indices)."""
    order = _argsort(input, axis, False)
    indices = gather(order, axis, position)
    values = gather(input, axis, indices)
    if not keepdim:
        values, indices = values.squeeze(axis), indices.squeeze(axis)
    return result(values, indices)


def _prepared(input, dim, what):
    if input.dtype.name == "bool":
        raise ShapeError(f"{what} does not take bool tensors")
    if input.ndim == 0:
        return input.reshape(1), 0, True
    return input, _axis(dim, input.ndim, what), False


def _floor_half(t):
    return apply("div", [t, 2], {"rounding_mode": "floor"})


@torchsymbol(**_METHOD_AND_TOP)
def kthvalue(input, k, dim=-1, keepdim=False):
    """The ``k``-th smallest element along ``dim`` (1-based) and its index.

    >>> import graphc as gc
    >>> v, i = gc.tensor([3.0, 1.0, 2.0]).kthvalue(2)
    >>> v.item(), i.item()
    (2.0, 2)
    """
    x, axis, scalar = _prepared(input, dim, "kthvalue")
    size = x.dims[axis]
    if isinstance(size, int) and not 1 <= k <= size:
        raise ShapeError(f"kthvalue: k = {k} is out of range for a dim of size {size}")
    position = apply("full", [], {"shape": _kept(x, axis), "value": float(k - 1), "dtype": "int64"})
    return _scalar_result(_pick(x, axis, position, keepdim or scalar, KthvalueResult), scalar)


def _scalar_result(result, scalar):
    if not scalar:
        return result
    return type(result)(result.values.reshape(()), result.indices.reshape(()))


def _median(input, dim, keepdim, skip_nan, what, result):
    if dim is None:
        flat = input.reshape(-1)
        out = _median(flat, 0, False, skip_nan, what, result)
        return out.values
    x, axis, scalar = _prepared(input, dim, what)
    length = _row_length(x, axis)
    if not x.dtype.is_float:
        position = _floor_half(length - 1)
    elif skip_nan:  # the lower middle of the non-NaN values (all NaN: the first NaN)
        position = apply("maximum", [_floor_half(length - _nan_count(x, axis) - 1), 0])
    else:  # a row with NaN gives its first NaN, which the stable sort puts right after the numbers
        nans = _nan_count(x, axis)
        position = apply("where", [nans > 0, length - nans, _floor_half(length - 1)])
    return _scalar_result(_pick(x, axis, position, keepdim or scalar, result), scalar)


@torchsymbol(**_METHOD_AND_TOP)
def median(input, dim=None, keepdim=False):
    """The lower median (of the flattened tensor: the value; along ``dim``: ``(values,
    indices)``); a row holding NaN gives NaN, as PyTorch.

    >>> import graphc as gc
    >>> gc.tensor([4.0, 1.0, 3.0, 2.0]).median().item()
    2.0
    """
    return _median(input, dim, keepdim, False, "median", MedianResult)


@torchsymbol(**_METHOD_AND_TOP)
def nanmedian(input, dim=None, keepdim=False):
    """``median`` of the values that are not NaN (NaN where a row has none).

    >>> import graphc as gc
    >>> gc.tensor([4.0, float("nan"), 1.0]).nanmedian().item()
    1.0
    """
    return _median(input, dim, keepdim, True, "nanmedian", MedianResult)


@torchsymbol(**_METHOD_AND_TOP)
def mode(input, dim=-1, keepdim=False):
    """The most frequent value along ``dim`` (the smallest at ties) and the last index holding it.

    >>> import graphc as gc
    >>> v, i = gc.tensor([3.0, 1.0, 3.0, 1.0, 2.0]).mode()
    >>> v.item(), i.item()
    (1.0, 3)
    """
    x, axis, scalar = _prepared(input, dim, "mode")
    indices = apply("mode_index", [x], {"dim": axis})
    values = gather(x, axis, indices)
    if not (keepdim or scalar):
        values, indices = values.squeeze(axis), indices.squeeze(axis)
    return _scalar_result(ModeResult(values, indices), scalar)


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(input, q, dim, keepdim, interpolation, skip_nan, what):
    if interpolation not in _INTERPOLATIONS:
        raise ShapeError(f"{what}: interpolation must be one of {', '.join(_INTERPOLATIONS)}, got {interpolation!r}")
    if not input.dtype.is_float:
        raise ShapeError(f"{what}: input must be a float tensor, got {input.dtype.name}")
    scalar_q = not isinstance(q, Tensor) or q.ndim == 0
    if not isinstance(q, Tensor):
        if not 0 <= q <= 1:
            raise ShapeError(f"{what}: q must be in [0, 1], got {q}")
        q = Tensor(__import__("numpy").asarray([q], dtype=input.dtype.numpy))
    elif q.ndim > 1:
        raise ShapeError(f"{what}: q must be a scalar or a 1-D tensor, got {q.ndim}-d")
    q = q.reshape(-1).cast(input.dtype)
    x = input.reshape(-1) if dim is None else (input.reshape(1) if input.ndim == 0 else input)
    axis = 0 if dim is None else _axis(dim, max(input.ndim, 1), what)
    rows = gather(x, axis, _argsort(x, axis, False)).movedim(axis, -1).unsqueeze(0)  # (1, ..., n)
    length = _row_length(rows, rows.ndim - 1)
    nans = _nan_count(rows, rows.ndim - 1)
    count = length - nans if skip_nan else length
    qs = q.reshape(-1, *([1] * (rows.ndim - 1)))  # (Q, 1, ..., 1)
    rank = qs * (count.cast(input.dtype) - 1)
    rank = apply("maximum", [rank, 0.0])
    below, above = rank.floor(), rank.ceil()
    if interpolation == "nearest":
        below = above = apply("round", [rank])
    elif interpolation == "lower":
        above = below
    elif interpolation == "higher":
        below = above
    shape = [q.shape[0], *rows.shape[1:-1], rows.shape[-1]]
    rows = rows.expand(*shape)
    low = gather(rows, -1, below.long())
    high = gather(rows, -1, above.long())
    if interpolation in ("linear", "midpoint"):
        weight = rank - below if interpolation == "linear" else rank * 0 + 0.5
        out = _lerp(low, high, weight)
    else:
        out = low
    empty = (count == 0) if skip_nan else (nans > 0)
    out = apply("where", [empty, float("nan"), out])  # (Q, ..., 1)
    out = out.squeeze(-1)
    if keepdim and input.ndim:
        out = out.reshape(q.shape[0], *([1] * input.ndim)) if dim is None else out.unsqueeze(axis + 1)
    return out.squeeze(0) if scalar_q else out


def _lerp(low, high, weight):
    """PyTorch's lerp, from the nearer end (so infinities give its NaN and its rounding)."""
    span = high - low
    return apply("where", [weight < 0.5, low + weight * span, high - span * (1 - weight)])


@torchsymbol(**_METHOD_AND_TOP)
def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """The ``q``-th quantiles (a number or a 1-D tensor, whose dim comes first) along ``dim``
    (of the flattened tensor when None); a row with NaN gives NaN.

    >>> import graphc as gc
    >>> gc.tensor([1.0, 2.0, 3.0, 4.0]).quantile(0.5).item()
    2.5
    """
    return _quantile(input, q, dim, keepdim, interpolation, False, "quantile")


@torchsymbol(**_METHOD_AND_TOP)
def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """``quantile`` ignoring NaN (NaN where a row has no number).

    >>> import graphc as gc
    >>> gc.tensor([1.0, float("nan"), 3.0]).nanquantile(0.5).item()
    2.0
    """
    return _quantile(input, q, dim, keepdim, interpolation, True, "nanquantile")
