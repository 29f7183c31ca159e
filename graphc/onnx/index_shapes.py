"""Readers of ONNX's shape-like ops of the indexing family (see ``readers`` for the contract):
Tile, Trilu, EyeLike, CenterCropPad. Known inputs are computed at import (numpy); graph
tensors are read as graphc's functions (``gc.tile``, ``gc.triu``/``gc.tril``, ``F.pad``, whose
negative amounts crop). Semantics are onnx's reference implementation's: CenterCropPad crops
and pads each axis centred, the odd element going to the end; EyeLike's output has the input's
shape and, without ``dtype``, its element type.
"""
from __future__ import annotations

import numpy as np

import graphc as gc  # the torch namespace: its functions are the composites read here (composite.py)
from .composite import composing
from .dtypes import DTYPES
from .shape_readers import _ints, _known, _rank, _shape


def _tile(r, args):
    if r.version < 6:
        raise r.error("Tile-1 (tiles and axis inputs); graphc reads Tile from version 6 (a repeats input)")
    x, repeats = args[0], _ints(r.static(args[1], "Tile's repeats"))
    if len(repeats) != _rank(x) or any(n < 0 for n in repeats):
        raise r.error(f"Tile of a rank-{_rank(x)} tensor by repeats {repeats}: one non-negative count per dim")
    if _known(x):
        r.allow([d * n for d, n in zip(np.shape(x), repeats)], np.asarray(x).dtype, "Tile")
        return [np.tile(x, repeats)]
    with composing(r) as t:
        return [t.value(gc.tile(t(x), repeats))]


def _trilu(r, args):
    x = args[0]
    k = int(np.asarray(r.static(args[1], "Trilu's k")).reshape(-1)[0]) if len(args) > 1 and args[1] is not None else 0
    upper = bool(r.attrs().get("upper", 1))
    if _rank(x) < 2:
        raise r.error(f"Trilu of a rank-{_rank(x)} tensor; ONNX takes rank 2 and more")
    if _known(x):
        return [(np.triu if upper else np.tril)(x, k)]
    with composing(r) as t:
        return [t.value((gc.triu if upper else gc.tril)(t(x), k))]


def _eye_like(r, args):
    shape, attrs = _shape(args[0]), r.attrs()
    if len(shape) != 2 or not all(isinstance(d, int) for d in shape):
        raise r.error(f"EyeLike of a {list(shape)} tensor; graphc makes static 2-D identities")
    if "dtype" in attrs:
        if int(attrs["dtype"]) not in DTYPES:
            raise r.error(f"EyeLike with dtype {attrs['dtype']}, which graphc has no dtype for")
        dtype = np.dtype(DTYPES[int(attrs["dtype"])].numpy)
    else:
        dtype = np.asarray(args[0]).dtype if _known(args[0]) else np.dtype(args[0].type.dtype.numpy)
    r.allow(shape, dtype, "EyeLike")
    return [np.eye(*shape, k=int(attrs.get("k", 0)), dtype=dtype)]


def _center_crop_pad(r, args):
    x, target = args[0], _ints(r.static(args[1], "CenterCropPad's shape"))
    rank = _rank(x)
    axes = [int(a) % rank for a in r.attrs().get("axes", range(rank))]
    if len(axes) != len(target):
        raise r.error(f"CenterCropPad to {target} along axes {axes}: one size per axis")
    amounts = [(0, 0)] * rank  # (before, after) per dim; negative crops
    for axis, size in zip(axes, target):
        dim = _shape(x)[axis]
        if not isinstance(dim, int):
            raise r.error("CenterCropPad of the symbolic batch dim; graphc crops and pads static dims")
        change = abs(size - dim)
        before, after = change // 2, change - change // 2  # the odd element at the end, as the reference
        amounts[axis] = (before, after) if size >= dim else (-before, -after)
    changed = [d for d, amount in enumerate(amounts) if amount != (0, 0)]
    # F.pad's amounts run from the last dim to the first one changed (the batch dim may lie before)
    pad = [a for before_after in reversed(amounts[changed[0] if changed else rank:]) for a in before_after]
    if _known(x):
        array = np.asarray(x)[tuple(slice(max(-b, 0), d - max(-a, 0)) for (b, a), d in zip(amounts, np.shape(x)))]
        r.allow([d + max(b, 0) + max(a, 0) for (b, a), d in zip(amounts, array.shape)], array.dtype, "CenterCropPad")
        return [np.pad(array, [(max(b, 0), max(a, 0)) for b, a in amounts])]
    with composing(r) as t:
        return [t.value(gc.nn.functional.pad(t(x), pad, value=0))]


INDEX_SHAPE_READERS = {"Tile": _tile, "Trilu": _trilu, "EyeLike": _eye_like, "CenterCropPad": _center_crop_pad}
