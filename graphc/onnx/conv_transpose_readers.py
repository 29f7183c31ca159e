"""ONNX import of ConvTranspose: 1-D and 2-D as graphc's ``conv_transpose2d``, 3-D as
``F.conv_transpose3d``.

Every attribute is read: strides, dilations, group, kernel_shape (checked against the
weight), output_padding, pads, output_shape and auto_pad. ONNX's output is the full transposed
convolution (size ``stride * (n - 1) + output_padding + dilation * (k - 1) + 1``) with
``pads`` cropped from its start and end; ``output_shape`` (or SAME_* auto_pad, whose output is
``n * stride``) gives the total crop, split as the operator's spec says (SAME_UPPER: the odd
one at the end; otherwise at the start). graphc's op crops ``padding`` from both ends and adds
``output_padding`` (< stride) back at the end, so the start crop is its padding, the
difference its output_padding, and a larger end crop a slice. A negative start crop (zeros
before the image) is refused. A 1-D ConvTranspose runs on a height-1 image, as Conv does.
"""
from __future__ import annotations

import numpy as np

import graphc as gc  # the torch namespace: its functions are the composites read here (composite.py)

from .composite import composing
from .shape_readers import _known, _rank, _shape


def _crops(r, attrs: dict, spatial, kernel, strides, dilations, out_pads) -> list:
    """(start, end) crop of the full output per dim; end already net of output_padding."""
    rank = len(kernel)
    full = [s * (n - 1) + p + d * (k - 1) + 1 for n, k, s, d, p in zip(spatial, kernel, strides, dilations, out_pads)]
    auto = attrs.get("auto_pad", "NOTSET") or "NOTSET"
    if auto not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise r.error(f"ConvTranspose auto_pad={auto!r} is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER")
    shape = attrs.get("output_shape")
    if shape is not None:
        shape = list(shape)[-rank:]
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        shape = [n * s for n, s in zip(spatial, strides)]
    if shape is None:
        pads = [0] * 2 * rank if auto == "VALID" else list(attrs.get("pads", [0] * 2 * rank))
        return list(zip(pads[:rank], pads[rank:]))
    crops = []
    for f, want in zip(full, shape):
        total = f - int(want)
        small, large = total // 2, total - total // 2
        crops.append((small, large) if auto == "SAME_UPPER" else (large, small))
    return crops


def _read_conv_transpose(r, args):
    x, w, bias = (list(args) + [None])[:3]
    attrs = r.attrs()
    rank = _rank(x)
    if rank not in (3, 4, 5):
        raise r.error(f"ConvTranspose on a rank-{rank} input; graphc imports 1-D, 2-D and 3-D transposed "
                      "convolutions")
    if not _known(w) and not all(isinstance(d, int) for d in _shape(w)):
        raise r.error("ConvTranspose needs a weight of known shape")
    dims = rank - 2
    kernel = [int(k) for k in _shape(w)[2:]]
    if "kernel_shape" in attrs and [int(k) for k in attrs["kernel_shape"]] != kernel:
        raise r.error(f"ConvTranspose kernel_shape {list(attrs['kernel_shape'])} differs from the weight's {kernel}")
    strides = [int(s) for s in attrs.get("strides", [1] * dims)]
    dilations = [int(d) for d in attrs.get("dilations", [1] * dims)]
    out_pads = [int(p) for p in attrs.get("output_padding", [0] * dims)][-dims:]
    spatial = _shape(x)[2:]
    if not all(isinstance(n, int) for n in spatial):
        raise r.error("ConvTranspose over a symbolic spatial dim is not imported")
    crops = _crops(r, attrs, spatial, kernel, strides, dilations, out_pads)
    padding, output_padding, trims = [], [], []
    for (start, end), s, extra in zip(crops, strides, out_pads):
        if start < 0:
            raise r.error(f"ConvTranspose pads {crops} start below zero (zeros before the image): not imported")
        net_end = end - extra  # the crop from the end of the unextended full output
        q = start - net_end
        if q >= s:
            raise r.error(f"ConvTranspose output {q} past the full output with stride {s}: not imported")
        padding.append(int(start))
        output_padding.append(int(max(q, 0)))
        trims.append(int(max(-q, 0)))
    group = int(attrs.get("group", 1))
    if dims == 3:
        return [_conv_transpose3d(r, x, w, bias, strides, padding, output_padding, group, dilations, trims)]
    one_d = dims == 1
    if one_d:
        n, c, length = _shape(x)
        x = r.emit("reshape", [x], {"shape": [n, c, 1, length]})
        w = np.expand_dims(w, 2) if _known(w) else r.emit("reshape", [w], {"shape": [*_shape(w)[:2], 1, kernel[0]]})
        strides, dilations, padding, output_padding, trims = ([1, strides[0]], [1, dilations[0]], [0, padding[0]],
                                                              [0, output_padding[0]], [0, trims[0]])
    out = r.emit("conv_transpose2d", [x, w] + ([bias] if bias is not None else []),
                 {"stride": strides, "padding": padding, "output_padding": output_padding, "dilation": dilations,
                  "groups": group})
    if any(trims):
        shape = _shape(out)
        slices = [[None, None, 1], [None, None, 1]] + [[0, size - t, 1] for size, t in zip(shape[2:], trims)]
        out = r.emit("slice", [out], {"slices": slices})
    if one_d:
        out = r.emit("reshape", [out], {"shape": [_shape(out)[0], _shape(out)[1], _shape(out)[3]]})
    return [out]


def _conv_transpose3d(r, x, w, bias, strides, padding, output_padding, group, dilations, trims):
    """The 3-D one as F.conv_transpose3d, then the end trims as a slice."""
    with composing(r) as t:
        out = gc.nn.functional.conv_transpose3d(t(x), t(w), None if bias is None else t(bias), strides, padding,
                                                output_padding, group, dilations)
        if any(trims):
            out = out[(slice(None), slice(None), *(slice(0, size - trim) for size, trim in zip(out.shape[2:], trims)))]
        return t.value(out)


CONV_TRANSPOSE_READERS = {"ConvTranspose": _read_conv_transpose}
