"""conv2d and pooling, with their backward ops (written as ops so backends can make them fast)."""
from __future__ import annotations

from ..errors import ShapeError
from ..registry import Attr, OpDef, register
from ..types import TensorType
from .linalg import need_same_float
from ._shapes import check_pairs, need_float, need_rank, need_static, result_dtype, window_out

_WINDOW = {"stride": Attr("ints", (1, 1), minimum=1), "padding": Attr("ints", (0, 0), minimum=0),
           "dilation": Attr("ints", (1, 1), minimum=1)}
_CONV = {**_WINDOW, "groups": Attr("int", 1, minimum=1)}


def _conv2d(in_types, attrs):
    check_pairs(attrs, "conv2d", {"stride": 1, "padding": 0, "dilation": 1})
    x, w = in_types[:2]
    need_same_float(x, w, "conv2d")
    need_rank(x, (4,), "conv2d")
    need_rank(w, (4,), "conv2d", "weight")
    need_float(x, "conv2d")
    groups = attrs["groups"]
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    need_static((c, h, wd), "conv2d", "channels and spatial dims")
    if groups < 1 or c != cg * groups or o % groups:
        raise ShapeError(f"conv2d: input has {c} channels, weight {w} with groups={groups} expects {cg * groups}")
    if len(in_types) == 3 and in_types[2].shape != (o,):
        raise ShapeError(f"conv2d: bias {in_types[2]} should be [{o}]")
    (sh, sw), (ph, pw), (dh, dw) = attrs["stride"], attrs["padding"], attrs["dilation"]
    oh = window_out(h, kh, sh, ph, dh, "conv2d")
    ow = window_out(wd, kw, sw, pw, dw, "conv2d")
    return [TensorType((n, o, oh, ow), result_dtype(in_types))]


def _window_attrs(attrs) -> dict:
    return {k: attrs[k] for k in _CONV}


def _vjp_conv2d(b, node, cts, needs):
    x, w = node.inputs[:2]
    g = cts[0]
    attrs = _window_attrs(node.attrs)
    gx = b.emit1("conv2d_grad_input", [g, w], {**attrs, "input_shape": list(x.type.shape)}) if needs[0] else None
    gw = b.emit1("conv2d_grad_weight", [g, x], {**attrs, "weight_shape": list(w.type.shape)}) if needs[1] else None
    grads = [gx, gw]
    if len(node.inputs) == 3:
        grads.append(b.emit1("sum", [g], {"dims": [0, 2, 3]}) if needs[2] else None)
    return grads


def _expect_same(actual, expected, op: str, what: str) -> None:
    if actual.shape != expected.shape:
        raise ShapeError(f"{op}: {what} {actual} does not match the forward's {expected}")


def _conv2d_grad_input(in_types, attrs):
    g, w = in_types
    x = TensorType(tuple(attrs["input_shape"]), g.dtype)
    _expect_same(g, _conv2d([x, w], attrs)[0], "conv2d_grad_input", "cotangent")
    return [x]


def _conv2d_grad_weight(in_types, attrs):
    g, x = in_types
    w = TensorType(tuple(attrs["weight_shape"]), g.dtype)
    _expect_same(g, _conv2d([x, w], attrs)[0], "conv2d_grad_weight", "cotangent")
    return [w]


def _pool(name):
    def rule(in_types, attrs):
        check_pairs(attrs, name, {"kernel_size": 1, "stride": 1, "padding": 0, "dilation": 1})
        x = in_types[0]
        need_rank(x, (4,), name)
        need_float(x, name)
        need_static(x.shape[1:], name, "channels and spatial dims")
        (kh, kw), (sh, sw), (ph, pw) = attrs["kernel_size"], attrs["stride"], attrs["padding"]
        dh, dw = attrs.get("dilation", (1, 1))
        if ph > kh // 2 or pw > kw // 2:
            raise ShapeError(f"{name}: padding {attrs['padding']} must be at most half the kernel "
                             f"{attrs['kernel_size']}")
        oh = window_out(x.shape[2], kh, sh, ph, dh, name)
        ow = window_out(x.shape[3], kw, sw, pw, dw, name)
        return [x.with_shape(x.shape[:2] + (oh, ow))]
    return rule


