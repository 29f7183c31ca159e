"""ONNX form of graphc's transposed convolution and sliding-block ops
(graphc/ir/ops/conv_transpose.py): ``conv_transpose2d`` -> ConvTranspose; ``im2col`` (F.unfold)
-> a grouped Conv with one-hot kernels, then Reshape; ``col2im`` (F.fold) -> Reshape, then a
grouped ConvTranspose with the same one-hot kernels (standard at every opset the writer
knows; Col2Im needs opset 18)."""
from __future__ import annotations

import numpy as np


def _pairs(attrs, key):
    return [int(v) for v in attrs[key]]


def write_conv_transpose(w, node, ins, out) -> None:
    a = node.attrs
    ph, pw = _pairs(a, "padding")
    w.node("ConvTranspose", ins, [out], node.meta, strides=_pairs(a, "stride"), pads=[ph, pw, ph, pw],
           dilations=_pairs(a, "dilation"), group=int(a["groups"]), output_padding=_pairs(a, "output_padding"),
           kernel_shape=[int(k) for k in node.inputs[1].type.shape[2:]])


def _one_hot_kernels(channels: int, kernel, dtype) -> np.ndarray:
    """(C * kH * kW, 1, kH, kW): row c*K + a*kW + b picks offset (a, b) of channel c's window."""
    kh, kw = kernel
    eye = np.eye(kh * kw, dtype=dtype).reshape(kh * kw, 1, kh, kw)
    return np.tile(eye, (channels, 1, 1, 1))


def _window(a) -> dict:
    ph, pw = _pairs(a, "padding")
    return {"strides": _pairs(a, "stride"), "pads": [ph, pw, ph, pw], "dilations": _pairs(a, "dilation"),
            "kernel_shape": _pairs(a, "kernel_size")}


def write_im2col(w, node, ins, out) -> None:
    x, y = node.inputs[0], node.outputs[0]
    channels = int(x.type.shape[1])
    kernels = w.constant(_one_hot_kernels(channels, _pairs(node.attrs, "kernel_size"), x.type.dtype.numpy), "blocks")
    image = w.fresh("blocks")
    w.node("Conv", [ins[0], kernels], [image], node.meta, group=channels, **_window(node.attrs))
    shape = w.constant(np.array([0, int(y.type.shape[1]), int(y.type.shape[2])], np.int64), "shape")
    w.node("Reshape", [image, shape], [out], node.meta)


def write_col2im(w, node, ins, out) -> None:
    a, cols, y = node.attrs, node.inputs[0], node.outputs[0]
    channels, (h, wd) = int(y.type.shape[1]), _pairs(a, "output_size")
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = (_pairs(a, k) for k in ("kernel_size", "stride", "padding", "dilation"))
    oh, ow = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1, (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    shape = w.constant(np.array([0, int(cols.type.shape[1]), oh, ow], np.int64), "shape")
    blocks = w.fresh("blocks")
    w.node("Reshape", [ins[0], shape], [blocks], node.meta)
    kernels = w.constant(_one_hot_kernels(channels, (kh, kw), cols.type.dtype.numpy), "blocks")
    extra = [h + 2 * ph - ((oh - 1) * sh + dh * (kh - 1) + 1), wd + 2 * pw - ((ow - 1) * sw + dw * (kw - 1) + 1)]
    w.node("ConvTranspose", [blocks, kernels], [out], node.meta, group=channels, output_padding=extra, **_window(a))


CONV_TRANSPOSE_WRITERS = {"conv_transpose2d": write_conv_transpose, "im2col": write_im2col, "col2im": write_col2im}
