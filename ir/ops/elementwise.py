"""Elementwise ops: unary math (``erf`` too), binary arithmetic with numpy broadcasting,
comparisons, ``where``, ``cast``, and the fused activation backwards (``relu_grad`` ...).

vjp rules take ``(b, node, cts, needs)`` and return one cotangent (or None) per input.
Cotangents of broadcast inputs may keep the output's shape: autodiff reduces them.
"""
from __future__ import annotations

import math

from ..errors import ShapeError
from ..registry import Attr, OpDef, register
from ..types import DType, TensorType
from ._shapes import broadcast, need_float, need_numeric, result_dtype
from ._vjp import scalar


# ---- shape rules ------------------------------------------------------------------
def _numeric(name):
    def rule(in_types, attrs):
        need_numeric(in_types[0], name)
        return [in_types[0]]
    return rule


def _float_same(name):
    def rule(in_types, attrs):
        need_float(in_types[0], name)
        return [in_types[0]]
    return rule


def _to_float(in_types, attrs):
    """Float math (exp, log, ...) on ints and bools gives float32, as PyTorch's (the kernel
    casts the input: the OpDef promotes_inputs)."""
    t = in_types[0]
    return [t if t.dtype.is_float else t.with_dtype(DType.float32)]


def _binary(in_types, attrs):
    return [TensorType(broadcast(*(t.shape for t in in_types)), result_dtype(in_types))]


def _no_bools(name):
    """PyTorch has no bool kernel for these (``pow``, floor/trunc ``div``): two bool tensors are refused."""
    def rule(in_types, attrs):
        out = _binary(in_types, attrs)[0]
        if out.dtype is DType.bool:
            raise ShapeError(f"{name} does not take two bool tensors (as in PyTorch); cast one first (x.long())")
        return [out]
    return rule


ROUNDING_MODES = (None, "trunc", "floor")


def _div(in_types, attrs):
    """PyTorch's ``div``: true division (ints and bools give float32) unless ``rounding_mode``
    is 'trunc' or 'floor', which keep the promoted dtype (ints stay ints)."""
    mode = attrs["rounding_mode"]
    if mode not in ROUNDING_MODES:
        raise ShapeError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {mode!r}")
    if mode is not None:
        return _no_bools(f"div with rounding_mode={mode!r}")(in_types, attrs)
    out = _binary(in_types, attrs)[0]
    return [out if out.dtype.is_float or out.dtype.is_complex else out.with_dtype(DType.float32)]


def _no_bool_sub(in_types, attrs):
    if any(t.dtype is DType.bool for t in in_types):
        raise ShapeError("sub (the - operator) does not take bool tensors (as in PyTorch); "
                         "to invert a mask use ~mask or logical_not")
    return _binary(in_types, attrs)


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
    """``x == 0`` for numbers, as PyTorch's."""
    return [in_types[0].with_dtype(DType.bool)]


# ---- vjp rules ----------------------------------------------------------------------
def _c(b, value, like):
    return scalar(b, value, like.type.dtype)


def _unary(fn):
    def rule(b, node, cts, needs):
        return [fn(b, node.inputs[0], node.outputs[0], cts[0])]
    return rule


def _erf_grad(b, x, g):
    """d erf(x) / dx = 2 / sqrt(pi) * exp(-x^2)."""
    density = b.emit1("exp", [b.emit1("neg", [b.emit1("mul", [x, x])])])
    return b.emit1("mul", [g, b.emit1("mul", [density, _c(b, 2.0 / math.sqrt(math.pi), x)])])


def _cube(b, y):
    return b.emit1("mul", [y, b.emit1("mul", [y, y])])