def _vjp_max_pool2d(b, node, cts, needs):
    return [b.emit1("max_pool2d_grad", [cts[0], node.inputs[0], node.outputs[0]], dict(node.attrs))]


def _vjp_avg_pool2d(b, node, cts, needs):
    return [b.emit1("avg_pool2d_grad", [cts[0]], {**node.attrs, "input_shape": list(node.inputs[0].type.shape)})]


def _max_pool2d_grad(in_types, attrs):
    g, x, y = in_types
    out = _pool("max_pool2d")([x], attrs)[0]
    _expect_same(y, out, "max_pool2d_grad", "output")
    _expect_same(g, out, "max_pool2d_grad", "cotangent")
    return [x]


def _avg_pool2d_grad(in_types, attrs):
    x = TensorType(tuple(attrs["input_shape"]), in_types[0].dtype)
    _expect_same(in_types[0], _pool("avg_pool2d")([x], attrs)[0], "avg_pool2d_grad", "cotangent")
    return [x]


def _adaptive_avg_pool2d(in_types, attrs):
    x = in_types[0]
    need_rank(x, (4,), "adaptive_avg_pool2d")
    need_float(x, "adaptive_avg_pool2d")
    need_static(x.shape[2:], "adaptive_avg_pool2d", "spatial dims")
    check_pairs(attrs, "adaptive_avg_pool2d", {"output_size": 1})
    oh, ow = attrs["output_size"]
    if oh <= 0 or ow <= 0:
        raise ShapeError(f"adaptive_avg_pool2d: output_size {attrs['output_size']} must be positive")
    return [x.with_shape(x.shape[:2] + (oh, ow))]


def _vjp_adaptive(b, node, cts, needs):
    return [b.emit1("adaptive_avg_pool2d_grad", [cts[0]], {"input_size": list(node.inputs[0].type.shape[2:])})]


def _adaptive_grad(in_types, attrs):
    g = in_types[0]
    need_rank(g, (4,), "adaptive_avg_pool2d_grad")
    check_pairs(attrs, "adaptive_avg_pool2d_grad", {"input_size": 1})
    return [g.with_shape(g.shape[:2] + tuple(attrs["input_size"]))]


_POOL = {"kernel_size": Attr("ints", minimum=1), "stride": Attr("ints", minimum=1),
         "padding": Attr("ints", (0, 0), minimum=0)}
_MAX_POOL = {**_POOL, "dilation": Attr("ints", (1, 1), minimum=1)}
_AVG_POOL = {**_POOL, "count_include_pad": Attr("bool", True)}

register(OpDef("conv2d", _conv2d, attrs=_CONV, inputs=(2, 3), vjp=_vjp_conv2d,
               doc="NCHW convolution, weight (out, in/groups, kH, kW)"))
register(OpDef("conv2d_grad_input", _conv2d_grad_input, attrs={**_CONV, "input_shape": Attr("dims")},
               inputs=(2, 2), doc="(g, w) -> dL/dx of conv2d"))
register(OpDef("conv2d_grad_weight", _conv2d_grad_weight, attrs={**_CONV, "weight_shape": Attr("ints", minimum=1)},
               inputs=(2, 2), doc="(g, x) -> dL/dw of conv2d"))
register(OpDef("max_pool2d", _pool("max_pool2d"), attrs=_MAX_POOL, vjp=_vjp_max_pool2d))
register(OpDef("max_pool2d_grad", _max_pool2d_grad, attrs=_MAX_POOL, inputs=(3, 3),
               doc="(g, x, y) -> dL/dx: each window's gradient goes to its first maximum"))
register(OpDef("avg_pool2d", _pool("avg_pool2d"), attrs=_AVG_POOL, vjp=_vjp_avg_pool2d))
register(OpDef("avg_pool2d_grad", _avg_pool2d_grad, attrs={**_AVG_POOL, "input_shape": Attr("dims")}))
register(OpDef("adaptive_avg_pool2d", _adaptive_avg_pool2d, attrs={"output_size": Attr("ints", minimum=1)},
               vjp=_vjp_adaptive))
register(OpDef("adaptive_avg_pool2d_grad", _adaptive_grad, attrs={"input_size": Attr("ints", minimum=1)}))
