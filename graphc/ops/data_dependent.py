"""Ops whose output size depends on the values: ``nonzero``, ``argwhere``, ``masked_select``,
``unique``, ``unique_consecutive``. A compiled plan has static shapes, so these work eagerly
and raise ``TraceError`` when traced (``nonzero_static``, whose size is given, compiles: a
primitive padding with ``fill_value``). ``masked_select`` keeps its gradient: the positions
are found eagerly and the values are a ``gather`` at them.
"""
from __future__ import annotations

import numpy as np

from ..core.dispatch import apply
from ..core.tensor import Tensor
from ..core.tracer import current_tracer
from ..ir.errors import ShapeError, TraceError
from .scatter_ops import gather
from .shaping_more import _const
from .surface import torchsymbol

_METHOD_AND_TOP = dict(functional=False)


def _eager_only(what, *tensors):
    """Refuse a traced operand: the result's size would depend on values the trace lacks."""
    tracer = current_tracer()
    for t in tensors:
        if isinstance(t, Tensor) and (t._tracer is not None or (tracer is not None and tracer.state_name(t))):
            where = (t._tracer or tracer).user_location()
            raise TraceError(f"{what} cannot be compiled: its output size depends on the tensor's values, and a "
                             "plan has static shapes; use a fixed-size form (nonzero_static, gc.where(mask, x, 0)) "
                             "or call it outside the compiled function", where)


def _host(t):
    return np.asarray(t.detach().numpy())


@torchsymbol(**_METHOD_AND_TOP)
def nonzero(input, *, as_tuple=False):
    """The indices of the non-zero elements, one row each (row-major order): an int64 tensor
    of shape ``(count, ndim)``, or with ``as_tuple=True`` one 1-D tensor per dim. Eager only.

    >>> import graphc as gc
    >>> gc.tensor([[0.0, 1.0], [2.0, 0.0]]).nonzero().numpy().tolist()
    [[0, 1], [1, 0]]
    """
    _eager_only("nonzero", input)
    found = np.argwhere(_host(input)).astype(np.int64)
    if as_tuple:
        if input.ndim == 0:
            return (_const(input, found[:, 0] if found.shape[1] else np.zeros(len(found), np.int64)),)
        return tuple(_const(input, np.ascontiguousarray(found[:, d])) for d in range(input.ndim))
    return _const(input, found)


@torchsymbol(**_METHOD_AND_TOP)
def argwhere(input):
    """``nonzero(input)``: the indices of the non-zero elements, shape ``(count, ndim)``. Eager only.

    >>> import graphc as gc
    >>> gc.argwhere(gc.tensor([0, 3, 0, 4])).numpy().tolist()
    [[1], [3]]
    """
    return nonzero(input)


@torchsymbol(**_METHOD_AND_TOP)
def nonzero_static(input, *, size, fill_value=-1):
    """``nonzero`` with a fixed row count: the first ``size`` index rows, padded with
    ``fill_value`` rows when there are fewer; this one compiles.

    >>> import graphc as gc
    >>> gc.nonzero_static(gc.tensor([0, 1, 1]), size=3).numpy().tolist()
    [[1], [2], [-1]]
    """
    if int(size) < 0:
        raise ShapeError(f"nonzero_static: size must be >= 0, got {size}")
    return apply("nonzero_static", [input.detach()], {"size": int(size), "fill_value": int(fill_value)})


@torchsymbol(**_METHOD_AND_TOP)
def masked_select(input, mask):
    """The elements of ``input`` where ``mask`` is True (both broadcast), as a 1-D tensor in
    row-major order; the gradient goes back to those elements. Eager only.

    >>> import graphc as gc
    >>> gc.tensor([1.0, 2.0, 3.0]).masked_select(gc.tensor([True, False, True])).numpy().tolist()
    [1.0, 3.0]
    """
    _eager_only("masked_select", input, mask)
    if mask.dtype.name != "bool":
        raise ShapeError(f"masked_select: mask must be bool, got {mask.dtype.name}")
    shape = np.broadcast_shapes(tuple(input.shape), tuple(mask.shape))
    where = np.flatnonzero(np.broadcast_to(_host(mask), shape)).astype(np.int64)
    values = input.expand(*shape) if tuple(input.shape) != shape else input
    return gather(values.reshape(-1), 0, _const(input, where))


def _unique_result(input, values, inverse, counts, return_inverse, return_counts, inverse_shape):
    out = [_const(input, values.astype(input.dtype.numpy))]
    if return_inverse:
        out.append(_const(input, inverse.astype(np.int64).reshape(inverse_shape)))
    if return_counts:
        out.append(_const(input, counts.astype(np.int64)))
    return out[0] if len(out) == 1 else tuple(out)


@torchsymbol(**_METHOD_AND_TOP)
def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """The distinct values (sorted; along ``dim``: the distinct slices), with the index of
    each element's value (``return_inverse``) and each value's count (``return_counts``).
    Eager only.

    >>> import graphc as gc
    >>> values, counts = gc.tensor([3, 1, 3, 2]).unique(return_counts=True)
    >>> values.numpy().tolist(), counts.numpy().tolist()
    ([1, 2, 3], [1, 1, 2])
    """
    _eager_only("unique", input)
    data = _host(input)
    if dim is None:
        values, inverse, counts = np.unique(data.reshape(-1), return_inverse=True, return_counts=True)
        return _unique_result(input, values, inverse, counts, return_inverse, return_counts, data.shape)
    axis = dim % max(data.ndim, 1)
    values, inverse, counts = np.unique(data, return_inverse=True, return_counts=True, axis=axis)
    return _unique_result(input, values, inverse, counts, return_inverse, return_counts, (data.shape[axis],))


@torchsymbol(**_METHOD_AND_TOP)
def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """Each run of equal consecutive values (slices along ``dim``) kept once, with each
    element's run (``return_inverse``) and each run's length (``return_counts``). Eager only.

    >>> import graphc as gc
    >>> gc.tensor([1, 1, 2, 2, 1]).unique_consecutive().numpy().tolist()
    [1, 2, 1]
    """
    _eager_only("unique_consecutive", input)
    data = _host(input)
    axis = 0 if dim is None else dim % max(data.ndim, 1)
    rows = data.reshape(-1) if dim is None else np.moveaxis(data, axis, 0)
    if rows.shape[0] == 0:
        starts = np.zeros(0, dtype=bool)
    else:
        width = int(np.prod(rows.shape[1:], dtype=np.int64))
        differs = (rows[1:] != rows[:-1]).reshape(rows.shape[0] - 1, width).any(axis=1)
        starts = np.concatenate([[True], differs])
    run = np.cumsum(starts) - 1
    values = rows[starts]
    values = values if dim is None else np.moveaxis(values, 0, axis)
    counts = np.diff(np.append(np.flatnonzero(starts), rows.shape[0]))
    return _unique_result(input, values, run, counts, return_inverse, return_counts,
                          data.shape if dim is None else (data.shape[axis],))
