"""Elementwise math of issue #34 declared once for ``Tensor.x``, ``gc.x`` and ``F.x``: the
primitives of ir/ops/elementwise_math.py, composites (isfinite, isposinf, isneginf, deg2rad,
rad2deg, xlogy, clone) and the in-place ``x_`` methods PyTorch has.
"""
from __future__ import annotations

import math

import numpy as np

from ..core.dispatch import apply
from ..core.inplace import _arithmetic
from ..core.tensor import Tensor
from ..ir.errors import ShapeError
from ..ir.types import DType
from .functions import _primitive
from .surface import torchsymbol

tan = _primitive("tan", "Elementwise tangent (radians).")
asin = _primitive("asin", "Elementwise inverse sine.", names=("arcsin",))
acos = _primitive("acos", "Elementwise inverse cosine.", names=("arccos",))
atan = _primitive("atan", "Elementwise inverse tangent.", names=("arctan",))
sinh = _primitive("sinh", "Elementwise hyperbolic sine.")
cosh = _primitive("cosh", "Elementwise hyperbolic cosine.")
asinh = _primitive("asinh", "Elementwise inverse hyperbolic sine.", names=("arcsinh",))
acosh = _primitive("acosh", "Elementwise inverse hyperbolic cosine.", names=("arccosh",))
atanh = _primitive("atanh", "Elementwise inverse hyperbolic tangent.", names=("arctanh",))
expm1 = _primitive("expm1", "Elementwise exp(x) - 1, accurate for small x.")
exp2 = _primitive("exp2", "Elementwise 2**x.")
log2 = _primitive("log2", "Elementwise base-2 logarithm.")
log10 = _primitive("log10", "Elementwise base-10 logarithm.")
reciprocal = _primitive("reciprocal", "Elementwise 1 / x (ints give float32, as PyTorch).")
isnan = _primitive("isnan", "Elementwise test for NaN, as a bool tensor.")
isinf = _primitive("isinf", "Elementwise test for +-inf, as a bool tensor.")
logical_and = _primitive("logical_and", "Elementwise and of truth values (nonzero), as a bool tensor.", binary=True)
logical_or = _primitive("logical_or", "Elementwise or of truth values (nonzero), as a bool tensor.", binary=True)
logical_xor = _primitive("logical_xor", "Elementwise xor of truth values (nonzero), as a bool tensor.", binary=True)
atan2 = _primitive("atan2", "The angle of (other, input): atan(input / other) in the right quadrant.", binary=True,
                   names=("arctan2",))
hypot = _primitive("hypot", "Elementwise sqrt(input**2 + other**2), without overflow.", binary=True)
copysign = _primitive("copysign", "|input| with the sign of other (ints give float32).", binary=True)
fmod = _primitive("fmod", "C's fmod: the remainder with the dividend's sign.", binary=True)
remainder = _primitive("remainder", "Python's %: the remainder with the divisor's sign.", binary=True)


@torchsymbol()
def isfinite(input):
    """Neither NaN nor +-inf (all True for integers).

    >>> import graphc as gc
    >>> gc.isfinite(gc.tensor([1.0, float("inf"), float("nan")])).numpy().tolist()
    [True, False, False]
    """
    return apply("logical_not", [apply("logical_or", [isnan(input), isinf(input)])])


@torchsymbol()
def isposinf(input):
    """True where +inf."""
    return apply("logical_and", [isinf(input), apply("gt", [input, 0])])


@torchsymbol()
def isneginf(input):
    """True where -inf."""
    return apply("logical_and", [isinf(input), apply("lt", [input, 0])])


def _as_float(input):
    return input if input.dtype.is_float else input.cast(DType.float32)


@torchsymbol()
def deg2rad(input):
    """Degrees to radians, ``x * pi / 180`` (ints give float32).

    >>> import graphc as gc
    >>> round(gc.deg2rad(gc.tensor([180])).item(), 5)
    3.14159
    """
    if input.dtype.name == "bool":
        raise ShapeError("deg2rad does not take bool tensors (as PyTorch)")
    return apply("mul", [_as_float(input), math.pi / 180.0])


@torchsymbol()
def rad2deg(input):
    """Radians to degrees, ``x * 180 / pi`` (ints give float32)."""
    if input.dtype.name == "bool":
        raise ShapeError("rad2deg does not take bool tensors (as PyTorch)")
    return apply("mul", [_as_float(input), 180.0 / math.pi])


def _scalar_like(value, like: Tensor) -> Tensor:
    if isinstance(value, Tensor):
        return value
    dtype = like.dtype if like.dtype.is_float else (DType.float32 if isinstance(value, float) else DType.int64)
    return Tensor(np.asarray(value, dtype.numpy))


@torchsymbol(functional=False)
def xlogy(input, other):
    """``input * log(other)``, 0 where input is 0 unless other is NaN (ints give float32). A
    composite: ``input * log(where(input == 0 and other is a number, 1, other))``, so the
    gradients (log(other) and input / other) are 0 where input is 0, as PyTorch's.

    >>> import graphc as gc
    >>> gc.xlogy(gc.tensor([0.0, 2.0]), gc.tensor([0.0, 1.0])).numpy().tolist()
    [0.0, 0.0]
    """
    if not isinstance(input, Tensor):
        input = _scalar_like(input, other)
    if not isinstance(other, Tensor):
        other = _scalar_like(other, input)
    zero = apply("logical_and", [apply("eq", [input, 0]), apply("eq", [other, other])])
    safe = apply("where", [zero, 1.0, _as_float(other)])
    return apply("mul", [input, apply("log", [safe])])


@torchsymbol(method=False, functional=False)
def clone(input, *, memory_format=None):
    """A copy (``Tensor.clone``); gradients flow through it."""
    return input.clone()


for _name in ("tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "expm1", "exp2", "log2",
              "log10", "reciprocal", "deg2rad", "rad2deg", "arcsin", "arccos", "arctan", "arcsinh", "arccosh",
              "arctanh"):
    _arithmetic(_name, lambda x, _n=_name: getattr(x, _n)())
for _name in ("atan2", "arctan2", "hypot", "copysign", "fmod", "remainder", "xlogy", "logical_and", "logical_or",
              "logical_xor"):
    _arithmetic(_name, lambda x, other, _n=_name: getattr(x, _n)(other))
