"""Pooling (max with ceil_mode/dilation and its indices, average with ceil_mode/count_include_pad/
divisor_override, adaptive average and max, max unpooling) with their backward ops."""
from __future__ import annotations

from ..errors import ShapeError
from ..registry import Attr, OpDef, register
from ..types import DType, TensorType, is_static
from ._shapes import check_pairs, expect_same, need_float, need_rank, need_static, window_out

_POOL = {"kernel_size": Attr("ints", minimum=1), "stride": Attr("ints", minimum=1),
         "padding": Attr("ints", (0, 0), minimum=0), "ceil_mode": Attr("bool", False)}
_MAX_POOL = {**_POOL, "dilation": Attr("ints", (1, 1), minimum=1)}
_AVG_POOL = {**_POOL, "count_include_pad": Attr("bool", True),
             "divisor_override": Attr("int", None, optional=True, minimum=1)}


def pool_out(size, kernel: int, stride: int, padding: int, dilation: int, ceil_mode: bool, op: str):
    """PyTorch's pooled size: floor (or ceil) of the window count, less a last window that would
    start in the right padding (ceil_mode); symbolic sizes pass through size-keeping windows."""
    out = window_out(size, kernel, stride, padding, dilation, op)
    if not ceil_mode or not is_static(size):
        return out
    span = size + 2 * padding - dilation * (kernel - 1) - 1
    out = -(-span // stride) + 1
    if (out - 1) * stride >= size + padding:
        out -= 1
    return out


def _pool(name):
    def rule(in_types, attrs):
        check_pairs(attrs, name, {"kernel_size": 1, "stride": 1, "padding": 0, "dilation": 1})
        x = in_types[0]
        need_rank(x, (4,), name)
        if name != "max_pool2d_indices":  # comparisons only: integer inputs work, as PyTorch's
            need_float(x, name)
        need_static(x.shape[1:2], name, "channels")
        (kh, kw), (sh, sw), (ph, pw) = attrs["kernel_size"], attrs["stride"], attrs["padding"]
        dh, dw = attrs.get("dilation", (1, 1))
        # padding up to the window's extent less one, as ONNX (onnxruntime) allows; PyTorch's F.max_pool2d
        # (and graphc's F.) refuse more than half the kernel, so every window keeps a real cell there
        if ph >= dh * (kh - 1) + 1 or pw >= dw * (kw - 1) + 1:
            raise ShapeError(f"{name}: padding {attrs['padding']} must be smaller than the kernel "
                             f"{attrs['kernel_size']} (dilated {attrs.get('dilation', (1, 1))})")
        ceil = attrs.get("ceil_mode", False)
        oh = pool_out(x.shape[2], kh, sh, ph, dh, ceil, name)
        ow = pool_out(x.shape[3], kw, sw, pw, dw, ceil, name)
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


def _max_pool2d_indices(in_types, attrs):
    return [_pool("max_pool2d_indices")(in_types, attrs)[0].with_dtype(DType.int64)]


def _adaptive_max_pool2d_indices(in_types, attrs):
    return [_adaptive_avg_pool2d(in_types, attrs)[0].with_dtype(DType.int64)]


def _vjp_adaptive_max(b, node, cts, needs):
    idx = b.emit1("adaptive_max_pool2d_indices", [node.inputs[0]], dict(node.attrs))
    return [b.emit1("adaptive_max_pool2d_grad", [cts[0], idx], {"input_size": list(node.inputs[0].type.shape[2:])})]


def _scatter_grad(name, size_attr):
    def rule(in_types, attrs):
        g, idx = in_types
        need_rank(g, (4,), name)
        if name != "max_unpool2d":  # a scatter moves any dtype (as PyTorch's max_unpool2d)
            need_float(g, name)
        if idx.dtype is not DType.int64 or idx.shape != g.shape:
            raise ShapeError(f"{name}: indices {idx} must be int64 shaped like the values {g}")
        if len(attrs[size_attr]) != 2:
            raise ShapeError(f"{name}: {size_attr} must have 2 entries, got {attrs[size_attr]}")
        return [g.with_shape(g.shape[:2] + tuple(attrs[size_attr]))]
    return rule


def _vjp_max_unpool2d(b, node, cts, needs):
    return [b.emit1("max_unpool2d_grad", [cts[0], node.inputs[1]]), None]


def _max_unpool2d_grad(in_types, attrs):
    g, idx = in_types
    need_rank(g, (4,), "max_unpool2d_grad")
    if idx.dtype is not DType.int64 or idx.rank != 4 or tuple(idx.shape[:2]) != tuple(g.shape[:2]):
        raise ShapeError(f"max_unpool2d_grad: indices {idx} must be int64 (N, C, h, w) for the cotangent {g}")
    return [idx.with_dtype(g.dtype)]


register(OpDef("max_pool2d", _pool("max_pool2d"), attrs=_MAX_POOL, vjp=_vjp_max_pool2d))
register(OpDef("max_pool2d_indices", _max_pool2d_indices, attrs=_MAX_POOL,
               doc="x -> int64 flat index (h * W + w) of each window's first maximum (return_indices)"))
register(OpDef("adaptive_max_pool2d", _adaptive_avg_pool2d, attrs={"output_size": Attr("ints", minimum=1)},
               vjp=_vjp_adaptive_max, doc="x -> max over PyTorch's adaptive bins"))
register(OpDef("adaptive_max_pool2d_indices", _adaptive_max_pool2d_indices,
               attrs={"output_size": Attr("ints", minimum=1)},
               doc="x -> int64 flat index (h * W + w) of each adaptive bin's first maximum (return_indices)"))
register(OpDef("adaptive_max_pool2d_grad", _scatter_grad("adaptive_max_pool2d_grad", "input_size"),
               attrs={"input_size": Attr("dims")}, inputs=(2, 2),
               doc="(g, indices) -> dL/dx: each g added at its index (bins may overlap)"))
register(OpDef("max_unpool2d", _scatter_grad("max_unpool2d", "output_size"), attrs={"output_size": Attr("dims")},
               inputs=(2, 2), vjp=_vjp_max_unpool2d,
               doc="(x, indices) -> zeros of output_size with x written at each (flat h * W + w) index"))
register(OpDef("max_unpool2d_grad", _max_unpool2d_grad, inputs=(2, 2),
               doc="(g, indices) -> g read at each index (max_unpool2d's gradient)"))
register(OpDef("max_pool2d_grad", _max_pool2d_grad, attrs=_MAX_POOL, inputs=(3, 3),
               doc="(g, x, y) -> dL/dx: each window's gradient goes to its first maximum"))
register(OpDef("avg_pool2d", _pool("avg_pool2d"), attrs=_AVG_POOL, vjp=_vjp_avg_pool2d))
register(OpDef("avg_pool2d_grad", _avg_pool2d_grad, attrs={**_AVG_POOL, "input_shape": Attr("dims")}))
register(OpDef("adaptive_avg_pool2d", _adaptive_avg_pool2d, attrs={"output_size": Attr("ints", minimum=1)},
               vjp=_vjp_adaptive))
register(OpDef("adaptive_avg_pool2d_grad", _adaptive_grad, attrs={"input_size": Attr("dims")}))
