"""Reductions: sum, mean, max over dims (with keepdim), argmax, and ``reduce_grad``
(broadcasting a reduction's cotangent back, divided by the count for mean)."""
from __future__ import annotations

from ..errors import ShapeError
from ..registry import Attr, OpDef, register
from ..types import DType, TensorType
from ._shapes import broadcast, fmt_shape, norm_axes, norm_axis, reduced_shape
from ._vjp import keep_shape

_REDUCE_ATTRS = {"dims": Attr("ints", None, optional=True), "keepdim": Attr("bool", False)}


def _reduce(name):
    def rule(in_types, attrs):
        x = in_types[0]
        axes = norm_axes(attrs["dims"], x.rank)
        dtype = x.dtype
        if name == "mean" and not dtype.is_float:
            raise ShapeError(f"mean needs a floating-point input, got {dtype.name}")
        if name == "sum" and dtype in (DType.bool, DType.uint8):
            dtype = DType.int64  # PyTorch sums small integer types in int64
        return [TensorType(reduced_shape(x.shape, axes, attrs["keepdim"]), dtype)]
    return rule


def _vjp_sum_mean(mean: bool):
    def rule(b, node, cts, needs):
        x = node.inputs[0]
        axes = norm_axes(node.attrs["dims"], x.type.rank)
        return [b.emit1("reduce_grad", [cts[0]], {"shape": list(x.type.shape), "dims": list(axes),
                                                   "keepdim": node.attrs["keepdim"], "mean": mean})]
    return rule


def _vjp_max(b, node, cts, needs):
    """Ties share the gradient evenly (as PyTorch's amax)."""
    x, y, g = node.inputs[0], node.outputs[0], cts[0]
    axes = norm_axes(node.attrs["dims"], x.type.rank)
    keep = keep_shape(x.type.shape, axes)
    if not node.attrs["keepdim"]:
        y = b.emit1("reshape", [y], {"shape": keep})
        g = b.emit1("reshape", [g], {"shape": keep})
    mask = b.emit1("cast", [b.emit1("eq", [x, y])], {"dtype": x.type.dtype.name})
    count = b.emit1("sum", [mask], {"dims": list(axes), "keepdim": True})
    return [b.emit1("mul", [mask, b.emit1("div", [g, count])])]


def _argmax(in_types, attrs):
    x = in_types[0]
    if x.dtype is DType.bool:
        raise ShapeError("argmax does not take bool tensors (as in PyTorch); cast first: x.long()")
    if attrs["dim"] is None:
        return [TensorType((1,) * x.rank if attrs["keepdim"] else (), DType.int64)]
    axis = norm_axis(attrs["dim"], x.rank)
    return [TensorType(reduced_shape(x.shape, (axis,), attrs["keepdim"]), DType.int64)]


def _reduce_grad(in_types, attrs):
    g = in_types[0]
    shape = tuple(attrs["shape"])
    axes = norm_axes(attrs["dims"], len(shape))
    if reduced_shape(shape, axes, attrs["keepdim"]) != g.shape:
        raise ShapeError(f"reduce_grad: cotangent {g} does not match {fmt_shape(shape)} reduced over {axes}")
    broadcast(keep_shape(shape, axes), shape)
    return [TensorType(shape, g.dtype)]


for _name, _vjp in (("sum", _vjp_sum_mean(False)), ("mean", _vjp_sum_mean(True)), ("max", _vjp_max)):
    register(OpDef(_name, _reduce(_name), attrs=dict(_REDUCE_ATTRS), vjp=_vjp, doc=f"{_name} over dims (None: all)",
                   accumulates=_name != "max"))
register(OpDef("argmax", _argmax, attrs={"dim": Attr("int", None, optional=True), "keepdim": Attr("bool", False)}))
def _assert_finite(in_types, attrs):
    if len(attrs["names"]) != len(in_types) or not all(t.dtype.is_float for t in in_types):
        raise ShapeError(f"assert_finite: {len(in_types)} float inputs need as many names, got {len(attrs['names'])}")
    return [TensorType((), DType.bool)]


register(OpDef("assert_finite", _assert_finite, attrs={"names": Attr("strs")}, inputs=(1, None), effects="check",
               doc="raise NonFiniteError naming the first input holding NaN or inf (a training step's guard)"))
register(OpDef("reduce_grad", _reduce_grad,
               attrs={"shape": Attr("dims"), "dims": Attr("ints"), "keepdim": Attr("bool"), "mean": Attr("bool")},
               doc="broadcast a sum/mean cotangent back to the input shape (mean divides by the count)"))
