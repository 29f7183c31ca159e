"""Transposed convolution and the im2col / col2im pair (F.unfold / F.fold).

``conv_transpose2d`` is the adjoint of ``conv2d`` in its input: its forward is exactly
conv2d's input gradient (the kernel reuses that one), and its vjp is written in the conv ops
(dL/dx = conv2d(g, w), dL/dw = conv2d_grad_weight(x, g)). ``im2col`` and ``col2im`` are each
other's vjp.
"""
from __future__ import annotations

from ..errors import ShapeError
from ..registry import Attr, OpDef, register
from ..types import DType, TensorType, is_static
from .conv import CONV_ATTRS, conv_attrs
from .linalg import need_same_dtype
from ._shapes import check_pairs, need_float, need_rank, need_static, window_out

TRANSPOSE_ATTRS = {**CONV_ATTRS, "output_padding": Attr("ints", (0, 0), minimum=0)}
_WINDOW_ONLY = {k: CONV_ATTRS[k] for k in ("stride", "padding", "dilation")}
FOLD_ATTRS = {**_WINDOW_ONLY, "kernel_size": Attr("ints", minimum=1)}


def transposed_size(size, kernel: int, stride: int, padding: int, dilation: int, output_padding: int, op: str):
    """``(size - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1``."""
    if not is_static(size):
        if stride == 1 and output_padding == 0 and 2 * padding == dilation * (kernel - 1):
            return size
        raise ShapeError(f"{op}: a symbolic spatial dim {size} passes only through a size-keeping window "
                         f"(stride 1, padding (kernel - 1) / 2), not kernel {kernel} stride {stride} padding {padding}")
    out = (size - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1
    if out <= 0:
        raise ShapeError(f"{op}: input size {size} with kernel {kernel}, stride {stride}, padding {padding}, "
                         f"dilation {dilation} gives a non-positive output size {out}")
    return out


def conv_transpose2d_rule(in_types, attrs):
    op = "conv_transpose2d"
    check_pairs(attrs, op, {"stride": 1, "padding": 0, "dilation": 1, "output_padding": 0})
    x, w = in_types[:2]
    need_same_dtype(in_types, op)
    need_rank(x, (4,), op)
    need_rank(w, (4,), op, "weight")
    need_float(x, op)
    groups = attrs["groups"]
    n, c, h, wd = x.shape
    ci, og, kh, kw = w.shape
    need_static((c,), op, "channels")
    if c != ci or c % groups:
        raise ShapeError(f"{op}: input has {c} channels, weight {w} (in, out/groups, kH, kW) with groups={groups} "
                         f"expects {ci}, divisible by groups")
    o = og * groups
    if len(in_types) == 3 and in_types[2].shape != (o,):
        raise ShapeError(f"{op}: bias {in_types[2]} should be [{o}]")
    for s, d, p in zip(attrs["stride"], attrs["dilation"], attrs["output_padding"]):
        if p >= s:  # PyTorch allows p < max(stride, dilation); then no conv of the output gives x back
            raise ShapeError(f"{op}: output_padding {tuple(attrs['output_padding'])} must be smaller than the stride "
                             f"{tuple(attrs['stride'])} (graphc's gradient is the conv of the output)")
    sizes = [transposed_size(size, k, s, p, d, op_, op) for size, k, s, p, d, op_ in
             zip((h, wd), (kh, kw), attrs["stride"], attrs["padding"], attrs["dilation"], attrs["output_padding"])]
    return [TensorType((n, o, *sizes), x.dtype)]


def conv_transpose2d_vjp(b, node, cts, needs):
    x, w = node.inputs[:2]
    g = cts[0]
    attrs = conv_attrs(node.attrs)
    gx = b.emit1("conv2d", [g, w], attrs) if needs[0] else None
    gw = b.emit1("conv2d_grad_weight", [x, g], {**attrs, "weight_shape": list(w.type.shape)}) if needs[1] else None
    grads = [gx, gw]
    if len(node.inputs) == 3:
        grads.append(b.emit1("sum", [g], {"dims": [0, 2, 3]}) if needs[2] else None)
    return grads


# ---- im2col / col2im ---------------------------------------------------------------------------

def _blocks(hw, attrs, op):
    return [window_out(size, k, s, p, d, op) for size, k, s, p, d in
            zip(hw, attrs["kernel_size"], attrs["stride"], attrs["padding"], attrs["dilation"])]


def _float_or_bool(t, op):
    """PyTorch's unfold/fold take floats and bools (fold sums bools as logical or), not integers."""
    if t.dtype is not DType.bool:
        need_float(t, op)


def im2col_rule(in_types, attrs):
    check_pairs(attrs, "im2col", {"kernel_size": 1, "stride": 1, "padding": 0, "dilation": 1})
    x = in_types[0]
    need_rank(x, (4,), "im2col")
    _float_or_bool(x, "im2col")
    n, c, h, w = x.shape
    need_static((c, h, w), "im2col", "channels and spatial dims")
    oh, ow = _blocks((h, w), attrs, "im2col")
    kh, kw = attrs["kernel_size"]
    return [TensorType((n, c * kh * kw, oh * ow), x.dtype)]


def col2im_rule(in_types, attrs):
    check_pairs(attrs, "col2im", {"kernel_size": 1, "stride": 1, "padding": 0, "dilation": 1, "output_size": 1})
    cols = in_types[0]
    need_rank(cols, (3,), "col2im")
    _float_or_bool(cols, "col2im")
    n, ck, length = cols.shape
    need_static((ck, length), "col2im", "column dims")
    kh, kw = attrs["kernel_size"]
    if ck % (kh * kw):
        raise ShapeError(f"col2im: {ck} rows are not a multiple of the kernel's {kh * kw} offsets")
    oh, ow = _blocks(attrs["output_size"], attrs, "col2im")
    if oh * ow != length:
        raise ShapeError(f"col2im: output_size {tuple(attrs['output_size'])} with these windows has {oh * ow} "
                         f"blocks, the input has {length}")
    return [TensorType((n, ck // (kh * kw), *attrs["output_size"]), cols.dtype)]


def _window(attrs) -> dict:
    return {k: attrs[k] for k in ("kernel_size", "stride", "padding", "dilation")}


def im2col_vjp(b, node, cts, needs):
    return [b.emit1("col2im", [cts[0]], {**_window(node.attrs), "output_size": list(node.inputs[0].type.shape[2:])})]


def col2im_vjp(b, node, cts, needs):
    return [b.emit1("im2col", [cts[0]], _window(node.attrs))]


register(OpDef("conv_transpose2d", conv_transpose2d_rule, attrs=TRANSPOSE_ATTRS, inputs=(2, 3),
               vjp=conv_transpose2d_vjp, promotes_inputs=True,
               doc="NCHW transposed convolution, weight (in, out/groups, kH, kW): conv2d's input gradient"))
register(OpDef("im2col", im2col_rule, attrs=FOLD_ATTRS, vjp=im2col_vjp,
               doc="(N, C, H, W) -> (N, C*kH*kW, L) sliding blocks (F.unfold)"))
register(OpDef("col2im", col2im_rule, attrs={**FOLD_ATTRS, "output_size": Attr("ints", minimum=1)}, vjp=col2im_vjp,
               doc="(N, C*kH*kW, L) -> (N, C, H, W) summing overlapping blocks (F.fold)"))
