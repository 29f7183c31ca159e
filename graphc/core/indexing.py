"""Basic indexing (ints, slices, ``...``, ``None``) lowered to the ``slice`` op."""
from __future__ import annotations

import operator

from .dispatch import apply
from ..ir.errors import GraphcError


def _plain(item):
    """Objects that are ints by ``__index__`` (numpy ints, traced Python ints) as ints; slices'
    bounds too."""
    if isinstance(item, slice):
        return slice(*(_plain(b) for b in (item.start, item.stop, item.step)))
    if item is None or isinstance(item, (int, slice)) or item is Ellipsis or not hasattr(item, "__index__"):
        return item
    if hasattr(item, "_tracer") and not hasattr(item, "weak_for"):
        return item  # a tensor as an index: refused below
    return operator.index(item)


def getitem(tensor, index):
    """``t[1:, 0, ..., None]``: one ``slice`` node, plus a reshape when ``None`` adds dims."""
    if not isinstance(index, tuple):
        index = (index,)
    index = tuple(_plain(item) for item in index)
    for item in index:
        if not (item is None or item is Ellipsis or isinstance(item, (int, slice))) or isinstance(item, bool):
            raise GraphcError(f"only basic indexing (ints, slices, ..., None) is supported, got {type(item).__name__}")
    rank = tensor.ndim
    used = sum(1 for i in index if i is not None and i is not Ellipsis)
    if used > rank:
        raise GraphcError(f"too many indices ({used}) for a rank-{rank} tensor")
    if index.count(Ellipsis) > 1:
        raise GraphcError("an index can only have a single ellipsis ('...')")
    if Ellipsis in index:
        at = index.index(Ellipsis)
        index = index[:at] + (slice(None),) * (rank - used) + index[at + 1:]
    else:
        index = index + (slice(None),) * (rank - used)

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
