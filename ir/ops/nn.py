"""Neural-network ops: matmul, linear, conv2d, pooling, batch norm, dropout,
softmax/log_softmax and one_hot (what the losses need)."""
from __future__ import annotations

from ..errors import ShapeError
from ..registry import Attr, OpDef, register
from ..types import DType, TensorType
from ._shapes import (broadcast, fmt_shape, need_float, need_rank, need_static, norm_axis,
                      result_dtype, window_out)


def _matmul(in_types, attrs):
    a, b = in_types
    if a.rank == 0 or b.rank == 0:
        raise ShapeError("matmul needs inputs of rank >= 1")
    ash = (1,) + a.shape if a.rank == 1 else a.shape
    bsh = b.shape + (1,) if b.rank == 1 else b.shape
    if ash[-1] != bsh[-2]:
        raise ShapeError(f"matmul: inner dims differ: {fmt_shape(a.shape)} @ {fmt_shape(b.shape)}")
    batch = broadcast(ash[:-2], bsh[:-2])
    shape = batch + (ash[-2], bsh[-1])
    if a.rank == 1:
        shape = shape[:-2] + shape[-1:]
    if b.rank == 1:
        shape = shape[:-1]
    return [TensorType(shape, result_dtype(in_types))]


def _linear(in_types, attrs):
    x, w = in_types[:2]
    need_rank(w, (2,), "linear", "weight")
    if x.rank < 1 or x.shape[-1] != w.shape[1]:
        raise ShapeError(f"linear: input {x} has {x.shape[-1] if x.rank else '?'} features, "
                         f"weight {w} expects {w.shape[1]}")
    if len(in_types) == 3 and in_types[2].shape != (w.shape[0],):
        raise ShapeError(f"linear: bias {in_types[2]} should be [{w.shape[0]}]")
    return [TensorType(x.shape[:-1] + (w.shape[0],), result_dtype(in_types))]


_WINDOW = {"stride": Attr("ints", (1, 1)), "padding": Attr("ints", (0, 0)), "dilation": Attr("ints", (1, 1))}


def _conv2d(in_types, attrs):
    x, w = in_types[:2]
    need_rank(x, (4,), "conv2d")
    need_rank(w, (4,), "conv2d", "weight")
    need_float(x, "conv2d")
    groups = attrs["groups"]
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    need_static((c, h, wd), "conv2d", "channels and spatial dims")
    if c != cg * groups or o % groups:
        raise ShapeError(f"conv2d: input has {c} channels, weight {w} with groups={groups} expects {cg * groups}")
    if len(in_types) == 3 and in_types[2].shape != (o,):
        raise ShapeError(f"conv2d: bias {in_types[2]} should be [{o}]")
    (sh, sw), (ph, pw), (dh, dw) = attrs["stride"], attrs["padding"], attrs["dilation"]
    oh = window_out(h, kh, sh, ph, dh, "conv2d")
    ow = window_out(wd, kw, sw, pw, dw, "conv2d")
    return [TensorType((n, o, oh, ow), result_dtype(in_types))]


def _pool(name):
    def rule(in_types, attrs):
        x = in_types[0]
        need_rank(x, (4,), name)
        need_float(x, name)
        need_static(x.shape[1:], name, "channels and spatial dims")
        (kh, kw), (sh, sw), (ph, pw) = attrs["kernel_size"], attrs["stride"], attrs["padding"]
        dh, dw = attrs.get("dilation", (1, 1))
        if ph > kh // 2 or pw > kw // 2:
            raise ShapeError(f"{name}: padding {attrs['padding']} must be at most half the kernel {attrs['kernel_size']}")
        oh = window_out(x.shape[2], kh, sh, ph, dh, name)
        ow = window_out(x.shape[3], kw, sw, pw, dw, name)
        return [x.with_shape(x.shape[:2] + (oh, ow))]
    return rule


