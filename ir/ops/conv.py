"""conv2d with its backward ops (written as ops so backends can make them fast)."""
from __future__ import annotations

from ..errors import ShapeError
from ..registry import Attr, OpDef, register
from ..types import TensorType
from .linalg import need_same_dtype
from ._shapes import check_pairs, expect_same, need_float, need_rank, need_static, window_out

_WINDOW = {"stride": Attr("ints", (1, 1), minimum=1), "padding": Attr("ints", (0, 0), minimum=0),
           "dilation": Attr("ints", (1, 1), minimum=1)}
CONV_ATTRS = {**_WINDOW, "groups": Attr("int", 1, minimum=1)}


def conv2d_rule(in_types, attrs):
    check_pairs(attrs, "conv2d", {"stride": 1, "padding": 0, "dilation": 1})
    x, w = in_types[:2]
    need_same_dtype(in_types, "conv2d")
    need_rank(x, (4,), "conv2d")
    need_rank(w, (4,), "conv2d", "weight")
    need_float(x, "conv2d")
    groups = attrs["groups"]
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    need_static((c,), "conv2d", "channels")
    need_static((o,), "conv2d", "output channels")
    if groups < 1 or c != cg * groups or o % groups:
        raise ShapeError(f"conv2d: input has {c} channels, weight {w} with groups={groups} expects {cg * groups}")
    if len(in_types) == 3 and in_types[2].shape != (o,):
        raise ShapeError(f"conv2d: bias {in_types[2]} should be [{o}]")
    (sh, sw), (ph, pw), (dh, dw) = attrs["stride"], attrs["padding"], attrs["dilation"]
    oh = window_out(h, kh, sh, ph, dh, "conv2d")
    ow = window_out(wd, kw, sw, pw, dw, "conv2d")
    return [TensorType((n, o, oh, ow), x.dtype)]


def conv_attrs(attrs) -> dict:
    """A conv node's window attrs (stride, padding, dilation, groups), for the conv ops its
    gradient, fusions and transposed twin emit."""
    return {k: attrs[k] for k in CONV_ATTRS}


def conv2d_vjp(b, node, cts, needs):
    x, w = node.inputs[:2]
    g = cts[0]
    attrs = conv_attrs(node.attrs)
    gx = b.emit1("conv2d_grad_input", [g, w], {**attrs, "input_shape": list(x.type.shape)}) if needs[0] else None
    gw = b.emit1("conv2d_grad_weight", [g, x], {**attrs, "weight_shape": list(w.type.shape)}) if needs[1] else None
    grads = [gx, gw]
    if len(node.inputs) == 3:
        grads.append(b.emit1("sum", [g], {"dims": [0, 2, 3]}) if needs[2] else None)
    return grads


def _conv2d_grad_input(in_types, attrs):
    g, w = in_types
    x = TensorType(tuple(attrs["input_shape"]), g.dtype)
    expect_same(g, conv2d_rule([x, w], attrs)[0], "conv2d_grad_input", "cotangent")
    return [x]


def _conv2d_grad_weight(in_types, attrs):
    g, x = in_types
    w = TensorType(tuple(attrs["weight_shape"]), g.dtype)
    expect_same(g, conv2d_rule([x, w], attrs)[0], "conv2d_grad_weight", "cotangent")
    return [w]


register(OpDef("conv2d", conv2d_rule, attrs=CONV_ATTRS, inputs=(2, 3), vjp=conv2d_vjp, promotes_inputs=True,
               accumulates=True, doc="NCHW convolution, weight (out, in/groups, kH, kW)"))
register(OpDef("conv2d_grad_input", _conv2d_grad_input, attrs={**CONV_ATTRS, "input_shape": Attr("dims")},
               inputs=(2, 2), doc="(g, w) -> dL/dx of conv2d"))
register(OpDef("conv2d_grad_weight", _conv2d_grad_weight, attrs={**CONV_ATTRS, "weight_shape": Attr("ints", minimum=1)},
               inputs=(2, 2), doc="(g, x) -> dL/dw of conv2d"))
