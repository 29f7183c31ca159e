"""Readers of ``GridSample`` (opsets 16 and 20/22), ``AffineGrid`` (opset 20) and
``ScatterElements`` (graphc's ``scatter`` op), checked against onnx's backend cases in
tests/test_onnx_grid_scatter_import.py.

GridSample is built as ``F.grid_sample`` builds it (graphc/nn/functional_grid.py), here with IR
ops through the builder: per sample and spatial axis a (N, P, size) weight matrix (the linear
tent ``relu(1 - |coord - i|)``, or 1 where ``rint(coord) == i`` for nearest), then one
contraction per axis, so any number of spatial dims (4-D and 5-D input) is the same code. Taps
outside the image carry no weight (zeros padding); border padding clamps the coordinate, and
reflection folds it back as PyTorch's ``reflect_coordinates`` (which for linear sampling equals
ONNX's per-tap reflection). Nearest rounds before the padding is applied, as ONNX's reference.
Cubic sampling is refused by name.

AffineGrid is one matmul of the constant base grid (``functional_grid._base_grid``) with
theta transposed; ``size`` must be known while importing.
"""
from __future__ import annotations

import math

import numpy as np

from ..ir.types import DType
from ..nn.functional_grid import _base_grid
from .shape_readers import _known, _shape

_LINEAR = ("bilinear", "linear")
_NEAREST = ("nearest",)


def _dtype_of(r, x) -> np.dtype:
    return np.asarray(x).dtype if _known(x) else np.dtype(r.value(x).type.dtype.numpy)


def _scalar(x_dtype, value):
    return np.asarray(value, dtype=x_dtype)


def _reflect(r, coord, twice_low, twice_high, dt):
    """PyTorch's ``reflect_coordinates``: fold ``coord`` into [low, high] by mirroring."""
    if twice_low == twice_high:
        return r.emit("mul", [coord, _scalar(dt, 0.0)])
    low, span = twice_low / 2.0, (twice_high - twice_low) / 2.0
    dist = r.emit("abs", [r.emit("sub", [coord, _scalar(dt, low)])])
    flips = r.emit("floor", [r.emit("div", [dist, _scalar(dt, span)])])
    extra = r.emit("sub", [dist, r.emit("mul", [flips, _scalar(dt, span)])])
    half = r.emit("floor", [r.emit("mul", [flips, _scalar(dt, 0.5)])])
    even = r.emit("eq", [r.emit("sub", [flips, r.emit("mul", [half, _scalar(dt, 2.0)])]), _scalar(dt, 0.0)])
    mirrored = r.emit("sub", [_scalar(dt, span + low), extra])
    return r.emit("where", [even, r.emit("add", [extra, _scalar(dt, low)]), mirrored])


def _clamp(r, coord, high, dt):
    return r.emit("minimum", [r.emit("maximum", [coord, _scalar(dt, 0.0)]), _scalar(dt, high)])


def _source(r, g, size, mode, padding, align, dt):
    """The pixel coordinate of normalized grid coordinates ``g`` along an axis of ``size``."""
    scale = (size - 1) / 2.0 if align else size / 2.0
    coord = r.emit("add", [r.emit("mul", [g, _scalar(dt, scale)]), _scalar(dt, (size - 1) / 2.0)])
    if mode in _NEAREST:
        coord = r.emit("round", [coord])  # half to even, as np.rint in ONNX's reference
    if padding == "border":
        coord = _clamp(r, coord, size - 1.0, dt)
    elif padding == "reflection":
        coord = _reflect(r, coord, 0, 2 * (size - 1), dt) if align else _reflect(r, coord, -1, 2 * size - 1, dt)
        coord = _clamp(r, coord, size - 1.0, dt)
    return coord


def _tap_weights(r, coord, size, mode, dt):
    """(N, P, size): each sample's weight on each pixel along one axis."""
    n, p = _shape(coord)
    coord = r.emit("reshape", [coord], {"shape": [n, p, 1]})
    pixels = np.arange(size, dtype=dt)
    if mode in _NEAREST:
        return r.emit("cast", [r.emit("eq", [coord, pixels])], {"dtype": DType.from_any(dt).name})
    tent = r.emit("sub", [_scalar(dt, 1.0), r.emit("abs", [r.emit("sub", [coord, pixels])])])
    return r.emit("relu", [tent])


