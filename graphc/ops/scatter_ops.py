"""Index-tensor reads and writes along one dim, composites over the ``gather`` / ``scatter``
primitives (ir/ops/scatter.py): ``gather``, ``scatter``, ``scatter_add``, ``scatter_reduce``,
``index_select``, ``index_add``, ``index_copy``, ``index_fill``, ``index_reduce``, ``take``,
``take_along_dim``, ``put``, ``masked_scatter``.

Gradients come from the primitives' vjps (gather's is a scatter-add, scatter's a gather),
except for the ``prod`` / ``amax`` / ``amin`` reductions, whose primitive has no vjp: their
value is computed without gradient and a zero-valued term carrying PyTorch's gradient is added
(``w * (x - x.detach())``, with PyTorch's weights: ties share evenly, zeros of a product get
the product of the others).
"""
from __future__ import annotations

import numpy as np

from ..core.dispatch import apply
from ..core.tensor import Tensor
from ..ir.errors import ShapeError
from .surface import torchsymbol

_METHOD_AND_TOP = dict(functional=False)
_METHOD_ONLY = dict(top=False, functional=False)
_REDUCE_NAMES = {"sum": "sum", "add": "sum", "prod": "prod", "multiply": "prod", "amax": "amax", "amin": "amin",
                 "mean": "mean"}


def _axis(dim, rank, what):
    if not -max(rank, 1) <= dim < max(rank, 1):
        raise ShapeError(f"{what}: dim {dim} is out of range for a rank-{rank} tensor")
    return dim % max(rank, 1)


def _long_index(index, what):
    if not isinstance(index, Tensor):
        index = Tensor(np.asarray(index, dtype=np.int64))
    if index.dtype.name != "int64":
        raise ShapeError(f"{what}: index must be an int64 tensor, got {index.dtype.name}")
    return index


def _as_1d(x):
    return x.reshape(1) if x.ndim == 0 else x


def _expand_along(index, dim, shape):
    """A 1-D index of length k as a tensor of ``shape`` with ``k`` at ``dim`` (gather's index)."""
    index = _as_1d(index)
    view = [1] * len(shape)
    view[dim] = -1
    target = list(shape)
    target[dim] = index.shape[0]
    return index.reshape(view).expand(target)


@torchsymbol(**_METHOD_AND_TOP)
def gather(input, dim, index, *, sparse_grad=False):
    """``out[i][j] = input[index[i][j]][j]`` (for ``dim=0``): reads along ``dim`` at ``index``;
    the gradient is scattered back (added at repeated indices).

    >>> import graphc as gc
    >>> gc.tensor([[1.0, 2.0], [3.0, 4.0]]).gather(1, gc.tensor([[1, 1], [0, 1]])).numpy().tolist()
    [[2.0, 2.0], [3.0, 4.0]]
    """
    index = _long_index(index, "gather")
    if input.ndim == 0 or index.ndim == 0:
        out = gather(_as_1d(input), 0 if input.ndim == 0 else dim, _as_1d(index))
        return out.reshape(index.shape)
    return apply("gather", [input, index], {"dim": _axis(dim, input.ndim, "gather")})


def _src_like(input, index, src, what):
    """``src`` as a tensor of ``index``'s shape and ``input``'s dtype (a number is filled in; a
    larger src is cut to the index's shape, as PyTorch reads only that corner)."""
    if not isinstance(src, Tensor):
        return apply("full", [], {"shape": list(index.dims), "value": float(src), "dtype": input.dtype.name})
    if src.dtype != input.dtype:
        raise ShapeError(f"{what}: src dtype {src.dtype.name} must match the input's {input.dtype.name}")
    if src.ndim == 0 and index.ndim == 0:
        return src
    if tuple(src.dims) != tuple(index.dims):
        slices = [(None, s, 1) for s in index.shape]
        src = apply("slice", [src], {"slices": slices, "drop": []})
    return src


def _scatter_prim(input, dim, index, src, reduce):
    if input.ndim == 0:
        out = _scatter_prim(_as_1d(input), 0, _as_1d(index), _as_1d(src), reduce)
        return out.reshape(())
    return apply("scatter", [input, index, src], {"dim": _axis(dim, input.ndim, "scatter"), "reduce": reduce})


@torchsymbol(**_METHOD_AND_TOP)
def scatter(input, dim, index, src=None, value=None, *, reduce=None):
    """``input`` with ``src`` (or the number ``value``) written along ``dim`` at ``index``;
    ``reduce="add"``/``"multiply"`` combines instead of writing (PyTorch's older form).

    >>> import graphc as gc
    >>> gc.zeros(2, 3).scatter(1, gc.tensor([[2], [0]]), 5.0).numpy().tolist()
    [[0.0, 0.0, 5.0], [5.0, 0.0, 0.0]]
    """
    index = _long_index(index, "scatter")
    src = value if src is None else src
    if src is None:
        raise ShapeError("scatter needs src or value")
    src = _src_like(input, index, src, "scatter")
    if reduce is None:
        return _scatter_prim(input, dim, index, src, "none")
    if reduce not in ("add", "multiply"):
        raise ShapeError(f"scatter: reduce must be 'add' or 'multiply', got {reduce!r}")
    return scatter_reduce(input, dim, index, src, "sum" if reduce == "add" else "prod")


