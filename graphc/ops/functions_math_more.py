"""More elementwise math of issue #34, each a composite over existing ops (autodiff gives
the gradients): addcmul, addcdiv, rsub, ``Tensor.__rdiv__``/``__mod__``/``__rmod__``,
clamp_min/clamp_max, float_power, fmax/fmin, heaviside, ldexp, lerp, logaddexp(2), logit,
nan_to_num, nextafter (the one primitive: ir/ops/float_steps.py), sgn, signbit, sinc and
isreal (isclose, allclose, equal, isin: functions_compare.py).
"""
from __future__ import annotations

import math

import numpy as np

from ..core.dispatch import apply
from ..core.tensor import Tensor
from ..ir.errors import GraphcError, ShapeError
from ..ir.types import DType
from ._pinning import pin_broadcast
from .functions import clamp
from .surface import torchsymbol

_METHOD_AND_TOP = dict(functional=False)
_METHOD_ONLY = dict(top=False, functional=False)


def _float(x):
    return x if not isinstance(x, Tensor) or x.dtype.is_float else x.cast(DType.float32)


@torchsymbol(**_METHOD_AND_TOP)
def addcmul(input, tensor1, tensor2, *, value=1):
    """``input + value * tensor1 * tensor2`` (broadcast).

    >>> import graphc as gc
    >>> gc.addcmul(gc.ones(2), gc.tensor([1.0, 2.0]), gc.tensor([3.0, 4.0]), value=0.5).numpy().tolist()
    [2.5, 5.0]
    """
    pin_broadcast(input, tensor1, tensor2)
    product = apply("mul", [tensor1, tensor2])
    return apply("add", [input, product if value == 1 else apply("mul", [product, value])])


@torchsymbol(**_METHOD_AND_TOP)
def addcdiv(input, tensor1, tensor2, *, value=1):
    """``input + value * tensor1 / tensor2`` (broadcast; floating-point tensors, as PyTorch).

    >>> import graphc as gc
    >>> gc.addcdiv(gc.ones(2), gc.tensor([1.0, 2.0]), gc.tensor([2.0, 4.0])).numpy().tolist()
    [1.5, 1.5]
    """
    if not (tensor1.dtype.is_float and tensor2.dtype.is_float):
        raise ShapeError("addcdiv divides integer tensors: use addcmul with a reciprocal or cast to float (as PyTorch)")
    pin_broadcast(input, tensor1, tensor2)
    quotient = apply("div", [tensor1, tensor2])
    return apply("add", [input, quotient if value == 1 else apply("mul", [quotient, value])])


@torchsymbol(method=False, functional=False)
def rsub(input, other, *, alpha=1):
    """``other - alpha * input`` (``sub`` with the operands swapped).

    >>> import graphc as gc
    >>> gc.rsub(gc.tensor([1.0, 2.0]), 10.0).numpy().tolist()
    [9.0, 8.0]
    """
    pin_broadcast(input, other)
    return apply("sub", [other, input if alpha == 1 else apply("mul", [input, alpha])])


@torchsymbol(**_METHOD_ONLY)
def __rdiv__(self, other):
    """``other / self`` (PyTorch keeps Python 2's name next to ``__rtruediv__``)."""
    pin_broadcast(self, other)
    return apply("div", [other, self])


@torchsymbol(**_METHOD_ONLY)
def __mod__(self, other):
    """``self % other``: Python's remainder, with the divisor's sign (``remainder``).

    >>> import graphc as gc
    >>> (gc.tensor([5.0, -5.0]) % 3).numpy().tolist()
    [2.0, 1.0]
    """
    return apply("remainder", [self, other])


@torchsymbol(**_METHOD_ONLY)
def __rmod__(self, other):
    """``other % self``."""
    pin_broadcast(self, other)
    return apply("remainder", [other, self])


@torchsymbol(**_METHOD_AND_TOP)
def clamp_min(input, min):  # noqa: A002 - PyTorch's argument name
    """``clamp(input, min=min)``.

    >>> import graphc as gc
    >>> gc.clamp_min(gc.tensor([-1.0, 2.0]), 0.0).numpy().tolist()
    [0.0, 2.0]
    """
    pin_broadcast(input, min)
    return clamp(input, min=min)


@torchsymbol(**_METHOD_AND_TOP)
def clamp_max(input, max):  # noqa: A002 - PyTorch's argument name
    """``clamp(input, max=max)``.

    >>> import graphc as gc
    >>> gc.clamp_max(gc.tensor([-1.0, 2.0]), 0.0).numpy().tolist()
    [-1.0, 0.0]
    """
    pin_broadcast(input, max)
    return clamp(input, max=max)


@torchsymbol(**_METHOD_AND_TOP)
def float_power(input, exponent):
    """``input ** exponent`` in float64, whatever the operands' dtypes (as PyTorch).

    >>> import graphc as gc
    >>> gc.float_power(gc.tensor([2, 3]), 2).dtype
    <DType.float64: 'f64'>
    """
    pin_broadcast(input, exponent)
    base = input.cast(DType.float64) if isinstance(input, Tensor) else float(input)
    power = exponent.cast(DType.float64) if isinstance(exponent, Tensor) else float(exponent)
    return apply("pow", [base, power])