_UNARY = {
    "neg": (_numeric("neg"), lambda b, x, y, g: b.emit1("neg", [g])),
    "abs": (_numeric("abs"), lambda b, x, y, g: b.emit1("mul", [g, b.emit1("sign", [x])])),
    "relu": (_numeric("relu"), lambda b, x, y, g: b.emit1("relu_grad", [g, y])),
    "sign": (lambda in_types, attrs: [in_types[0]], lambda b, x, y, g: None),  # bools too, as PyTorch
    "exp": (_to_float, lambda b, x, y, g: b.emit1("mul", [g, y])),
    "log": (_to_float, lambda b, x, y, g: b.emit1("div", [g, x])),
    "log1p": (_to_float, lambda b, x, y, g: b.emit1("div", [g, b.emit1("add", [x, _c(b, 1.0, x)])])),
    "sqrt": (_to_float, lambda b, x, y, g: b.emit1("div", [g, b.emit1("mul", [y, _c(b, 2.0, y)])])),
    "rsqrt": (_to_float, lambda b, x, y, g: b.emit1("mul", [g, b.emit1("mul", [_cube(b, y), _c(b, -0.5, y)])])),
    "tanh": (_to_float, lambda b, x, y, g: b.emit1("tanh_grad", [g, y])),
    "sigmoid": (_to_float, lambda b, x, y, g: b.emit1("sigmoid_grad", [g, y])),
    "erf": (_to_float, lambda b, x, y, g: _erf_grad(b, x, g)),
    "sin": (_to_float, lambda b, x, y, g: b.emit1("mul", [g, b.emit1("cos", [x])])),
    "cos": (_to_float, lambda b, x, y, g: b.emit1("neg", [b.emit1("mul", [g, b.emit1("sin", [x])])])),
    # rounding: integers pass through and bools are refused, as PyTorch's; the gradient is zero
    # almost everywhere (PyTorch's is zero everywhere)
    "floor": (_numeric("floor"), lambda b, x, y, g: None),
    "ceil": (_numeric("ceil"), lambda b, x, y, g: None),
    "round": (_numeric("round"), lambda b, x, y, g: None),
    "trunc": (_numeric("trunc"), lambda b, x, y, g: None),
}


def _vjp_leaky_relu(b, node, cts, needs):
    x, g = node.inputs[0], cts[0]
    scaled = b.emit1("mul", [g, _c(b, node.attrs["negative_slope"], g)])
    return [b.emit1("where", [b.emit1("gt", [x, _c(b, 0.0, x)]), g, scaled])]


def _hardtanh(in_types, attrs):
    if attrs["min_val"] > attrs["max_val"]:
        raise ShapeError(f"hardtanh: min_val {attrs['min_val']} is greater than max_val {attrs['max_val']}")
    return _numeric("hardtanh")(in_types, attrs)  # ints stay ints, as PyTorch's


def _vjp_hardtanh(b, node, cts, needs):
    """The gradient passes on the open interval only, as PyTorch's hardtanh backward."""
    x, g = node.inputs[0], cts[0]
    zero = _c(b, 0.0, g)
    above = b.emit1("where", [b.emit1("gt", [x, _c(b, node.attrs["min_val"], x)]), g, zero])
    return [b.emit1("where", [b.emit1("lt", [x, _c(b, node.attrs["max_val"], x)]), above, zero])]


def _vjp_add(b, node, cts, needs):
    return [cts[0], cts[0]]


def _vjp_sub(b, node, cts, needs):
    return [cts[0], b.emit1("neg", [cts[0]]) if needs[1] else None]


def _vjp_mul(b, node, cts, needs):
    x, y = node.inputs
    return [b.emit1("mul", [cts[0], y]) if needs[0] else None, b.emit1("mul", [cts[0], x]) if needs[1] else None]


def _vjp_div(b, node, cts, needs):
    if node.attrs.get("rounding_mode") is not None:  # piecewise constant: zero almost everywhere, as PyTorch
        return [None, None]
    x, y = node.inputs
    gx = b.emit1("div", [cts[0], y])
    gy = b.emit1("neg", [b.emit1("mul", [gx, b.emit1("div", [x, y])])]) if needs[1] else None
    return [gx if needs[0] else None, gy]


def _vjp_pow(b, node, cts, needs):
    x, e = node.inputs
    g, out = cts[0], node.outputs[0]
    gx = gy = None
    if needs[0]:
        gx = b.emit1("mul", [g, b.emit1("mul", [e, b.emit1("pow", [x, b.emit1("sub", [e, _c(b, 1.0, e)])])])])
    if needs[1]:
        base = x if x.type.dtype.is_float else b.emit1("cast", [x], {"dtype": out.type.dtype.name})
        gy = b.emit1("mul", [g, b.emit1("mul", [out, b.emit1("log", [base])])])
    return [gx, gy]


