"""Readers of ONNX's indexing ops (see ``readers`` for the contract): GatherElements, Gather by
an index array on a graph tensor, GatherND, ScatterND, Scatter (opset 9's ScatterElements),
TensorScatter, OneHot, ReverseSequence, and the data-dependent Compress, Unique, NonZero
(``index_shapes`` has Tile, Trilu, EyeLike, CenterCropPad).

Semantics are onnx's reference implementation's (``onnx.reference``): negative indices count
from the end of their axis (but a Gather from a known 2-D table stays shape_readers' embedding,
which refuses them when run); ScatterND's duplicate indices with ``reduction="none"`` keep one
update (which, as in ONNX, is unspecified). Unique with sorted=0 takes the first occurrences
along its axis (of the flattened input without one), as ONNX and onnxruntime say; the reference
reads them along axis 0 whatever the axis. The N-D ops are read as a flat gather/scatter: the
indexed leading dims of the data are one axis, an index row is its row-major offset (the
indexed dims must then be static). The ops whose output size depends on values (NonZero,
Unique, Compress's condition) are computed at import from the values: ``r.static`` on a value
computed from graph inputs makes the importer specialize the plan on those inputs' values
(``specialize.ValueSpecializedPlan``), as graphc's own ``gc.nonzero`` is eager only.
"""
from __future__ import annotations

import math

import numpy as np

import graphc as gc  # the torch namespace: its functions are the composites read here (composite.py)
from ..ir.graph import Value
from .composite import composing
from .grid_readers import _scatter_elements
from .index_shapes import INDEX_SHAPE_READERS
from .shape_readers import SHAPE_READERS, _known, _rank, _shape


def _long(x):
    """An index tensor as int64 (ONNX takes int32 or int64 indices, graphc's gather int64)."""
    return x if x.dtype.name == "int64" else x.long()


def _static_dims(r, x, dims, op: str) -> list:
    shape = _shape(x)
    if any(not isinstance(shape[d], int) for d in dims):
        raise r.error(f"{op} indexing the symbolic dim of a {list(shape)} tensor; graphc indexes static dims")
    return [shape[d] for d in dims]


def _wrapped(a, dims):
    """Known indices with negative ones counted from the end of their dims (numpy broadcasting)."""
    a = np.asarray(a).astype(np.int64)
    return np.where(a < 0, a + np.asarray(dims, np.int64), a)


# ---- gathers -------------------------------------------------------------------------------------------
def _gather_elements(r, args):
    data, indices = args
    axis = int(r.attrs().get("axis", 0)) % _rank(data)
    if _known(data, indices):
        return [np.take_along_axis(np.asarray(data), _wrapped(indices, np.shape(data)[axis]), axis)]
    with composing(r) as t:  # torch.gather is GatherElements (the primitive wraps negative indices)
        return [t.value(gc.gather(t(data), axis, _long(t(indices))))]


def _gather(r, args):
    """Gather: the forms shape_readers reads (known arrays, one constant index, an embedding
    lookup in a known table, which refuses negative indices when run) there; a graph tensor by
    an index array as index_select of the flat indices (negative ones wrap)."""
    data, indices = args
    axis = int(r.attrs().get("axis", 0)) % max(_rank(data), 1)
    table = _known(data) and axis == 0 and np.ndim(data) == 2
    if _known(data, indices) or (_known(indices) and np.ndim(indices) == 0) or table:
        return SHAPE_READERS["Gather"](r, args)
    with composing(r) as t:
        x, index = t(data), _long(t(indices))
        out = gc.index_select(x, axis, index.reshape(-1))
        return [t.value(out.reshape(*x.shape[:axis], *index.shape, *x.shape[axis + 1:]))]


def _offsets(t, index, dims):
    """Row-major offsets of index rows (the last axis of ``index``) into ``dims``, negative
    entries first counted from the end of their dim."""
    sizes = np.asarray(dims, np.int64)
    strides = np.asarray([math.prod(dims[j + 1:]) for j in range(len(dims))], np.int64)
    index = gc.where(index < 0, index + t(sizes), index)
    return (index * t(strides)).sum(-1)


