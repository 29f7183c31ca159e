"""Readers of ``Floor`` and ``Round`` (in graphc's grid_sample exports), ``Pad`` in every mode (constant by logic_readers' reader; edge, reflect and wrap as
slices, broadcasts and concats, as ``F.pad`` builds them), ``Resize`` / ``Upsample`` (one
constant (out, in) matmul per resized axis, its weights from ONNX's coordinate transformation,
nearest rounding and cubic coefficient rules), ``DepthToSpace`` (DCR and CRD) and
``SpaceToDepth`` (reshape + transpose). Checked against onnx's backend cases in
tests/test_onnx_resample_import.py.
"""
from __future__ import annotations

import numpy as np

from ..nn.functional_resample import _pad_indices, _runs
from .logic_readers import _pad as _constant_pad
from .shape_readers import _known, _shape

_PAD_MODES = {"edge": "replicate", "reflect": "reflect", "wrap": "circular"}


def _slice_axis(r, x, axis, start, stop, step):
    slices = [[None, None, 1] for _ in _shape(x)]
    slices[axis] = [start, stop, step]
    return r.emit("slice", [x], {"slices": slices})


def take_along(r, x, axis, idx):
    """``np.take(x, idx, axis)`` for constant ``idx`` as graph nodes (see functional_resample.take_along)."""
    shape = list(_shape(x))
    if list(idx) == list(range(shape[axis])):
        return x
    pieces = []
    for first, count, step in _runs([int(i) for i in idx]):
        if step == 0 or count == 1:
            piece = _slice_axis(r, x, axis, first, first + 1, 1)
            if count > 1:
                piece = r.emit("broadcast_to", [piece], {"shape": shape[:axis] + [count] + shape[axis + 1:]})
        elif step == 1:
            piece = _slice_axis(r, x, axis, first, first + count, 1)
        else:
            last = first - count + 1
            piece = _slice_axis(r, x, axis, first, last - 1 if last > 0 else None, -1)
        pieces.append(piece)
    return pieces[0] if len(pieces) == 1 else r.emit("concat", pieces, {"dim": axis})


def _pad(r, args):
    mode = r.attrs().get("mode", "constant")
    if r.version < 11:  # pads (opset 1: paddings) and the fill value were attributes
        attrs = r.attrs()
        pads = attrs.get("pads", attrs.get("paddings"))
        dtype = np.asarray(args[0]).dtype if _known(args[0]) else np.dtype(args[0].type.dtype.numpy)
        args = [args[0], None if pads is None else np.asarray(pads, np.int64),
                np.asarray(attrs.get("value", 0.0), dtype)]
    if mode == "constant":
        return _constant_pad(r, args)
    if mode not in _PAD_MODES:
        raise r.error(f"Pad with mode={mode!r}; ONNX's modes are constant, reflect, edge and wrap")
    x, pads = args[0], args[1]
    rank = len(_shape(x))
    pads = [int(p) for p in np.asarray(r.static(pads, "Pad's pads")).reshape(-1)]
    axes_arg = args[3] if len(args) > 3 and args[3] is not None else None
    axes = list(range(rank)) if axes_arg is None else [int(a) % rank for a in r.static(axes_arg, "Pad's axes")]
    if len(pads) != 2 * len(axes):
        raise r.error(f"Pad with pads {pads} for axes {axes}")
    if _known(x):
        x = np.asarray(x)
    for k, axis in enumerate(axes):
        before, after = pads[k], pads[k + len(axes)]
        if not before and not after:
            continue
        size = _shape(x)[axis]
        if not isinstance(size, (int, np.integer)):
            raise r.error(f"Pad along the symbolic dim {size!r}")
        if _PAD_MODES[mode] == "reflect" and (before >= size or after >= size):
            raise r.error(f"Pad mode reflect by ({before}, {after}) along an axis of size {size}")
        idx = _pad_indices(_PAD_MODES[mode], int(size), before, after)
        x = np.take(x, idx, axis) if isinstance(x, np.ndarray) else take_along(r, x, axis, idx)
    return [x]


# ---- Resize ---------------------------------------------------------------------------------------

