"""Pooling (max, average, adaptive average) with their backward ops."""
from __future__ import annotations

from ..errors import ShapeError
from ..registry import Attr, OpDef, register
from ..types import TensorType
from ._shapes import check_pairs, expect_same, need_float, need_rank, need_static, window_out

_POOL = {"kernel_size": Attr("ints", minimum=1), "stride": Attr("ints", minimum=1),
         "padding": Attr("ints", (0, 0), minimum=0)}
_MAX_POOL = {**_POOL, "dilation": Attr("ints", (1, 1), minimum=1)}
_AVG_POOL = {**_POOL, "count_include_pad": Attr("bool", True)}


def _pool(name):
    def rule(in_types, attrs):
        check_pairs(attrs, name, {"kernel_size": 1, "stride": 1, "padding": 0, "dilation": 1})
        x = in_types[0]
        need_rank(x, (4,), name)
        need_float(x, name)
        need_static(x.shape[1:2], name, "channels")
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
    expect_same(y, out, "max_pool2d_grad", "output")
    expect_same(g, out, "max_pool2d_grad", "cotangent")
    return [x]


def _avg_pool2d_grad(in_types, attrs):
    x = TensorType(tuple(attrs["input_shape"]), in_types[0].dtype)
    expect_same(in_types[0], _pool("avg_pool2d")([x], attrs)[0], "avg_pool2d_grad", "cotangent")
    return [x]


def _adaptive_avg_pool2d(in_types, attrs):
    x = in_types[0]
    need_rank(x, (4,), "adaptive_avg_pool2d")
    need_float(x, "adaptive_avg_pool2d")
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
    if len(attrs["input_size"]) != 2:
        raise ShapeError(f"adaptive_avg_pool2d_grad: input_size must have 2 entries, got {attrs['input_size']}")
    return [g.with_shape(g.shape[:2] + tuple(attrs["input_size"]))]


register(OpDef("max_pool2d", _pool("max_pool2d"), attrs=_MAX_POOL, vjp=_vjp_max_pool2d))
register(OpDef("max_pool2d_grad", _max_pool2d_grad, attrs=_MAX_POOL, inputs=(3, 3),
               doc="(g, x, y) -> dL/dx: each window's gradient goes to its first maximum"))
register(OpDef("avg_pool2d", _pool("avg_pool2d"), attrs=_AVG_POOL, vjp=_vjp_avg_pool2d))
register(OpDef("avg_pool2d_grad", _avg_pool2d_grad, attrs={**_AVG_POOL, "input_shape": Attr("dims")}))
register(OpDef("adaptive_avg_pool2d", _adaptive_avg_pool2d, attrs={"output_size": Attr("ints", minimum=1)},
               vjp=_vjp_adaptive))
register(OpDef("adaptive_avg_pool2d_grad", _adaptive_grad, attrs={"input_size": Attr("dims")}))
