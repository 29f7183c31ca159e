"""Indexing, as PyTorch's: basic indexing (ints, slices, ``...``, ``None``) is one ``slice``
node; advanced indexing (integer tensors or lists, bool masks) reads with ``gather`` and
writes (``t[i] = v``, ``index_put``) with ``scatter``, so both have gradients and compile.

Advanced reads, PyTorch's order: the basic items apply first (ints drop their dims, so
``x[0, :, [1, 2]]`` is ``(5, 2)``, where numpy would give ``(2, 5)``); the index tensors then
broadcast to one shape B. When the indexed dims are adjacent B takes their place, otherwise it
comes first. They are read by moving those dims to the front, flattening them and gathering at
the linear index (repeats allowed: their gradients add up). Negative indices count from the
end; an eager index out of range is an error.

A bool mask picks the positions where it is True: its ``nonzero`` indices, found eagerly. A
traced mask is refused (the result's size would depend on its values); ``gc.where`` is the
static form. Writes find the flat positions of the selected elements by indexing an ``iota``
of the tensor (``positions``) and scatter the values there.
"""
from __future__ import annotations

import operator

import numpy as np

from .dispatch import apply
from ..ir.errors import GraphcError, TraceError


def _plain(item):
    """Objects that are ints by ``__index__`` (numpy ints, traced Python ints) as ints; slices'
    bounds too."""
    if isinstance(item, slice):
        return slice(*(_plain(b) for b in (item.start, item.stop, item.step)))
    if item is None or isinstance(item, (int, slice)) or item is Ellipsis or not hasattr(item, "__index__"):
        return item
    if hasattr(item, "_tracer") and not hasattr(item, "weak_for"):
        return item  # a tensor as an index: advanced indexing
    if isinstance(item, np.ndarray) and item.ndim:
        return item  # an index array: advanced indexing
    return operator.index(item)


def as_tuple(index) -> tuple:
    """PyTorch's reading of an index: a short list holding slices, ``None``, ``...``, tensors or
    sequences is a tuple of indices (``x[[0, 1], :]``); any other list is one index tensor."""
    from .tensor import Tensor

    if isinstance(index, tuple):
        return index
    if isinstance(index, list) and len(index) < 32 and any(
            item is None or item is Ellipsis or isinstance(item, (slice, list, tuple, Tensor, np.ndarray))
            for item in index):
        return tuple(index)
    return (index,)


def _index_tensor(item, where):
    """An advanced index item as ("int", Tensor) or ("mask", Tensor)."""
    from .tensor import Tensor

    if not isinstance(item, Tensor):
        array = np.asarray(item)
        if array.dtype == object or array.dtype.kind not in "biu":
            raise GraphcError(f"tensors used as indices must be long, int, byte or bool; got {array.dtype}")
        item = Tensor(array.astype(bool if array.dtype.kind == "b" else np.int64))
    kind = item.dtype.name
    if kind in ("bool", "uint8"):
        return "mask", item
    if kind != "int64":
        raise GraphcError(f"tensors used as indices must be long, int, byte or bool tensors, got {kind}")
    return "int", item


def _expand_masks(tensor, index):
    """The index with each bool mask replaced by its ``nonzero`` int tensors (one per dim it
    covers), and the other sequences made int64 Tensors."""
    out = []
    for item in index:
        if item is None or item is Ellipsis or isinstance(item, (int, slice)):
            if isinstance(item, bool):
                raise GraphcError("indexing with a Python bool (x[True]) is not supported; use a bool tensor")
            out.append(item)
            continue
        kind, t = _index_tensor(item, None)
        if kind == "int":
            out.append(t)
            continue
        if t._tracer is not None:
            raise TraceError("indexing with a traced bool mask cannot be compiled: the result's size depends on the "
                             "mask's values; use gc.where(mask, x, 0) or an eager mask", t._tracer.user_location())
        from .tensor import Tensor

        out.extend(Tensor(np.ascontiguousarray(p).astype(np.int64)) for p in np.nonzero(t.numpy().astype(bool)))
        if t.ndim == 0:  # x[True-ish 0-d mask]: a new dim of size 1 or 0
            raise GraphcError("indexing with a 0-d bool mask is not supported")
    return tuple(out)


def _complete(index, rank):
    """The index with ``...`` expanded (and trailing full slices), checked against the rank."""
    used = sum(1 for i in index if i is not None and i is not Ellipsis)
    if used > rank:
        raise GraphcError(f"too many indices ({used}) for a rank-{rank} tensor")
    ellipses = [k for k, i in enumerate(index) if i is Ellipsis]  # identity: a tensor's == is elementwise
    if len(ellipses) > 1:
        raise GraphcError("an index can only have a single ellipsis ('...')")
    if ellipses:
        at = ellipses[0]
        return index[:at] + (slice(None),) * (rank - used) + index[at + 1:]
    return index + (slice(None),) * (rank - used)


