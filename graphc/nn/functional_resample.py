"""Padding in the non-constant modes, pixel (un)shuffle and interpolation (grid sampling is
in graphc/nn/functional_grid.py):
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


# ---- pixel (un)shuffle -------------------------------------------------------------------------

def pixel_shuffle(input, upscale_factor: int):
    """Rearrange ``(*, C * r * r, H, W)`` into ``(*, C, H * r, W * r)`` (PyTorch's
    ``F.pixel_shuffle``): a reshape, a permute and a reshape.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.pixel_shuffle(gc.arange(8.0).reshape(1, 4, 1, 2), 2).numpy()[0, 0]
    array([[0., 2., 1., 3.],
           [4., 6., 5., 7.]], dtype=float32)
    """
    r = int(upscale_factor)
    if input.ndim < 3:
        raise ShapeError(f"pixel_shuffle expects input to have at least 3 dimensions, but got input with "
                         f"{input.ndim} dimension(s)")
    if r <= 0:
        raise GraphcError(f"pixel_shuffle expects a positive upscale_factor, but got {r}")
    *lead, c, h, w = input.dims
    if c % (r * r):
        raise ShapeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                         f"upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    k = len(lead)
    out = apply("reshape", [input], {"shape": lead + [c // (r * r), r, r, h, w]})
    out = apply("permute", [out], {"perm": list(range(k)) + [k, k + 3, k + 1, k + 4, k + 2]})
    return apply("reshape", [out], {"shape": lead + [c // (r * r), h * r, w * r]})


def pixel_unshuffle(input, downscale_factor: int):
    """Rearrange ``(*, C, H * r, W * r)`` into ``(*, C * r * r, H, W)``: ``pixel_shuffle``'s
    inverse (PyTorch's ``F.pixel_unshuffle``).

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.pixel_unshuffle(gc.zeros(2, 3, 4, 6), 2).shape
    (2, 12, 2, 3)
    """
    r = int(downscale_factor)
    if input.ndim < 3:
        raise ShapeError(f"pixel_unshuffle expects input to have at least 3 dimensions, but got input with "
                         f"{input.ndim} dimension(s)")
    if r <= 0:
        raise GraphcError(f"pixel_unshuffle expects a positive downscale_factor, but got {r}")
    *lead, c, h, w = input.dims
    if h % r:
        raise ShapeError(f"pixel_unshuffle expects height to be divisible by downscale_factor, but "
                         f"input.size(-2)={h} is not divisible by {r}")
    if w % r:
        raise ShapeError(f"pixel_unshuffle expects width to be divisible by downscale_factor, but "
                         f"input.size(-1)={w} is not divisible by {r}")
    k = len(lead)
    out = apply("reshape", [input], {"shape": lead + [c, h // r, r, w // r, r]})
    out = apply("permute", [out], {"perm": list(range(k)) + [k, k + 2, k + 4, k + 1, k + 3]})
    return apply("reshape", [out], {"shape": lead + [c * r * r, h // r, w // r]})


# ---- interpolation: one constant (out, in) matrix per spatial dim --------------------------------

_LINEAR_RANK = {"linear": 3, "bilinear": 4, "bicubic": 4, "trilinear": 5}
_MODES = ("nearest", "nearest-exact", "area") + tuple(_LINEAR_RANK)


def _area_scale(size_in, size_out, align_corners, scale):
    """PyTorch's ``area_pixel_compute_scale``: source step per output step."""
    if align_corners:
        return (size_in - 1) / (size_out - 1) if size_out > 1 else 0.0
    return 1.0 / scale if scale is not None and scale > 0 else size_in / size_out


def _cubic_weights(t, a=-0.75):
    """Keys' cubic convolution weights of the 4 taps around a source point at fraction ``t``."""
    def near(x):
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def interpolation_matrix(mode, size_in, size_out, align_corners, scale, dtype=np.float64):
    """The ``(size_out, size_in)`` matrix of one spatial dim's interpolation, with PyTorch's
    index and weight formulas (``scale`` is the user's scale factor for that dim, or None)."""
    m = np.zeros((size_out, size_in), dtype=np.float64)
    rows = np.arange(size_out)
    if mode in ("nearest", "nearest-exact"):  # float32 arithmetic, as PyTorch's nearest kernels
        step = np.float32(1.0 / scale) if scale is not None and scale > 0 else np.float32(size_in) / np.float32(size_out)
        pos = rows.astype(np.float32) + np.float32(0.5 if mode == "nearest-exact" else 0.0)
        src = np.minimum(np.floor(pos * step).astype(np.int64), size_in - 1)
        m[rows, src] = 1.0
        return m.astype(dtype)
    if mode == "area":  # adaptive average pooling's windows
        for i in range(size_out):
            start, stop = (i * size_in) // size_out, -((-(i + 1) * size_in) // size_out)
            m[i, start:stop] = 1.0 / (stop - start)
        return m.astype(dtype)
    step = _area_scale(size_in, size_out, align_corners, scale)
    src = step * rows if align_corners else step * (rows + 0.5) - 0.5
    if mode == "bicubic":
        base = np.floor(src).astype(np.int64)
        for tap, w in zip(range(-1, 3), _cubic_weights(src - base)):
            np.add.at(m, (rows, np.clip(base + tap, 0, size_in - 1)), w)
        return m.astype(dtype)
    src = np.maximum(src, 0.0)
    low = np.minimum(np.floor(src).astype(np.int64), size_in - 1)
    lam = np.clip(src - low, 0.0, 1.0)
    high = np.minimum(low + 1, size_in - 1)
    np.add.at(m, (rows, low), 1.0 - lam)
    np.add.at(m, (rows, high), lam)
    return m.astype(dtype)


def _output_sizes(input, size, scale_factor, recompute_scale_factor):
    """PyTorch's output sizes and the scale each dim's index formula uses (None: in / out)."""
    spatial = input.ndim - 2
    if size is not None and scale_factor is not None:
        raise GraphcError("only one of size or scale_factor should be defined")
    if size is None and scale_factor is None:
        raise GraphcError("either size or scale_factor should be defined")
    dims = list(input.dims[2:])
    for d in dims:
        if not isinstance(d, int):
            raise GraphcError(f"F.interpolate cannot resize the symbolic dim {d!r} of a compiled graph")
    if size is not None:
        if recompute_scale_factor:
            raise GraphcError("recompute_scale_factor is not meaningful with an explicit size.")
        sizes = list(size) if isinstance(size, (tuple, list)) else [size] * spatial
        if len(sizes) != spatial:
            raise GraphcError(f"Input and output must have the same number of spatial dimensions, but got input "
                              f"with spatial dimensions of {dims} and output size of {tuple(sizes)}. Please provide "
                              f"input tensor in (N, C, d1, d2, ...,dK) format and output size in (o1, o2, ...,oK) "
                              f"format.")
        return [int(s) for s in sizes], [None] * spatial
    scales = list(scale_factor) if isinstance(scale_factor, (tuple, list)) else [scale_factor] * spatial
    if len(scales) != spatial:
        raise GraphcError(f"Input and scale_factor must have the same number of spatial dimensions, but got input "
                          f"with spatial dimensions of {dims} and scale_factor of shape {tuple(scales)}. Please "
                          f"provide input tensor in (N, C, d1, d2, ...,dK) format and scale_factor in "
                          f"(s1, s2, ...,sK) format.")
    sizes = [int(np.floor(float(d) * float(s))) for d, s in zip(dims, scales)]
    return sizes, ([None] * spatial if recompute_scale_factor else [float(s) for s in scales])


def _along(input, axis, matrix):
    """``matrix`` (out, in) applied along spatial ``axis`` of ``input`` (a matmul)."""
    m = _const(input, matrix)
    dims = list(input.dims)
    if axis == input.ndim - 1:
        return apply("matmul", [input, apply("permute", [m], {"perm": [1, 0]})])
    after = int(np.prod(dims[axis + 1:]))
    if axis == input.ndim - 2:
        return apply("matmul", [m, input])
    flat = apply("reshape", [input], {"shape": dims[:axis + 1] + [after]})
    out = apply("matmul", [m, flat])
    return apply("reshape", [out], {"shape": dims[:axis] + [matrix.shape[0]] + dims[axis + 1:]})


def _const(like, array):
    """A constant tensor of ``array`` in ``like``'s dtype, on ``like``'s device."""
    from ..ops.creation import tensor as make
    t = make(np.ascontiguousarray(array, dtype=np.dtype(like.dtype.name)))
    return t if str(like.device) == "cpu" else t.to(str(like.device))


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resize the spatial dims of (N, C, L), (N, C, H, W) or (N, C, D, H, W) input (PyTorch's
    ``F.interpolate``): ``mode`` 'nearest', 'nearest-exact', 'linear' (3-D), 'bilinear' (4-D),
    'bicubic' (4-D, A = -0.75, clamped taps), 'trilinear' (5-D) or 'area'; ``size`` or
    ``scale_factor`` (any positive float), ``align_corners``, ``recompute_scale_factor``, with
    PyTorch's index and weight formulas. Each spatial dim is one matmul with a constant
    (out, in) matrix (measured faster than a broadcast for nearest too: benchmarks/resampling.py),
    so gradients come from autodiff.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> F.interpolate(gc.tensor([[[1.0, 2.0]]]), scale_factor=2, mode="linear").numpy()
    array([[[1.  , 1.25, 1.75, 2.  ]]], dtype=float32)
    """
    if mode not in _MODES:
        raise GraphcError(f"F.interpolate: unknown mode {mode!r}; expected one of {', '.join(_MODES)}")
    if mode in _LINEAR_RANK:
        align_corners = bool(align_corners)
    elif align_corners is not None:
        raise GraphcError("align_corners option can only be set with the interpolating modes: "
                          "linear | bilinear | bicubic | trilinear")
    if input.ndim not in (3, 4, 5):
        raise GraphcError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.ndim}D) for the "
                          f"modes: nearest | linear | bilinear | bicubic | trilinear | area | nearest-exact "
                          f"(got {mode})")
    if mode in _LINEAR_RANK and input.ndim != _LINEAR_RANK[mode]:
        raise GraphcError(f"Got {input.ndim}D input, but {mode} mode needs {_LINEAR_RANK[mode]}D input")
    sizes, scales = _output_sizes(input, size, scale_factor, recompute_scale_factor)
    out = input
    if antialias:  # PyTorch's antialiasing filters (graphc/nn/functional_antialias.py)
        from .functional_antialias import antialias_matrix
        if input.ndim != 4:
            raise GraphcError("Anti-alias option is restricted to bilinear and bicubic modes and requires a 4-D "
                              f"tensor as input (got a {input.ndim}-D tensor)")
        for k, (size_in, size_out, scale) in enumerate(zip(input.dims[2:], sizes, scales)):
            out = _along(out, 2 + k, antialias_matrix(mode, size_in, size_out, align_corners, scale))
        return out
    for k, (size_in, size_out, scale) in enumerate(zip(input.dims[2:], sizes, scales)):
        if size_in == size_out and (mode in ("nearest", "nearest-exact", "area") or scale in (None, 1.0)):
            continue
        out = _along(out, 2 + k, interpolation_matrix(mode, size_in, size_out, align_corners, scale))
    return out