def _source(mode, out_index, size_in, size_out, scale):
    """ONNX's ``coordinate_transformation_mode``: the input coordinate of each output index."""
    if mode == "half_pixel":
        return (out_index + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (out_index + 0.5) / scale - 0.5 if size_out > 1 else np.zeros_like(out_index)
    if mode == "align_corners":  # ONNX's resized length is in * scale, unrounded
        length = size_in * scale
        return out_index * (size_in - 1) / (length - 1) if length > 1 else np.zeros_like(out_index)
    if mode == "asymmetric":
        return out_index / scale
    if mode == "half_pixel_symmetric":
        adjustment = size_out / (scale * size_in)
        center = size_in / 2
        offset = center * (1 - adjustment)
        return offset + (out_index + 0.5) / scale - 0.5
    raise ValueError(mode)


def _coefficients(attrs, ratio: float, scale: float) -> np.ndarray:
    """One output position's taps, as onnx's reference weighs them (antialias widens the
    linear and cubic filters by 1 / scale when downsampling, and normalizes them)."""
    mode, a = attrs.get("mode", "nearest"), float(attrs.get("cubic_coeff_a", -0.75))
    antialias = bool(attrs.get("antialias", 0))
    if mode == "nearest":
        if float(ratio).is_integer():
            return np.array([0.0, 1.0])
        rule = attrs.get("nearest_mode", "round_prefer_floor")
        up = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5, "floor": False, "ceil": True}[rule]
        return np.array([0.0, 1.0]) if up else np.array([1.0, 0.0])
    if mode == "linear" and not antialias:
        return np.array([1 - ratio, ratio])
    if mode == "linear":
        s = min(scale, 1.0)
        start = int(np.floor(-1 / s) + 1)
        taps = np.clip(1 - np.abs((np.arange(start, start + 2 - 2 * start) - ratio) * s), 0, 1)
        return taps / taps.sum()

    def cubic(x):
        x = abs(x)
        if x <= 1:
            return ((a + 2) * x - (a + 3)) * x * x + 1
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a if x < 2 else 0.0
    if not antialias:
        return np.array([cubic(ratio + 1), cubic(ratio), cubic(1 - ratio), cubic(2 - ratio)])
    s = min(scale, 1.0)
    start = int(np.floor(-2 / s) + 1)
    taps = np.array([cubic(s * (i - ratio)) for i in range(start, 2 - start)])
    return taps / taps.sum()