def _nan_ignoring(input, other, keep_input):
    """fmax/fmin: ``keep_input`` where input wins or other is NaN; the gradient goes whole to
    the chosen operand (ties to input), as PyTorch's."""
    pin_broadcast(input, other)
    if not input.dtype.is_float and not (isinstance(other, Tensor) and other.dtype.is_float):
        return apply("where", [apply(keep_input, [input, other]), input, other])
    choose = apply("logical_or", [apply(keep_input, [input, other]), apply("isnan", [other])])
    return apply("where", [choose, input, other])


@torchsymbol(**_METHOD_AND_TOP)
def fmax(input, other):
    """The elementwise maximum ignoring NaN (NaN only where both are).

    >>> import graphc as gc
    >>> gc.fmax(gc.tensor([1.0, float("nan")]), gc.tensor([float("nan"), 2.0])).numpy().tolist()
    [1.0, 2.0]
    """
    return _nan_ignoring(input, other, "ge")


@torchsymbol(**_METHOD_AND_TOP)
def fmin(input, other):
    """The elementwise minimum ignoring NaN (NaN only where both are).

    >>> import graphc as gc
    >>> gc.fmin(gc.tensor([1.0, float("nan")]), gc.tensor([float("nan"), 2.0])).numpy().tolist()
    [1.0, 2.0]
    """
    return _nan_ignoring(input, other, "le")


@torchsymbol(**_METHOD_AND_TOP)
def heaviside(input, values):
    """0 where input < 0, ``values`` where input == 0, 1 where input > 0 (NaN gives 0, as PyTorch).

    >>> import graphc as gc
    >>> gc.heaviside(gc.tensor([-1.0, 0.0, 2.0]), gc.tensor([0.5])).numpy().tolist()
    [0.0, 0.5, 1.0]
    """
    if isinstance(values, Tensor) and values.dtype is not input.dtype:
        raise ShapeError(f"heaviside takes input and values of one dtype (as PyTorch), got "
                         f"{input.dtype.name} and {values.dtype.name}")
    pin_broadcast(input, values)
    step = apply("gt", [input, 0]).cast(input.dtype)
    return apply("where", [apply("eq", [input, 0]), values, step])


@torchsymbol(**_METHOD_AND_TOP)
def ldexp(input, other):
    """``input * 2 ** other`` (float; ints give float32).

    >>> import graphc as gc
    >>> gc.ldexp(gc.tensor([1.5]), gc.tensor([3])).numpy().tolist()
    [12.0]
    """
    pin_broadcast(input, other)
    power = apply("exp2", [other]) if isinstance(other, Tensor) else 2.0 ** other
    return apply("mul", [_float(input), power])


@torchsymbol(**_METHOD_AND_TOP)
def lerp(input, end, weight):
    """``input + weight * (end - input)``, written from the nearer end when |weight| >= 0.5 as
    PyTorch's kernel does (exact at weight 1).

    >>> import graphc as gc
    >>> gc.lerp(gc.tensor([0.0, 10.0]), gc.tensor([10.0, 20.0]), 0.25).numpy().tolist()
    [2.5, 12.5]
    """
    pin_broadcast(input, end, weight)
    span = apply("sub", [end, input])
    if not isinstance(weight, Tensor):
        if abs(weight) < 0.5:
            return apply("add", [input, apply("mul", [span, weight])])
        return apply("sub", [end, apply("mul", [span, 1.0 - weight])])
    low = apply("add", [input, apply("mul", [weight, span])])
    high = apply("sub", [end, apply("mul", [span, apply("sub", [1.0, weight])])])
    return apply("where", [apply("lt", [weight.abs(), 0.5]), low, high])


def _log_add(input, other, exp_fn, scale):
    """``max + log1p(exp_fn(-|a - b|)) * scale``; equal infinities give themselves."""
    pin_broadcast(input, other)
    a, b = _float(input), _float(other)
    same_inf = apply("logical_and", [apply("isinf", [a]), apply("eq", [a, b])])
    sa = apply("where", [same_inf, 0.0, a])  # keeps inf - inf (NaN) out of the gradient
    sb = apply("where", [same_inf, 0.0, b])
    gap = apply("neg", [apply("abs", [apply("sub", [sa, sb])])])
    tail = apply("log1p", [apply(exp_fn, [gap])])
    out = apply("add", [apply("maximum", [sa, sb]), tail if scale == 1 else apply("mul", [tail, scale])])
    return apply("where", [same_inf, a, out])


@torchsymbol(**_METHOD_AND_TOP)
def logaddexp(input, other):
    """``log(exp(input) + exp(other))`` without overflow.

    >>> import graphc as gc
    >>> round(gc.logaddexp(gc.tensor([1000.0], dtype=gc.float64), gc.tensor([1000.0], dtype=gc.float64)).item(), 4)
    1000.6931
    """
    return _log_add(input, other, "exp", 1)