def _adaptive_avg_pool2d(in_types, attrs):
    x = in_types[0]
    need_rank(x, (4,), "adaptive_avg_pool2d")
    need_float(x, "adaptive_avg_pool2d")
    need_static(x.shape[2:], "adaptive_avg_pool2d", "spatial dims")
    oh, ow = attrs["output_size"]
    if oh <= 0 or ow <= 0:
        raise ShapeError(f"adaptive_avg_pool2d: output_size {attrs['output_size']} must be positive")
    return [x.with_shape(x.shape[:2] + (oh, ow))]


def _check_channel_params(x, params, op):
    need_rank(x, (2, 3, 4), op)
    need_float(x, op)
    c = x.shape[1]
    for p in params:
        if p.shape != (c,):
            raise ShapeError(f"{op}: per-channel tensor {p} should be [{c}] for input {x}")
    return TensorType((c,), x.dtype)


def _batch_norm(in_types, attrs):
    _check_channel_params(in_types[0], in_types[1:], "batch_norm")
    return [in_types[0]]


def _batch_norm_train(in_types, attrs):
    stat = _check_channel_params(in_types[0], in_types[1:], "batch_norm_train")
    return [in_types[0], stat, stat, stat, stat]


def _dropout(in_types, attrs):
    need_float(in_types[0], "dropout")
    if not 0.0 <= attrs["p"] < 1.0:
        raise ShapeError(f"dropout probability must be in [0, 1), got {attrs['p']}")
    return [in_types[0], in_types[0]]


def _softmax(name):
    def rule(in_types, attrs):
        x = in_types[0]
        need_float(x, name)
        norm_axis(attrs["dim"], x.rank)
        return [x]
    return rule


def _one_hot(in_types, attrs):
    t = in_types[0]
    if t.dtype is not DType.int64:
        raise ShapeError(f"one_hot needs int64 class indices, got {t.dtype.name}")
    if attrs["num_classes"] <= 0:
        raise ShapeError(f"one_hot: num_classes must be positive, got {attrs['num_classes']}")
    return [TensorType(t.shape + (attrs["num_classes"],), attrs["dtype"])]


register(OpDef("matmul", _matmul, inputs=(2, 2), doc="numpy matmul semantics, batched"))
register(OpDef("linear", _linear, inputs=(2, 3), doc="x @ w.T (+ b); w is (out, in)"))
register(OpDef("conv2d", _conv2d, attrs={**_WINDOW, "groups": Attr("int", 1)}, inputs=(2, 3),
               doc="NCHW convolution, weight (out, in/groups, kH, kW)"))
register(OpDef("max_pool2d", _pool("max_pool2d"),
               attrs={"kernel_size": Attr("ints"), "stride": Attr("ints"), "padding": Attr("ints", (0, 0)),
                      "dilation": Attr("ints", (1, 1))}))
register(OpDef("avg_pool2d", _pool("avg_pool2d"),
               attrs={"kernel_size": Attr("ints"), "stride": Attr("ints"), "padding": Attr("ints", (0, 0)),
                      "count_include_pad": Attr("bool", True)}))
register(OpDef("adaptive_avg_pool2d", _adaptive_avg_pool2d, attrs={"output_size": Attr("ints")}))
register(OpDef("batch_norm", _batch_norm, attrs={"eps": Attr("float", 1e-5)}, inputs=(5, 5),
               doc="eval form: (x, weight, bias, running_mean, running_var) -> y"))
register(OpDef("batch_norm_train", _batch_norm_train,
               attrs={"eps": Attr("float", 1e-5), "momentum": Attr("float", 0.1)}, inputs=(5, 5),
               doc="training form: (x, weight, bias, running_mean, running_var) -> "
                   "(y, batch mean, batch invstd, new running_mean, new running_var (unbiased))"))
register(OpDef("dropout", _dropout, attrs={"p": Attr("float", 0.5)}, effects="random",
               doc="(x) -> (x * mask / (1 - p), mask / (1 - p)); the mask comes from the plan's RNG"))
register(OpDef("softmax", _softmax("softmax"), attrs={"dim": Attr("int")}))
register(OpDef("log_softmax", _softmax("log_softmax"), attrs={"dim": Attr("int")}))
register(OpDef("one_hot", _one_hot, attrs={"num_classes": Attr("int"), "dtype": Attr("dtype", "float32")},
               doc="int64 class indices -> one-hot rows"))
