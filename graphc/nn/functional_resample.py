"""Padding in the non-constant modes, pixel (un)shuffle, interpolation and grid sampling:
composites of existing ops (slices, concats, broadcasts, matmuls with constant matrices,
elementwise math), so their gradients come from autodiff and they run compiled with a
symbolic batch dim. ``graphc.nn.functional`` re-exports them with PyTorch's signatures.

>>> import graphc as gc
>>> import graphc.nn.functional as F
>>> F.pad(gc.tensor([[[1.0, 2.0, 3.0]]]), (2, 1), mode="reflect").numpy()
array([[[3., 2., 1., 2., 3., 2.]]], dtype=float32)
"""
from __future__ import annotations

import numpy as np

from ..core.dispatch import apply
from ..ir.errors import GraphcError, ShapeError

_PAD_MODES = ("constant", "reflect", "replicate", "circular")
_PAD_COMBINATIONS = ("Supported combinations for non-constant padding:\n"
                     "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
                     "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
                     "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")


# ---- taking constant indices along one dim, as slices + concat ------------------------------

def _runs(idx):
    """Split a list of indices into runs ``(first, count, step)`` with step -1, 0 or 1."""
    runs = []
    for i in idx:
        if runs:
            first, count, step = runs[-1]
            last = first + (count - 1) * step
            if count == 1 and i - last in (-1, 0, 1):
                runs[-1] = (first, 2, i - last)
                continue
            if count > 1 and i - last == step:
                runs[-1] = (first, count + 1, step)
                continue
        runs.append((int(i), 1, 1))
    return runs


def _slice_dim(input, dim, start, stop, step):
    slices = [[None, None, 1] for _ in range(input.ndim)]
    slices[dim] = [start, stop, step]
    return apply("slice", [input], {"slices": slices})


def take_along(input, dim: int, idx):
    """``input`` indexed along ``dim`` by the constant ints ``idx`` (``np.take``), written as
    slices (forward or reversed runs), broadcasts (repeated indices) and one concat, so that the
    gradient comes from autodiff. ``input``'s size along ``dim`` must be static."""
    dim = dim % input.ndim
    size = input.dims[dim]
    idx = [int(i) for i in idx]
    if list(range(size)) == idx:
        return input
    pieces = []
    for first, count, step in _runs(idx):
        if step == 0 or count == 1:
            piece = _slice_dim(input, dim, first, first + 1, 1)
            if count > 1:
                dims = list(input.dims)
                dims[dim] = count
                piece = apply("broadcast_to", [piece], {"shape": dims})
        elif step == 1:
            piece = _slice_dim(input, dim, first, first + count, 1)
        else:
            last = first - count + 1
            piece = _slice_dim(input, dim, first, last - 1 if last > 0 else None, -1)
        pieces.append(piece)
    return pieces[0] if len(pieces) == 1 else apply("concat", pieces, {"dim": dim})


# ---- F.pad's non-constant modes ----------------------------------------------------------------

def _pad_indices(mode, size, before, after):
    """The source index of each output position (PyTorch's reflection/replication/circular rules)."""
    pos = np.arange(-before, size + after)
    if mode == "replicate":
        return np.clip(pos, 0, size - 1)
    if mode == "circular":  # crop by the negative amounts first, then wrap around what is left
        crop_before, crop_after = max(-before, 0), max(-after, 0)
        kept = size - crop_before - crop_after
        return crop_before + np.mod(np.arange(-max(before, 0), kept + max(after, 0)), kept)
    period = 2 * (size - 1)  # reflect: mirror without repeating the edge
    if period == 0:
        return np.zeros_like(pos)
    pos = np.mod(pos, period)
    return np.where(pos < size, pos, period - pos)


def check_pad_mode(mode, input_ndim, pad, value):
    """PyTorch's checks of ``F.pad``'s mode, value and padding length (same messages)."""
    if mode not in _PAD_MODES:
        raise GraphcError(f"Unrecognised padding mode {mode}")
    if len(pad) % 2:
        raise GraphcError("Padding length must be divisible by 2")
    if len(pad) // 2 > input_ndim:
        raise GraphcError(f"Padding length should be less than or equal to two times the input dimension but got "
                          f"padding length {len(pad)} and input of dimension {input_ndim}")
    if mode == "constant":
        return
    if value is not None and value != 0:
        raise GraphcError(f'Padding mode "{mode}" doesn\'t take in value argument')
    if len(pad) not in (2, 4, 6) or input_ndim not in (len(pad) // 2 + 1, len(pad) // 2 + 2):
        raise GraphcError(f"Padding size {len(pad)} is not supported for {input_ndim}D input tensor.\n"
                          + _PAD_COMBINATIONS)


def pad_nonconstant(input, pad, mode):
    """``F.pad`` in mode ``'reflect'``, ``'replicate'`` or ``'circular'`` (checked by ``check_pad_mode``)."""
    spatial = len(pad) // 2
    shape = list(input.dims)
    for axis in range(input.ndim - spatial, input.ndim):
        if not isinstance(shape[axis], int):
            raise GraphcError(f"F.pad(mode={mode!r}) cannot pad the symbolic dim {shape[axis]!r} of a compiled graph")
    if mode != "circular" and any(d == 0 for d in shape[-spatial - 1:] if isinstance(d, int)):
        raise GraphcError(f"Expected {spatial + 1}D or {spatial + 2}D (batch mode) tensor with possibly 0 batch size "
                          f"and other non-zero dimensions for input, but got: {shape}")
    out = input
    for i in range(spatial):
        axis = input.ndim - 1 - i
        size, before, after = shape[axis], int(pad[2 * i]), int(pad[2 * i + 1])
        if mode == "reflect" and (before >= size or after >= size):
            raise GraphcError(f"Argument #4: Padding size should be less than the corresponding input dimension, "
                              f"but got: padding ({before}, {after}) at dimension {axis} of input {shape}")
        if mode == "circular" and (before > size or after > size):
            raise GraphcError("Padding value causes wrapping around more than once.")
        if size + before + after <= 0:
            raise ShapeError(f"input (size {size} of dim {axis}) is too small. Calculated output size: "
                             f"{size + before + after}")
        out = take_along(out, axis, _pad_indices(mode, size, before, after))
    return out