def getitem(tensor, index):
    """``t[1:, 0, ..., None]`` (one ``slice`` node, plus a reshape when ``None`` adds dims) and
    ``t[idx]``, ``t[:, [0, 2]]``, ``t[mask]`` (advanced: a ``gather``)."""
    index = _expand_masks(tensor, tuple(_plain(item) for item in as_tuple(index)))
    index = _complete(index, tensor.ndim)
    if all(item is None or isinstance(item, (int, slice)) for item in index):
        return _basic(tensor, index)
    basic, dims, tensors, pos = [], [], [], 0
    for item in index:
        if item is None or isinstance(item, slice):
            basic.append(item)
            pos += 1
        elif isinstance(item, int):
            basic.append(item)
        else:
            basic.append(slice(None))
            dims.append(pos)
            tensors.append(item)
            pos += 1
    return _advanced(_basic(tensor, tuple(basic)), dims, tensors)


def _basic(tensor, index):
    slices, drop, new_axes, axis = [], [], [], 0
    out_pos = 0
    for item in index:
        if item is None:
            new_axes.append(out_pos)
            out_pos += 1
            continue
        if isinstance(item, int):
            slices.append((int(item), None, 1))
            drop.append(axis)
        else:
            step = 1 if item.step is None else item.step
            slices.append((item.start, item.stop, step))
            out_pos += 1
        axis += 1
    out = tensor
    if any(s != (None, None, 1) for s in slices) or drop:
        out = apply("slice", [tensor], {"slices": slices, "drop": drop})
    if new_axes:
        shape = list(out.shape)
        for pos in new_axes:
            shape.insert(pos, 1)
        out = out.reshape(shape)
    return out


def _broadcast(tensors):
    """The index tensors broadcast to one shape (symbolic sizes kept: compared by their
    ``dims``, never as numbers, which would pin the batch)."""
    if len(tensors) == 1:
        return tensors, list(tensors[0].shape)
    rank = max(t.ndim for t in tensors)
    shape, dims = [1] * rank, [1] * rank
    for t in tensors:
        for k, (size, dim) in enumerate(zip(t.shape, t.dims)):
            at = rank - t.ndim + k
            if dim != 1:
                if dims[at] != 1 and dim != dims[at]:
                    raise GraphcError(f"shape mismatch: indexing tensors could not be broadcast together with "
                                      f"shapes {[tuple(x.dims) for x in tensors]}")
                shape[at], dims[at] = size, dim
    return [t if tuple(t.dims) == tuple(dims) else t.expand(*shape) for t in tensors], shape


def _check_bounds(t, size, dim):
    if t._tracer is None and isinstance(size, int) and t.numel():
        values = t.numpy()
        low, high = int(values.min()), int(values.max())
        if low < -size or high >= size:
            raise GraphcError(f"index {low if low < -size else high} is out of bounds for dimension {dim} with "
                              f"size {size}")


def _advanced(y, dims, tensors):
    """``y`` indexed at ``dims`` by the int64 ``tensors`` (PyTorch's placement of the result)."""
    k = len(dims)
    for d, t in zip(dims, tensors):
        _check_bounds(t, y.shape[d], d)
    tensors, shape = _broadcast(tensors)
    order = dims + [d for d in range(y.ndim) if d not in dims]
    z = y if order == list(range(y.ndim)) else y.permute(order)
    sizes = list(z.shape[:k])
    linear = tensors[0]
    for size, t in zip(sizes[1:], tensors[1:]):
        if not isinstance(size, int):
            raise TraceError(f"advanced indexing of several dims, one of them symbolic ({z.dims[:k]}), cannot be "
                             "compiled; index the batch dim alone", y._tracer.user_location() if y._tracer else None)
        t = apply("where", [apply("lt", [t, 0]), apply("add", [t, size]), t])
        linear = apply("add", [apply("mul", [linear, size]), t])  # a negative first index wraps in gather
    rest = list(z.shape[k:])
    flat = z.reshape(-1, *rest) if k > 1 else z
    count = linear.reshape(-1)
    index = count.reshape(-1, *([1] * len(rest))).expand(count.shape[0], *rest) if rest else count
    out = apply("gather", [flat, index], {"dim": 0}).reshape(*shape, *rest)
    contiguous = dims == list(range(dims[0], dims[0] + k))
    if contiguous and dims[0] > 0:  # B takes the indexed dims' place
        nb = len(shape)
        perm = list(range(nb, nb + dims[0])) + list(range(nb)) + list(range(nb + dims[0], out.ndim))
        out = out.permute(perm)
    return out


