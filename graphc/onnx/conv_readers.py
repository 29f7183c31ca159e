"""Readers of ONNX's convolution and pooling ops (see ``readers`` for the contract): Conv 1-D
and 2-D with the same padding on both sides as graphc's conv2d (a 1-D one as a height-1
image); 3-D and asymmetrically padded ones as F.conv1d/2d/3d after an explicit F.pad;
MaxPool/AveragePool and the global pools."""
from __future__ import annotations

import numpy as np

import graphc as gc  # the torch namespace: its functions are the composites read here (composite.py)

from .composite import composing
from .pool_readers import torch_pad_amounts, window_pads
from .shape_readers import _known, _rank, _shape


def _same_pads(r, attrs: dict, spatial: tuple, kernel: list, strides: list, dilations: list) -> list:
    """Symmetric per-dim padding from ``pads`` or ``auto_pad``, for graphc's 2-D kernels, which
    pad both sides of a dim alike (the readers send other padding to F.pad first)."""
    pads = window_pads(r, attrs, spatial, kernel, strides, dilations)
    rank = len(kernel)
    if pads[:rank] != pads[rank:]:
        raise r.error(f"asymmetric padding {pads} (begins then ends); graphc pads both sides of a dim alike")
    return pads[:rank]


def _window_attrs(r, attrs: dict, x, kernel: list) -> dict:
    rank = len(kernel)
    strides = list(attrs.get("strides", [1] * rank))
    dilations = list(attrs.get("dilations", [1] * rank))
    spatial = _shape(x)[2:]
    pads = _same_pads(r, attrs, spatial, kernel, strides, dilations)
    if attrs.get("ceil_mode", 0):
        for n, k, s, d, p in zip(spatial, kernel, strides, dilations, pads):
            span = n + 2 * p - d * (k - 1) - 1
            if span % s and (span // s + 1) * s < n + p:  # ceil would add a window that floor drops
                raise r.error("ceil_mode=1 changes this pooling's output size; graphc pools with floor")
    return {"stride": strides, "padding": pads, "dilation": dilations}


def _as_2d(attrs: dict) -> dict:
    """A 1-D window's attributes for the same window over a height of 1."""
    out = dict(attrs)
    for key in ("strides", "dilations", "kernel_shape"):
        if key in attrs:
            out[key] = [1, *attrs[key]]
    if "pads" in attrs:
        out["pads"] = [0, attrs["pads"][0], 0, attrs["pads"][1]]
    return out


def _conv(r, args):
    x, w, bias = (list(args) + [None])[:3]
    attrs = r.attrs()
    if _rank(x) not in (3, 4) or _asymmetric(r, attrs, x, w):
        return [_general_conv(r, attrs, x, w, bias)]
    one_d = _rank(x) == 3
    if one_d:  # a 1-D convolution is a 2-D one over a height of 1
        n, c, length = _shape(x)
        x = r.emit("reshape", [x], {"shape": [n, c, 1, length]})
        w = np.expand_dims(w, 2) if _known(w) else r.emit("reshape", [w], {"shape": [*_shape(w)[:2], 1, _shape(w)[2]]})
        attrs = _as_2d(attrs)
    kernel = list(_shape(w)[2:])
    window = _window_attrs(r, attrs, x, kernel)
    inputs = [x, w] + ([bias] if bias is not None else [])
    out = r.emit("conv2d", inputs, {**window, "groups": int(attrs.get("group", 1))})
    if one_d:
        out = r.emit("reshape", [out], {"shape": [_shape(out)[0], _shape(out)[1], _shape(out)[3]]})
    return [out]


def _conv_layout(r, attrs: dict, x, w) -> tuple:
    rank = _rank(x) - 2
    kernel = list(_shape(w)[2:])
    strides = [int(v) for v in attrs.get("strides", [1] * rank)]
    dilations = [int(v) for v in attrs.get("dilations", [1] * rank)]
    spatial = list(_shape(x)[2:])
    if attrs.get("auto_pad", "NOTSET") not in ("NOTSET", "", "VALID") and not all(isinstance(n, int) for n in spatial):
        raise r.error(f"Conv with auto_pad={attrs['auto_pad']} over symbolic spatial dims {spatial}")
    return window_pads(r, attrs, spatial, kernel, strides, dilations), strides, dilations


def _asymmetric(r, attrs: dict, x, w) -> bool:
    pads = _conv_layout(r, attrs, x, w)[0]
    return pads[:len(pads) // 2] != pads[len(pads) // 2:]


def _general_conv(r, attrs: dict, x, w, bias):
    """A convolution of any rank (F.conv1d/2d/3d), padded first where the two sides of a dim
    differ (SAME_UPPER/SAME_LOWER with an even kernel, or explicit pads)."""
    rank = _rank(x) - 2
    if rank not in (1, 2, 3):
        raise r.error(f"Conv on a rank-{_rank(x)} input; graphc imports 1-D, 2-D and 3-D convolutions")
    pads, strides, dilations = _conv_layout(r, attrs, x, w)
    begin, end = pads[:rank], pads[rank:]
    with composing(r) as t:
        v = t(x)
        if begin != end:
            v, begin = gc.nn.functional.pad(v, torch_pad_amounts(begin, end)), [0] * rank
        conv = getattr(gc.nn.functional, f"conv{rank}d")
        out = conv(v, t(w), None if bias is None else t(bias), strides, begin, dilations, int(attrs.get("group", 1)))
        return t.value(out)


def _col2im(r, args):
    """Col2Im of 2-D blocks as F.fold into the padded image, then the pads cropped (they may
    differ at the two ends of a dim)."""
    x, image, block = args[:3]
    image = [int(v) for v in np.asarray(r.static(image, "Col2Im's image_shape")).reshape(-1)]
    block = [int(v) for v in np.asarray(r.static(block, "Col2Im's block_shape")).reshape(-1)]
    if len(image) != 2 or len(block) != 2:
        raise r.error(f"Col2Im of {len(image)}-D blocks; graphc imports 2-D ones (F.fold)")
    attrs = r.attrs()
    pads = [int(v) for v in attrs.get("pads", [0] * 4)]
    dilations = [int(v) for v in attrs.get("dilations", [1, 1])]
    strides = [int(v) for v in attrs.get("strides", [1, 1])]
    padded = [image[0] + pads[0] + pads[2], image[1] + pads[1] + pads[3]]
    with composing(r) as t:
        out = gc.nn.functional.fold(t(x), padded, block, dilations, 0, strides)
        return [t.value(out[:, :, pads[0]:pads[0] + image[0], pads[1]:pads[1] + image[1]])]


def _pool(op: str):
    def read(r, args):
        attrs = r.attrs()
        if _rank(args[0]) != 4:
            raise r.error(f"{op} on a rank-{_rank(args[0])} input; graphc imports 2-D pooling")
        window = _window_attrs(r, attrs, args[0], list(attrs["kernel_shape"]))
        pool_attrs = {"kernel_size": list(attrs["kernel_shape"]), "stride": window["stride"],
                      "padding": window["padding"]}
        if op == "max_pool2d":
            pool_attrs["dilation"] = window["dilation"]
        else:
            if window["dilation"] != [1, 1]:
                raise r.error("AveragePool with dilations; graphc's avg_pool2d has none")
            pool_attrs["count_include_pad"] = bool(attrs.get("count_include_pad", 0))
        return [r.emit(op, args[:1], pool_attrs)]
    return read


def _global_avg_pool(r, args):
    if _rank(args[0]) == 4:
        return [r.emit("adaptive_avg_pool2d", args, {"output_size": [1, 1]})]
    return [r.emit("mean", args, {"dims": list(range(2, _rank(args[0]))), "keepdim": True})]


def _global_max_pool(r, args):
    return [r.emit("max", args, {"dims": list(range(2, _rank(args[0]))), "keepdim": True})]


CONV_READERS = {"Conv": _conv, "Col2Im": _col2im, "MaxPool": _pool("max_pool2d"), "AveragePool": _pool("avg_pool2d"),
                "GlobalAveragePool": _global_avg_pool, "GlobalMaxPool": _global_max_pool}
