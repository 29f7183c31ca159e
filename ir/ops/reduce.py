"""Reductions: sum, mean, max over dims (with keepdim), and argmax."""
from __future__ import annotations

from ..errors import ShapeError
from ..registry import Attr, OpDef, register
from ..types import DType, TensorType
from ._shapes import norm_axes, norm_axis, reduced_shape

_REDUCE_ATTRS = {"dims": Attr("ints", None, optional=True), "keepdim": Attr("bool", False)}


def _reduce(name):
    def rule(in_types, attrs):
        x = in_types[0]
        axes = norm_axes(attrs["dims"], x.rank)
        dtype = x.dtype
        if name == "mean" and not dtype.is_float:
            raise ShapeError(f"mean needs a floating-point input, got {dtype.name}")
        if name == "sum" and dtype is DType.bool:
            dtype = DType.int64
        return [TensorType(reduced_shape(x.shape, axes, attrs["keepdim"]), dtype)]
    return rule


def _argmax(in_types, attrs):
    x = in_types[0]
    if attrs["dim"] is None:
        return [TensorType((1,) * x.rank if attrs["keepdim"] else (), DType.int64)]
    axis = norm_axis(attrs["dim"], x.rank)
    return [TensorType(reduced_shape(x.shape, (axis,), attrs["keepdim"]), DType.int64)]


for _name in ("sum", "mean", "max"):
    register(OpDef(_name, _reduce(_name), attrs=dict(_REDUCE_ATTRS), doc=f"{_name} over dims (None: all)"))
register(OpDef("argmax", _argmax, attrs={"dim": Attr("int", None, optional=True), "keepdim": Attr("bool", False)}))