@torchsymbol(**_METHOD_AND_TOP)
def logaddexp2(input, other):
    """``log2(2**input + 2**other)`` without overflow.

    >>> import graphc as gc
    >>> gc.logaddexp2(gc.tensor([3.0]), gc.tensor([3.0])).item()
    4.0
    """
    return _log_add(input, other, "exp2", 1.0 / math.log(2.0))


@torchsymbol(**_METHOD_AND_TOP)
def logit(input, eps=None):
    """``log(p / (1 - p))``, with p clamped to [eps, 1 - eps] when eps is given (the gradient
    is then 0 outside, as PyTorch's).

    >>> import graphc as gc
    >>> gc.logit(gc.tensor([0.5])).item()
    0.0
    """
    p = _float(input)
    if eps is not None:
        p = clamp(p, eps, 1.0 - eps)
    return apply("log", [apply("div", [p, apply("sub", [1.0, p])])])


@torchsymbol(**_METHOD_AND_TOP)
def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """NaN, +inf and -inf replaced by ``nan``, ``posinf`` and ``neginf`` (default: the
    dtype's largest and lowest finite values); integers unchanged.

    >>> import graphc as gc
    >>> gc.nan_to_num(gc.tensor([float("nan"), float("inf"), 1.0]), posinf=9.0).numpy().tolist()
    [0.0, 9.0, 1.0]
    """
    if not input.dtype.is_float:
        return input.clone()
    info = np.finfo(input.dtype.numpy)
    posinf = float(info.max) if posinf is None else posinf
    neginf = float(info.min) if neginf is None else neginf
    out = apply("where", [apply("isnan", [input]), nan, input])
    inf = apply("isinf", [input])
    out = apply("where", [apply("logical_and", [inf, apply("gt", [input, 0])]), posinf, out])
    return apply("where", [apply("logical_and", [inf, apply("lt", [input, 0])]), neginf, out])


@torchsymbol(**_METHOD_AND_TOP)
def nextafter(input, other):
    """The next representable float after ``input`` toward ``other`` (the gradient passes to
    input unchanged, as PyTorch's).

    >>> import graphc as gc
    >>> gc.nextafter(gc.tensor([1.0]), gc.tensor([2.0])).item() - 1.0 == 2.0 ** -23
    True
    """
    pin_broadcast(input, other)
    return apply("nextafter", [input, other])


@torchsymbol(**_METHOD_AND_TOP)
def sgn(input):
    """The sign, ``x / |x|`` for complex numbers: ``sign`` for graphc's real tensors.

    >>> import graphc as gc
    >>> gc.sgn(gc.tensor([-2.0, 0.0, 3.0])).numpy().tolist()
    [-1.0, 0.0, 1.0]
    """
    return apply("sign", [input])


@torchsymbol(**_METHOD_AND_TOP)
def signbit(input):
    """True where the sign bit is set (-0.0 and negative NaN too), as a bool tensor.

    >>> import graphc as gc
    >>> gc.signbit(gc.tensor([-0.0, 0.0, -1.0])).numpy().tolist()
    [True, False, True]
    """
    if not input.dtype.is_float:
        return apply("lt", [input, 0])
    return apply("lt", [apply("copysign", [apply("add", [apply("mul", [input.detach(), 0.0]), 1.0]), input]), 0])


@torchsymbol(**_METHOD_AND_TOP)
def sinc(input):
    """The normalised sinc, ``sin(pi x) / (pi x)``, 1 at 0 (with gradient 0 there).

    >>> import graphc as gc
    >>> [round(v, 4) for v in gc.sinc(gc.tensor([0.0, 0.5])).tolist()]
    [1.0, 0.6366]
    """
    x = _float(input)
    zero = apply("eq", [x, 0])
    scaled = apply("mul", [apply("where", [zero, 1.0, x]), math.pi])
    return apply("where", [zero, 1.0, apply("div", [apply("sin", [scaled]), scaled])])


@torchsymbol(**_METHOD_AND_TOP)
def isreal(input):
    """True everywhere: graphc's tensors are real (a bool tensor of input's shape).

    >>> import graphc as gc
    >>> gc.isreal(gc.tensor([1.0, float("nan")])).numpy().tolist()
    [True, True]
    """
    return apply("logical_or", [apply("eq", [input, input]), apply("ne", [input, input])])


def _in_place_variants():
    from ..core.inplace import _arithmetic

    for name in ("addcmul", "addcdiv", "lerp", "clamp_min", "clamp_max", "heaviside", "ldexp", "logit",
                 "nan_to_num", "nextafter", "sgn", "sinc", "round"):
        _arithmetic(name, lambda x, *args, _n=name, **kwargs: getattr(x, _n)(*args, **kwargs))
    _arithmetic("float_power", _float_power_in_place)


def _float_power_in_place(x, exponent):
    if x.dtype is not DType.float64:
        raise GraphcError(f"float_power_: the result is float64, which a {x.dtype.name} tensor cannot hold in place "
                          f"(as PyTorch); use x.double().float_power_(...) or float_power")
    return float_power(x, exponent)


_in_place_variants()  # Tensor.addcmul_, Tensor.lerp_, ...: PyTorch's in-place forms
