"""Elementwise ops: unary math, binary arithmetic with numpy broadcasting, comparisons,
``where`` and ``cast``."""
from __future__ import annotations

from ..errors import ShapeError
from ..registry import Attr, OpDef, register
from ..types import DType, TensorType
from ._shapes import broadcast, need_float, result_dtype


def _same(in_types, attrs):
    return [in_types[0]]


def _float_same(name):
    def rule(in_types, attrs):
        need_float(in_types[0], name)
        return [in_types[0]]
    return rule


def _binary(in_types, attrs):
    return [TensorType(broadcast(*(t.shape for t in in_types)), result_dtype(in_types))]


def _true_div(in_types, attrs):
    out = _binary(in_types, attrs)[0]
    return [out if out.dtype.is_float else out.with_dtype(DType.float32)]


def _compare(in_types, attrs):
    return [TensorType(broadcast(*(t.shape for t in in_types)), DType.bool)]


def _where(in_types, attrs):
    cond, a, b = in_types
    if cond.dtype is not DType.bool:
        raise ShapeError(f"where: condition must be bool, got {cond.dtype.name}")
    return [TensorType(broadcast(cond.shape, a.shape, b.shape), result_dtype([a, b]))]


def _cast(in_types, attrs):
    return [in_types[0].with_dtype(attrs["dtype"])]


def _logical_not(in_types, attrs):
    if in_types[0].dtype is not DType.bool:
        raise ShapeError(f"logical_not needs a bool input, got {in_types[0].dtype.name}")
    return [in_types[0]]


UNARY_FLOAT = ("exp", "log", "log1p", "sqrt", "rsqrt", "tanh", "sigmoid")
UNARY_ANY = ("neg", "abs", "relu", "sign")
BINARY = ("add", "sub", "mul", "pow", "maximum", "minimum")
COMPARE = ("eq", "ne", "lt", "le", "gt", "ge")

for _name in UNARY_FLOAT:
    register(OpDef(_name, _float_same(_name), doc=f"elementwise {_name}"))
for _name in UNARY_ANY:
    register(OpDef(_name, _same, doc=f"elementwise {_name}"))
for _name in BINARY:
    register(OpDef(_name, _binary, inputs=(2, 2), doc=f"elementwise {_name} with broadcasting"))
for _name in COMPARE:
    register(OpDef(_name, _compare, inputs=(2, 2), doc=f"elementwise comparison {_name} -> bool"))

register(OpDef("div", _true_div, inputs=(2, 2), doc="true division (ints give float32)"))
register(OpDef("leaky_relu", _float_same("leaky_relu"), attrs={"negative_slope": Attr("float", 0.01)}))
register(OpDef("where", _where, inputs=(3, 3), doc="cond ? a : b with broadcasting"))
register(OpDef("cast", _cast, attrs={"dtype": Attr("dtype")}, doc="convert dtype"))
register(OpDef("logical_not", _logical_not))