def _grid_sample(r, args):
    x, grid = args
    attrs = r.attrs()
    mode = attrs.get("mode", "bilinear")
    padding = attrs.get("padding_mode", "zeros")
    align = bool(attrs.get("align_corners", 0))
    if mode not in _LINEAR + _NEAREST:
        raise r.error(f"GridSample with mode={mode!r} is not imported by graphc (linear/bilinear and nearest are)")
    if padding not in ("zeros", "border", "reflection"):
        raise r.error(f"GridSample with padding_mode={padding!r}; ONNX's are zeros, border and reflection")
    shape, gshape = list(_shape(x)), list(_shape(grid))
    spatial = len(shape) - 2
    if spatial < 1 or len(gshape) != spatial + 2 or gshape[-1] != spatial:
        raise r.error(f"GridSample of input {shape} with grid {gshape}: the grid needs shape (N, *out, {spatial})")
    n, c, sizes, outs = shape[0], shape[1], shape[2:], gshape[1:-1]
    if not all(isinstance(d, (int, np.integer)) for d in [c, *sizes, *outs]):
        raise r.error("GridSample needs static channel, spatial and grid sizes (only the batch may be symbolic)")
    dt = _dtype_of(r, x)
    if dt.kind != "f":
        raise r.error(f"GridSample of a {dt} input; graphc samples float tensors")
    if _dtype_of(r, grid) != dt:
        grid = r.emit("cast", [grid], {"dtype": DType.from_any(dt).name})
    p = math.prod(int(o) for o in outs)
    points = r.emit("reshape", [grid], {"shape": [n, p, spatial]})
    weights = []  # per spatial axis, in input order (grid component j is axis spatial - 1 - j)
    for axis, size in enumerate(sizes):
        j = spatial - 1 - axis
        g = r.emit("slice", [points], {"slices": [[None, None, 1], [None, None, 1], [j, None, 1]], "drop": [2]})
        coord = _source(r, g, int(size), mode, padding, align, dt)
        weights.append(_tap_weights(r, coord, int(size), mode, dt))
    lead = c * math.prod(int(s) for s in sizes[:-1])
    y = r.emit("reshape", [x], {"shape": [n, lead, int(sizes[-1])]})
    y = r.emit("matmul", [y, r.emit("permute", [weights[-1]], {"perm": [0, 2, 1]})])  # (N, C*D..H, P)
    for axis in range(spatial - 2, -1, -1):
        size = int(sizes[axis])
        lead = c * math.prod(int(s) for s in sizes[:axis])
        y = r.emit("reshape", [y], {"shape": [n, lead, size, p]})
        w = r.emit("reshape", [r.emit("permute", [weights[axis]], {"perm": [0, 2, 1]})], {"shape": [n, 1, size, p]})
        y = r.emit("sum", [r.emit("mul", [y, w])], {"dims": [2], "keepdim": False})
    return [r.emit("reshape", [y], {"shape": [n, c, *[int(o) for o in outs]]})]


def _affine_grid(r, args):
    """ONNX's AffineGrid: theta (N, 2, 3) and size (N, C, H, W), or (N, 3, 4) and (N, C, D, H, W)."""
    theta, size = args
    sizes = [int(s) for s in np.asarray(r.static(size, "AffineGrid's size")).reshape(-1)]
    spatial = len(sizes) - 2
    if spatial not in (2, 3) or tuple(_shape(theta)[1:]) != (spatial, spatial + 1):
        raise r.error(f"AffineGrid of theta {list(_shape(theta))} for size {sizes}: ONNX's 2-D and 3-D forms take "
                      "(N, 2, 3) with (N, C, H, W) and (N, 3, 4) with (N, C, D, H, W)")
    dt = _dtype_of(r, theta)
    base = _base_grid(sizes[2:], bool(r.attrs().get("align_corners", 0))).astype(dt)  # (P, spatial + 1)
    if _known(theta):
        grid = np.matmul(base, np.swapaxes(np.asarray(theta), 1, 2))
        return [grid.reshape([grid.shape[0], *sizes[2:], spatial])]
    grid = r.emit("matmul", [base, r.emit("permute", [theta], {"perm": [0, 2, 1]})])  # (N, P, spatial)
    return [r.emit("reshape", [grid], {"shape": [_shape(theta)[0], *sizes[2:], spatial]})]


_REDUCTIONS = {"none": "none", "add": "sum", "mul": "prod", "max": "amax", "min": "amin"}


def _scatter_elements(r, args):
    """ScatterElements: graphc's ``scatter`` op along ``axis`` (ONNX's reductions by their PyTorch names)."""
    data, indices, updates = args
    attrs = r.attrs()
    reduction = attrs.get("reduction", "none")
    if reduction not in _REDUCTIONS:
        raise r.error(f"ScatterElements with reduction={reduction!r}; ONNX's are none, add, mul, max and min")
    if _dtype_of(r, indices) != np.int64:
        indices = r.emit("cast", [indices], {"dtype": "int64"})
    if _known(updates) and not _known(data):
        updates = np.asarray(updates, dtype=_dtype_of(r, data))
    return [r.emit("scatter", [data, indices, updates], {"dim": int(attrs.get("axis", 0)),
                                                       "reduce": _REDUCTIONS[reduction]})]


GRID_READERS = {"GridSample": _grid_sample, "AffineGrid": _affine_grid, "ScatterElements": _scatter_elements}