def _gather_nd(r, args):
    data, indices = args
    b = int(r.attrs().get("batch_dims", 0))
    k = _shape(indices)[-1]
    if not isinstance(k, int) or k < 1 or b + k > _rank(data):
        raise r.error(f"GatherND of a {list(_shape(data))} tensor by index rows of length {k} with batch_dims={b}")
    dims = _static_dims(r, data, range(b, b + k), "GatherND")
    if _known(data, indices):
        x, index = np.asarray(data), _wrapped(indices, dims)
        rows = index.reshape(math.prod(x.shape[:b]), -1, k)  # per batch, its index rows
        flat = x.reshape(rows.shape[0], *x.shape[b:])
        out = np.stack([batch[tuple(np.moveaxis(at, -1, 0))] for batch, at in zip(flat, rows)])
        return [out.reshape(*np.shape(indices)[:-1], *x.shape[b + k:])]
    with composing(r) as t:
        x, index = t(data), _long(t(indices))
        rest = list(x.shape[b + k:])
        batch, rows = x.shape[:b], index.shape[b:-1]
        # data as (batch, rows of the indexed dims, rest); each batch gathers its own offsets
        flat = x.reshape(math.prod(batch) if b else 1, math.prod(dims), *rest)
        offsets = _offsets(t, index, dims).reshape(flat.shape[0], -1, *[1] * len(rest))
        out = gc.gather(flat, 1, offsets.expand(flat.shape[0], offsets.shape[1], *rest))
        return [t.value(out.reshape(*batch, *rows, *rest))]


# ---- scatters ------------------------------------------------------------------------------------------
_REDUCTIONS = {"none": None, "add": "sum", "mul": "prod", "max": "amax", "min": "amin"}


def _scatter_nd(r, args):
    data, indices, updates = args
    reduction = r.attrs().get("reduction", "none")
    if reduction not in _REDUCTIONS:
        raise r.error(f"ScatterND with reduction={reduction!r}; ONNX's are none, add, mul, max and min")
    k = _shape(indices)[-1]
    if not isinstance(k, int) or not 1 <= k <= _rank(data):
        raise r.error(f"ScatterND of a {list(_shape(data))} tensor by index rows of length {k}")
    dims = _static_dims(r, data, range(k), "ScatterND")
    if _known(data, indices, updates):  # Swin's attention mask: slice writes into a known zeros
        return [_scatter_nd_now(np.asarray(data), _wrapped(indices, dims), np.asarray(updates), reduction)]
    with composing(r) as t:
        x, index, src = t(data), _long(t(indices)), t(updates)
        if src.dtype != x.dtype:
            src = src.cast(x.dtype.name)
        rest = list(x.shape[k:])
        flat = x.reshape(math.prod(dims), *rest)  # the indexed dims as one axis: a row per index row
        offsets = _offsets(t, index, dims).reshape(-1, *[1] * len(rest))
        src = src.reshape(offsets.shape[0], *rest)
        at = offsets.expand(*src.shape)
        out = gc.scatter(flat, 0, at, src) if _REDUCTIONS[reduction] is None else \
            gc.scatter_reduce(flat, 0, at, src, _REDUCTIONS[reduction])
        return [t.value(out.reshape(*x.shape))]


_UFUNCS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _scatter_nd_now(data, indices, updates, reduction: str):
    out = data.copy()
    at = tuple(np.moveaxis(indices, -1, 0))
    if reduction == "none":
        out[at] = updates
    else:  # ufunc.at applies each update in turn, repeated indices included (as the reference's loop)
        _UFUNCS[reduction].at(out, at, updates.astype(out.dtype))
    return out


def _tensor_scatter(r, args):
    """TensorScatter (a KV-cache write): update's positions along ``axis`` go to
    ``write_indices[batch] + position`` of the cache (modulo its length when circular)."""
    past, update = args[:2]
    write = args[2] if len(args) > 2 else None
    attrs = r.attrs()
    mode, rank = attrs.get("mode", "linear"), _rank(past)
    axis = int(attrs.get("axis", -2)) % rank
    if mode not in ("linear", "circular"):
        raise r.error(f"TensorScatter with mode={mode!r}; ONNX's are linear and circular")
    if axis == 0:
        raise r.error("TensorScatter along axis 0, the batch axis write_indices index")
    length = _static_dims(r, past, [axis], "TensorScatter")[0]
    steps = _static_dims(r, update, [axis], "TensorScatter")[0]
    with composing(r) as t:
        cache, new = t(past), t(update)
        position = gc.arange(steps).reshape(*[steps if d == axis else 1 for d in range(rank)])
        if write is not None:
            position = position + _long(t(write)).reshape(-1, *[1] * (rank - 1))
        if mode == "circular":
            position = position % length
        new = new if new.dtype == cache.dtype else new.cast(cache.dtype.name)
        return [t.value(gc.scatter(cache, axis, position.expand(*new.shape), new))]


