"""Elementwise math of issue #34: trigonometric and hyperbolic functions and their inverses,
expm1/exp2/log2/log10, reciprocal, atan2, fmod/remainder, copysign, hypot, the float tests
isnan/isinf and the logical and/or/xor. Float math on ints and bools gives float32 (the
kernel casts: ``promotes_inputs``), as PyTorch's; fmod and remainder keep integer dtypes.
Composites (isfinite, isposinf, deg2rad, xlogy, ...) live in graphc/ops/functions_math.py.
"""
from __future__ import annotations

import math

from ..errors import ShapeError
from ..registry import OpDef, register
from ..types import DType, TensorType
from ._shapes import broadcast, result_dtype
from .elementwise import _c, _no_bools, _to_float, _unary


def _mul(b, *xs):
    out = xs[0]
    for x in xs[1:]:
        out = b.emit1("mul", [out, x])
    return out


def _sq(b, x):
    return b.emit1("mul", [x, x])


_UNARY = {
    "tan": lambda b, x, y, g: _mul(b, g, b.emit1("add", [_sq(b, y), _c(b, 1.0, y)])),
    "asin": lambda b, x, y, g: _mul(b, g, b.emit1("rsqrt", [b.emit1("sub", [_c(b, 1.0, x), _sq(b, x)])])),
    "acos": lambda b, x, y, g: b.emit1("neg", [_mul(b, g, b.emit1("rsqrt", [b.emit1("sub", [_c(b, 1.0, x), _sq(b, x)])]))]),
    "atan": lambda b, x, y, g: b.emit1("div", [g, b.emit1("add", [_sq(b, x), _c(b, 1.0, x)])]),
    "sinh": lambda b, x, y, g: _mul(b, g, b.emit1("cosh", [x])),
    "cosh": lambda b, x, y, g: _mul(b, g, b.emit1("sinh", [x])),
    "asinh": lambda b, x, y, g: _mul(b, g, b.emit1("rsqrt", [b.emit1("add", [_sq(b, x), _c(b, 1.0, x)])])),
    "acosh": lambda b, x, y, g: _mul(b, g, b.emit1("rsqrt", [b.emit1("sub", [_sq(b, x), _c(b, 1.0, x)])])),
    "atanh": lambda b, x, y, g: b.emit1("div", [g, b.emit1("sub", [_c(b, 1.0, x), _sq(b, x)])]),
    "expm1": lambda b, x, y, g: _mul(b, g, b.emit1("add", [y, _c(b, 1.0, y)])),
    "exp2": lambda b, x, y, g: _mul(b, g, y, _c(b, math.log(2.0), y)),
    "log2": lambda b, x, y, g: b.emit1("div", [g, _mul(b, x, _c(b, math.log(2.0), x))]),
    "log10": lambda b, x, y, g: b.emit1("div", [g, _mul(b, x, _c(b, math.log(10.0), x))]),
    "reciprocal": lambda b, x, y, g: b.emit1("neg", [_mul(b, g, _sq(b, y))]),
}


def _float_test(in_types, attrs):
    """isnan / isinf: bool, False everywhere for ints and bools."""
    return [in_types[0].with_dtype(DType.bool)]


def _float_binary(in_types, attrs):
    """atan2, copysign, hypot: the promoted dtype, ints and bools giving float32."""
    out = TensorType(broadcast(*(t.shape for t in in_types)), result_dtype(in_types))
    return [out if out.dtype.is_float else out.with_dtype(DType.float32)]


def _hypot(in_types, attrs):
    """PyTorch's hypot has no integer or bool kernel: one input must be floating point."""
    out = TensorType(broadcast(*(t.shape for t in in_types)), result_dtype(in_types))
    if not out.dtype.is_float:
        raise ShapeError(f"hypot takes floating-point tensors (as PyTorch), got {out.dtype.name}; cast first (x.float())")
    return [out]


def _logical(in_types, attrs):
    return [TensorType(broadcast(*(t.shape for t in in_types)), DType.bool)]


def _vjp_atan2(b, node, cts, needs):
    x, y = node.inputs
    g = cts[0]
    denominator = b.emit1("add", [_sq(b, x), _sq(b, y)])
    scaled = b.emit1("div", [g, denominator])
    return [_mul(b, scaled, y) if needs[0] else None,
            b.emit1("neg", [_mul(b, scaled, x)]) if needs[1] else None]


def _vjp_hypot(b, node, cts, needs):
    x, y = node.inputs
    scaled = b.emit1("div", [cts[0], node.outputs[0]])
    return [_mul(b, scaled, x) if needs[0] else None, _mul(b, scaled, y) if needs[1] else None]


def _vjp_copysign(b, node, cts, needs):
    """PyTorch's: g * out / x, 0 where x is 0; nothing reaches ``other``."""
    x, out = node.inputs[0], node.outputs[0]
    if not needs[0]:
        return [None, None]
    ratio = b.emit1("div", [out, x])
    ratio = b.emit1("where", [b.emit1("eq", [x, _c(b, 0.0, x)]), _c(b, 0.0, ratio), ratio])
    return [_mul(b, cts[0], ratio), None]


def _vjp_rounded_mod(rounding):
    """fmod(x, y) = x - trunc(x / y) y, remainder(x, y) = x - floor(x / y) y: g, and
    -g * trunc/floor(x / y) for y (PyTorch's)."""
    def rule(b, node, cts, needs):
        x, y = node.inputs
        g = cts[0]
        gy = None
        if needs[1]:
            q = b.emit1("div", [x, y], {"rounding_mode": rounding})
            gy = b.emit1("neg", [_mul(b, g, q)])
        return [g if needs[0] else None, gy]
    return rule


for _name, _grad in _UNARY.items():
    register(OpDef(_name, _to_float, vjp=_unary(_grad), doc=f"elementwise {_name}", promotes_inputs=True))
for _name in ("isnan", "isinf"):
    register(OpDef(_name, _float_test, doc=f"elementwise {_name} -> bool (False for integers)"))
for _name in ("logical_and", "logical_or", "logical_xor"):
    register(OpDef(_name, _logical, inputs=(2, 2), doc=f"elementwise {_name} of truth values (nonzero) -> bool"))
for _name, _rule, _grad in (("atan2", _float_binary, _vjp_atan2), ("hypot", _hypot, _vjp_hypot),
                             ("copysign", _float_binary, _vjp_copysign)):
    register(OpDef(_name, _rule, inputs=(2, 2), vjp=_grad, promotes_inputs=True,
                   doc=f"elementwise {_name} with broadcasting (ints give float32)"))
register(OpDef("fmod", _no_bools("fmod"), inputs=(2, 2), vjp=_vjp_rounded_mod("trunc"),
               doc="C's fmod: the remainder with the dividend's sign (ints stay ints)"))
register(OpDef("remainder", _no_bools("remainder"), inputs=(2, 2), vjp=_vjp_rounded_mod("floor"),
               doc="Python's %: the remainder with the divisor's sign (ints stay ints)"))