@torchsymbol(**_METHOD_AND_TOP)
def scatter_add(input, dim, index, src):
    """``input`` with ``src`` added along ``dim`` at ``index`` (repeats add up).

    >>> import graphc as gc
    >>> gc.zeros(3).scatter_add(0, gc.tensor([0, 0, 2]), gc.tensor([1.0, 2.0, 3.0])).numpy().tolist()
    [3.0, 0.0, 3.0]
    """
    index = _long_index(index, "scatter_add")
    return _scatter_prim(input, dim, index, _src_like(input, index, src, "scatter_add"), "sum")


_IDENTITY = {"sum": 0.0, "prod": 1.0, "amax": float("-inf"), "amin": float("inf"), "mean": 0.0}


def _filled(like, value):
    """A tensor of ``like``'s shape (symbolic dims kept) and dtype, every element ``value``."""
    return apply("full", [], {"shape": list(like.dims), "value": float(value), "dtype": like.dtype.name})


def _written(input, dim, index):
    """A bool tensor of ``input``'s shape: which positions the index writes."""
    ones = apply("full", [], {"shape": list(index.dims), "value": 1.0, "dtype": "float32"})
    zeros = apply("full", [], {"shape": list(input.dims), "value": 0.0, "dtype": "float32"})
    return _scatter_prim(zeros, dim, index, ones, "sum") > 0


@torchsymbol(**_METHOD_AND_TOP)
def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):
    """``input`` with ``src`` combined along ``dim`` at ``index`` by ``reduce`` (``"sum"``,
    ``"prod"``, ``"mean"``, ``"amax"``, ``"amin"``); ``include_self=False`` leaves the input's
    own values out at the positions written.

    >>> import graphc as gc
    >>> x = gc.tensor([1.0, 2.0, 3.0])
    >>> x.scatter_reduce(0, gc.tensor([0, 0]), gc.tensor([5.0, 7.0]), "amax").numpy().tolist()
    [7.0, 2.0, 3.0]
    >>> x.scatter_reduce(0, gc.tensor([0, 0]), gc.tensor([5.0, 7.0]), "mean", include_self=False).numpy().tolist()
    [6.0, 2.0, 3.0]
    """
    if reduce not in _IDENTITY:
        raise ShapeError(f"scatter_reduce: reduce must be one of sum, prod, mean, amax, amin, got {reduce!r}")
    index = _long_index(index, "scatter_reduce")
    src = _src_like(input, index, src, "scatter_reduce")
    written = None if include_self else _written(input, dim, index)
    base = input if include_self else apply("where", [written, _IDENTITY[reduce], input])
    if reduce == "sum":
        return _scatter_prim(base, dim, index, src, "sum")
    if reduce == "mean":
        ones = _filled(src.detach(), 1)
        count = _scatter_prim(_filled(input.detach(), 1 if include_self else 0), dim, index, ones, "sum")
        total = _scatter_prim(base, dim, index, src, "sum")
        if not input.dtype.is_float:
            return apply("where", [count == 0, input, apply("div", [total, count], {"rounding_mode": "floor"})])
        return apply("where", [count == 0, input, total / apply("maximum", [count, 1])])
    return _reduce_with_grad(input, dim, index, src, reduce, base, written)


def _reduce_with_grad(input, dim, index, src, reduce, base, written):
    """prod / amax / amin: the value without gradient, plus zero-valued terms whose gradient is
    PyTorch's (FunctionsManual's scatter_reduce_backward)."""
    value = _scatter_prim(base.detach(), dim, index, src.detach(), reduce)
    if not (input.requires_grad or src.requires_grad) or not input.dtype.is_float:
        return value
    x, s = input.detach(), src.detach()
    if reduce == "prod":
        masked_x = apply("where", [x == 0, 1.0, x])
        masked_base = masked_x if written is None else apply("where", [written, 1.0, masked_x])
        w_self = _scatter_prim(masked_base, dim, index, s, "prod") / masked_x
        s_zero = s == 0
        zeros = apply("mul", [x, 0.0])
        single = apply("logical_and", [s_zero, gather(_scatter_prim(zeros, dim, index, s_zero.cast(x.dtype), "sum"), dim, index) == 1])
        masked_src_value = _scatter_prim(base.detach(), dim, index, apply("where", [single, 1.0, s]), "prod")
        w_src = apply("where", [single, gather(masked_src_value, dim, index),
                                gather(value, dim, index) / apply("where", [s_zero, 1.0, s])])
    else:
        self_hit = (x == value).cast(x.dtype)
        src_hit = (s == gather(value, dim, index)).cast(x.dtype)
        count = _scatter_prim(self_hit, dim, index, src_hit, "sum")
        w_self = apply("where", [count > 0, self_hit / apply("maximum", [count, 1]), 0.0])
        w_src = src_hit / gather(count, dim, index)  # count >= 1 wherever src lands
    if written is not None:
        w_self = apply("where", [written, 0.0, w_self])
    # exactly zero in value (infinities and NaN are held out: they would give inf - inf)
    zero_x = w_self * apply("where", [_finite(x), input - x, 0.0])
    zero_src = w_src * apply("where", [_finite(s), src - s, 0.0])
    return value + _scatter_prim(zero_x, dim, index, zero_src, "sum")


def _finite(x):
    return apply("eq", [apply("sub", [x, x]), 0.0])  # False at inf and NaN