# ---- one-hot, reversal ----------------------------------------------------------------------------------
def _one_hot(r, args):
    """OneHot as the reference computes it: indices (any numeric type) equal to a position in
    ``range(depth)`` after negative ones are moved up by depth; out-of-range ones match nothing."""
    indices, depth, values = args
    depth = np.asarray(r.static(depth, "OneHot's depth")).reshape(-1)[0]
    if not float(depth).is_integer() or depth < 0:
        raise r.error(f"OneHot with depth {depth}; graphc takes a non-negative whole number")
    depth, rank = int(depth), _rank(indices)
    axis = int(r.attrs().get("axis", -1))
    axis = axis + rank + 1 if axis < 0 else axis
    if _known(indices, values):
        index = np.expand_dims(np.where(np.asarray(indices) < 0, np.asarray(indices) + depth, indices), axis)
        positions = np.arange(depth).reshape([depth if d == axis else 1 for d in range(rank + 1)])
        r.allow(np.broadcast_shapes(index.shape, positions.shape), np.asarray(values).dtype, "OneHot")
        return [np.where(positions.astype(index.dtype) == index, values[1], values[0])]
    with composing(r) as t:
        index, pair = t(indices), t(values)
        index = gc.where(index < 0, index + depth, index).unsqueeze(axis)
        positions = gc.arange(depth).reshape(*[depth if d == axis else 1 for d in range(rank + 1)])
        hit = positions.cast(index.dtype.name) == index
        return [t.value(gc.where(hit, pair[1], pair[0]))]


def _reverse_sequence(r, args):
    """ReverseSequence: along time_axis, the first ``sequence_lens[b]`` steps of batch b reversed,
    the rest kept; a gather at ``L - 1 - t`` where ``t < L``, else ``t``."""
    data, lens = args
    attrs, rank = r.attrs(), _rank(data)
    batch_axis, time_axis = int(attrs.get("batch_axis", 1)) % rank, int(attrs.get("time_axis", 0)) % rank
    if batch_axis == time_axis:
        raise r.error(f"ReverseSequence with batch_axis and time_axis both {batch_axis}")
    steps = _static_dims(r, data, [time_axis], "ReverseSequence")[0]
    with composing(r) as t:
        x = t(data)
        time = gc.arange(steps).reshape(*[steps if d == time_axis else 1 for d in range(rank)])
        length = _long(t(lens)).reshape(*[-1 if d == batch_axis else 1 for d in range(rank)])
        index = gc.where(time < length, length - 1 - time, time)
        return [t.value(gc.gather(x, time_axis, index.expand(*x.shape)))]


# ---- data-dependent output sizes: computed from the values --------------------------------------------
def _compress(r, args):
    data, condition = args
    axis = r.attrs().get("axis")
    keep = np.asarray(r.static(condition, "Compress's condition (its output size depends on it)")).reshape(-1)
    if _known(data):
        return [np.compress(keep, np.asarray(data), axis=None if axis is None else int(axis))]
    size = math.prod(_shape(data)) if axis is None else _shape(data)[int(axis) % _rank(data)]
    positions = np.flatnonzero(keep)
    if not isinstance(size, int) or (positions.size and positions[-1] >= size):
        raise r.error(f"Compress by a condition of {keep.size} entries of a dim of {size}")
    with composing(r) as t:
        x = t(data)
        if axis is None:
            return [t.value(gc.index_select(x.reshape(-1), 0, positions))]
        return [t.value(gc.index_select(x, int(axis) % _rank(data), positions))]


def _nonzero(r, args):
    x = np.asarray(r.static(args[0], "NonZero's input (its output size depends on its values)"))
    if x.ndim == 0:
        raise r.error("NonZero of a 0-d tensor; graphc reads tensors of rank 1 and more")
    return [np.asarray(np.nonzero(x), np.int64).reshape(x.ndim, -1)]


def _unique(r, args):
    """Unique as the reference: sorted values (or in order of first occurrence with sorted=0),
    the first index of each, the inverse indices and the counts."""
    x = np.asarray(r.static(args[0], "Unique's input (its output size depends on its values)"))
    attrs = r.attrs()
    axis = attrs.get("axis")
    axis = None if axis is None else int(axis) % max(x.ndim, 1)
    y, first, inverse, counts = np.unique(x, True, True, True, axis=axis)
    if not attrs.get("sorted", 1):  # order of first occurrence: the sorted uniques permuted
        order = np.argsort(first)
        rank_of = np.empty_like(order)
        rank_of[order] = np.arange(order.size)
        first, counts, inverse = first[order], counts[order], rank_of[inverse.reshape(-1)]
        y = np.take(x if axis is not None else x.reshape(-1), first, axis=axis or 0)
    outputs = [y, first.astype(np.int64), inverse.reshape(-1).astype(np.int64), counts.astype(np.int64)]
    return outputs[:len(r.node.output)]


INDEX_READERS = {
    "GatherElements": _gather_elements, "Gather": _gather, "GatherND": _gather_nd, "ScatterND": _scatter_nd,
    "Scatter": _scatter_elements, "TensorScatter": _tensor_scatter, "OneHot": _one_hot,
    "ReverseSequence": _reverse_sequence, "Compress": _compress, "NonZero": _nonzero, "Unique": _unique,
    **INDEX_SHAPE_READERS,
}