def positions(tensor):
    """An int64 tensor of ``tensor``'s shape holding each element's flat (row-major) position."""
    from .tensor import Tensor

    dims = tensor.dims
    if all(isinstance(d, int) for d in dims):
        return Tensor(np.arange(int(np.prod(dims, dtype=np.int64)), dtype=np.int64).reshape(dims))
    # a symbolic size: a stable argsort of zeros is the run-time iota 0..n-1
    zeros = apply("full", [], {"shape": [*dims], "value": 0.0, "dtype": "int64"}).reshape(-1)
    return apply("argsort", [zeros], {"dim": 0, "descending": False}).reshape(*tensor.shape)


def index_put(tensor, index, values, accumulate=False):
    """``tensor`` with ``values`` (broadcast to the selection) written, or added with
    ``accumulate``, where ``tensor[index]`` reads; a new tensor (the gradient reaches both)."""
    from .tensor import Tensor

    if not isinstance(values, Tensor):
        values = Tensor(np.asarray(values, dtype=tensor.dtype.numpy))
    values = values.cast(tensor.dtype) if values.dtype != tensor.dtype else values
    masked = _basic_fill(tensor, as_tuple(index), values) if not accumulate and not values.ndim else None
    if masked is None:
        masked = _mask_write(tensor, as_tuple(index), values, accumulate)
    if masked is not None:
        return masked
    where = getitem(positions(tensor), index)
    if tuple(values.shape) != tuple(where.shape):
        values = _fit(values, where)
    flat = tensor.reshape(-1)
    out = apply("scatter", [flat, where.reshape(-1), values.reshape(-1)],
                {"dim": 0, "reduce": "sum" if accumulate else "none"})
    return out.reshape(*tensor.shape)


def _fit(values, where):
    """``values`` broadcast to the selection's shape (leading 1s dropped first, as PyTorch)."""
    while values.ndim > where.ndim and values.shape[0] == 1:
        values = values.reshape(*values.shape[1:])
    try:
        np.broadcast_shapes(tuple(int(s) for s in values.shape), tuple(int(s) for s in where.shape))
    except ValueError:
        raise GraphcError(f"shape mismatch: value tensor of shape {tuple(values.shape)} cannot be broadcast to "
                          f"indexing result of shape {tuple(where.shape)}") from None
    return values.expand(*where.shape)


def _mask_write(tensor, index, values, accumulate):
    """``x[mask] = v`` where ``v`` does not run along the selected elements (a number, or one
    row for every selected position): a ``where``, which compiles even for a traced mask. None
    when the index is not of that form."""
    from .tensor import Tensor

    index = tuple(_plain(item) for item in index)
    picked = [(k, item) for k, item in enumerate(index) if not (isinstance(item, slice) and item == slice(None))]
    if len(picked) != 1 or any(item is None or item is Ellipsis for item in index):
        return None
    at, mask = picked[0]
    if isinstance(mask, (int, slice)):
        return None
    kind, mask = _index_tensor(mask, None)
    trailing = tensor.ndim - at - mask.ndim
    if kind != "mask" or mask.ndim == 0 or trailing < 0 or tuple(mask.dims) != tuple(tensor.dims[at:at + mask.ndim]):
        return None
    while values.ndim > trailing and values.shape[0] == 1:
        values = values.reshape(*values.shape[1:])
    if values.ndim > trailing:
        return None
    cond = mask if mask.dtype.name == "bool" else apply("ne", [mask, 0])
    cond = cond.reshape(*mask.shape, *([1] * trailing)) if trailing else cond
    if accumulate:
        return apply("add", [tensor, apply("where", [cond, values, Tensor(np.zeros((), tensor.dtype.numpy))])])
    return apply("where", [cond, values, tensor])


def _basic_fill(tensor, index, value):
    """``x[1:, 0] = v`` (ints, slices, ``...``, ``None`` only; a 0-d value; static shape): a
    ``where`` through a constant mask, which selects each position once (no repeats)."""
    from .tensor import Tensor

    index = tuple(_plain(item) for item in index)
    if not all(item is None or item is Ellipsis or isinstance(item, (int, slice)) for item in index):
        return None
    if any(isinstance(item, bool) for item in index) or not all(isinstance(d, int) for d in tensor.dims):
        return None
    mask = np.zeros(tensor.dims, dtype=bool)
    try:
        mask[index] = True
    except IndexError as e:
        raise GraphcError(f"index out of range for a tensor of shape {tuple(tensor.dims)}: {e}") from None
    return apply("where", [Tensor(mask), value, tensor])