def resize_matrix(attrs, size_in: int, size_out: int, scale: float, roi=None):
    """The (out, in) matrix of ONNX Resize along one axis by the reference's own algorithm
    (every mode, antialias and tf_crop_and_resize included), and the output positions that take
    the extrapolation value (tf_crop_and_resize outside the input), or None."""
    ctm = attrs.get("coordinate_transformation_mode", "half_pixel")
    y = np.arange(size_out, dtype=np.float64)
    width = scale * size_in
    outside = None
    if ctm == "tf_crop_and_resize":
        start, end = roi
        src = np.full(size_out, (end - start) * (size_in - 1) / 2) if width == 1 else \
            y * (end - start) * (size_in - 1) / (width - 1)
        src = src + start * (size_in - 1)
        outside = (src < 0) | (src > size_in - 1)
    else:
        src = _source(ctm, y, size_in, size_out, scale)
    m = np.zeros((size_out, size_in))
    for row, x in enumerate(src):
        base = np.floor(x)
        ratio = 1.0 if x == base else x - base
        taps = _coefficients(attrs, ratio, scale)
        n, pad = len(taps), int(np.ceil(len(taps) / 2))
        padded = x + pad
        p = np.floor(padded)
        if n % 2 == 0:  # the reference's nearest n cells, ties to the left
            first = p + (-(n // 2) if padded == p else -(n // 2) + 1)
        else:
            first = p + (-((n - 1) // 2) if padded - p <= 0.5 else -((n - 1) // 2) + 1)
        index = (first + np.arange(n) - pad).astype(int)
        if attrs.get("exclude_outside", 0):
            taps = np.where((index >= 0) & (index < size_in), taps, 0.0)
            taps = taps / (taps.sum() or 1.0)
        np.add.at(m[row], np.clip(index, 0, size_in - 1), taps)
    return m, outside


def _along(r, x, axis, matrix):
    shape = list(_shape(x))
    m = matrix.astype(np.dtype(x.type.dtype.name) if not isinstance(x, np.ndarray) else x.dtype)
    if axis == len(shape) - 1:
        return r.emit("matmul", [x, np.ascontiguousarray(m.T)])
    if axis == len(shape) - 2:
        return r.emit("matmul", [m, x])
    after = int(np.prod(shape[axis + 1:]))
    flat = r.emit("reshape", [x], {"shape": shape[:axis + 1] + [after]})
    out = r.emit("matmul", [m, flat])
    return r.emit("reshape", [out], {"shape": shape[:axis] + [matrix.shape[0]] + shape[axis + 1:]})


def _resize(r, args):
    attrs = r.attrs()
    mode = attrs.get("mode", "nearest")
    if mode not in ("nearest", "linear", "cubic"):
        raise r.error(f"Resize with mode={mode!r}")
    ctm = attrs.get("coordinate_transformation_mode", "half_pixel")
    if attrs.get("antialias", 0) and mode == "nearest":
        raise r.error("Resize with antialias=1 and mode='nearest'; ONNX's antialias filters linear and cubic modes")
    policy = attrs.get("keep_aspect_ratio_policy", "stretch")
    if policy not in ("stretch", "not_larger", "not_smaller"):
        raise r.error(f"Resize with keep_aspect_ratio_policy={policy!r}")
    x = args[0]
    if r.node.op_type == "Upsample" or len(args) == 2:
        scales_arg, sizes_arg = args[1], None
    else:
        scales_arg = args[2] if len(args) > 2 else None
        sizes_arg = args[3] if len(args) > 3 else None
    shape = list(_shape(x))
    rank = len(shape)
    axes = [int(a) % rank for a in attrs.get("axes", range(rank))]
    scales = None if scales_arg is None or np.asarray(r.static(scales_arg, "Resize's scales")).size == 0 else \
        [float(s) for s in np.asarray(r.static(scales_arg, "Resize's scales")).reshape(-1)]
    if scales is None:
        if sizes_arg is None:
            raise r.error("Resize needs scales or sizes")
        sizes = [int(s) for s in np.asarray(r.static(sizes_arg, "Resize's sizes")).reshape(-1)]
        scales = [s / shape[a] for s, a in zip(sizes, axes)]
        if policy != "stretch":  # one scale for every axis, the sizes rounded half up from it
            scale = min(scales) if policy == "not_larger" else max(scales)
            scales = [scale] * len(axes)
            sizes = [int(scale * shape[a] + 0.5) for a in axes]
    else:
        sizes = [shape[a] if isinstance(shape[a], str) and s == 1 else int(np.floor(_static_dim(r, shape[a]) * s))
                 for s, a in zip(scales, axes)]
    roi = _roi(r, args, axes, rank) if ctm == "tf_crop_and_resize" else None
    if _known(x):
        x = np.asarray(x)
    for axis, size_out, scale in zip(axes, sizes, scales):
        size_in = shape[axis]
        trivial_roi = roi is None or tuple(roi[axis]) == (0.0, 1.0)
        if not isinstance(size_in, (int, np.integer)):
            if (size_out == size_in or scale == 1) and trivial_roi:
                continue
            raise r.error(f"Resize of the symbolic dim {size_in!r}")
        if size_out == size_in and scale == 1 and trivial_roi:  # the reference leaves such an axis alone
            continue
        matrix, outside = resize_matrix(attrs, int(size_in), size_out, scale,
                                                  None if roi is None else roi[axis])
        x = _along(r, x, axis, matrix)
        if outside is not None and outside.any():  # per axis, as the reference: the next axis reads it
            mask = outside.reshape([-1 if d == axis else 1 for d in range(rank)])
            fill = np.asarray(float(attrs.get("extrapolation_value", 0.0)), dtype=_float_type(r, x))
            x = np.where(mask, fill, x) if _known(x) else r.emit("where", [mask, fill, x])
    return [x]


def _static_dim(r, size):
    if isinstance(size, str):
        raise r.error(f"Resize of the symbolic dim {size!r}")
    return size


def _float_type(r, x):
    return np.asarray(x).dtype if _known(x) else np.dtype(x.type.dtype.numpy)


def _roi(r, args, axes: list, rank: int) -> dict:
    """tf_crop_and_resize's (start, end) per axis, as fractions of the input."""
    if len(args) < 2 or args[1] is None:
        raise r.error("Resize with coordinate_transformation_mode='tf_crop_and_resize' needs a roi")
    roi = [float(v) for v in np.asarray(r.static(args[1], "Resize's roi")).reshape(-1)]
    count = len(roi) // 2
    named = axes if count == len(axes) else list(range(rank))
    out = {a: (0.0, 1.0) for a in range(rank)}
    out.update({a: (roi[i], roi[count + i]) for i, a in enumerate(named)})
    return out


# ---- DepthToSpace / SpaceToDepth ------------------------------------------------------------------

def _depth_to_space(r, args):
    x = args[0]
    attrs = r.attrs()
    b = int(attrs["blocksize"])
    n, c, h, w = _shape(x)
    if attrs.get("mode", "DCR") == "DCR":
        y = r.emit("reshape", [x], {"shape": [n, b, b, c // (b * b), h, w]})
        y = r.emit("permute", [y], {"perm": [0, 3, 4, 1, 5, 2]})
    else:
        y = r.emit("reshape", [x], {"shape": [n, c // (b * b), b, b, h, w]})
        y = r.emit("permute", [y], {"perm": [0, 1, 4, 2, 5, 3]})
    return [r.emit("reshape", [y], {"shape": [n, c // (b * b), h * b, w * b]})]


def _space_to_depth(r, args):
    x = args[0]
    attrs = r.attrs()
    b = int(attrs["blocksize"])
    n, c, h, w = _shape(x)
    y = r.emit("reshape", [x], {"shape": [n, c, h // b, b, w // b, b]})
    crd = attrs.get("mode", "DCR") == "CRD"  # the mode attribute came in opset 28
    y = r.emit("permute", [y], {"perm": [0, 1, 3, 5, 2, 4] if crd else [0, 3, 5, 1, 2, 4]})
    return [r.emit("reshape", [y], {"shape": [n, c * b * b, h // b, w // b]})]


def _unary(op):
    def read(r, args):
        return [getattr(np, op)(args[0]) if _known(args[0]) else r.emit(op, [args[0]])]
    return read


RESAMPLE_READERS = {"Floor": _unary("floor"), "Round": _unary("round"), "Pad": _pad, "Resize": _resize, "Upsample": _resize, "DepthToSpace": _depth_to_space,
                    "SpaceToDepth": _space_to_depth}