def _vjp_minmax(winner):
    # PyTorch splits the gradient evenly between tied inputs.
    def rule(b, node, cts, needs):
        x, y = node.inputs
        g = cts[0]
        dtype = g.type.dtype.name
        wins = b.emit1("cast", [b.emit1(winner, [x, y])], {"dtype": dtype})
        ties = b.emit1("cast", [b.emit1("eq", [x, y])], {"dtype": dtype})
        gx = b.emit1("mul", [g, b.emit1("add", [wins, b.emit1("mul", [ties, _c(b, 0.5, g)])])])
        return [gx if needs[0] else None, b.emit1("sub", [g, gx]) if needs[1] else None]
    return rule


def _vjp_where(b, node, cts, needs):
    cond, g = node.inputs[0], cts[0]
    zero = _c(b, 0.0, g)
    return [None, b.emit1("where", [cond, g, zero]) if needs[1] else None,
            b.emit1("where", [cond, zero, g]) if needs[2] else None]


def _vjp_cast(b, node, cts, needs):
    x = node.inputs[0]
    differentiable = x.type.dtype.is_float or x.type.dtype.is_complex
    return [b.emit1("cast", [cts[0]], {"dtype": x.type.dtype.name}) if differentiable else None]


# ---- registration -------------------------------------------------------------------
for _name, (_rule, _grad) in _UNARY.items():
    register(OpDef(_name, _rule, vjp=_unary(_grad), doc=f"elementwise {_name}", promotes_inputs=_rule is _to_float))
register(OpDef("leaky_relu", _float_same("leaky_relu"), attrs={"negative_slope": Attr("float", 0.01)}, vjp=_vjp_leaky_relu))
# a primitive, not where(x <= lo, lo, where(x >= hi, hi, x)): one clip pass instead of four
# (ReLU6 runs after every expand and depthwise conv of a MobileNet)
register(OpDef("hardtanh", _hardtanh, attrs={"min_val": Attr("float", -1.0), "max_val": Attr("float", 1.0)},
               vjp=_vjp_hardtanh, doc="x limited to [min_val, max_val] (relu6: [0, 6])"))

for _name, _grad in (("add", _vjp_add), ("mul", _vjp_mul), ("maximum", _vjp_minmax("gt")), ("minimum", _vjp_minmax("lt"))):
    register(OpDef(_name, _binary, inputs=(2, 2), vjp=_grad, doc=f"elementwise {_name} with broadcasting"))
register(OpDef("sub", _no_bool_sub, inputs=(2, 2), vjp=_vjp_sub, doc="elementwise sub with broadcasting (no bools)"))
register(OpDef("pow", _no_bools("pow"), inputs=(2, 2), vjp=_vjp_pow,
               doc="elementwise power; ints stay ints (a negative exponent gives 0, or +-1 for a base of +-1)"))
register(OpDef("div", _div, inputs=(2, 2), attrs={"rounding_mode": Attr("str", None, optional=True)}, vjp=_vjp_div,
               doc="division: true (ints give float32), or rounded toward zero / down ('trunc' / 'floor')"))

for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    register(OpDef(_name, _compare, inputs=(2, 2), doc=f"elementwise comparison {_name} -> bool"))
register(OpDef("logical_not", _logical_not))
register(OpDef("where", _where, inputs=(3, 3), vjp=_vjp_where, doc="cond ? a : b with broadcasting"))
register(OpDef("cast", _cast, attrs={"dtype": Attr("dtype")}, vjp=_vjp_cast, doc="convert dtype"))

def _same_shape_grad(in_types, attrs):
    g, y = in_types
    if g.shape != y.shape:
        raise ShapeError(f"cotangent {g} does not match the forward output {y}")
    return _binary(in_types, attrs)


for _name, _doc in (("relu_grad", "g * (y > 0): relu's backward from its output"),
                    ("sigmoid_grad", "g * y * (1 - y): sigmoid's backward from its output"),
                    ("tanh_grad", "g * (1 - y*y): tanh's backward from its output")):
    register(OpDef(_name, _same_shape_grad, inputs=(2, 2), doc=_doc))
