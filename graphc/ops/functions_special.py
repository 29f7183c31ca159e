"""The special functions PyTorch has at the top and as ``Tensor`` methods (erfc, erfinv, lgamma,
digamma, polygamma, mvlgamma, i0, igamma, igammac and their in-place ``x_``), over the
``special`` primitive (ir/ops/special.py; scipy is its optional extra), and the composites
shared with ``gc.special`` (graphc/special.py): ndtr, xlog1py, mvlgamma.
"""
from __future__ import annotations

import math

import numpy as np

from ..core.dispatch import apply
from ..core.inplace import _arithmetic
from ..core.tensor import Tensor
from ..ir.errors import GraphcError, ShapeError
from ..ir.types import DType
from .surface import torchsymbol


def special(fn: str, *inputs, n: int = 0):
    """The ``special`` primitive: ``fn`` by PyTorch's name on tensors or Python numbers.

    >>> import graphc as gc
    >>> round(special("erfc", gc.tensor([1.0])).item(), 6)
    0.157299
    """
    return apply("special", list(inputs), {"fn": fn, "n": n})


def as_float(input):
    """Ints and bools as float32 (PyTorch's float math on them), floats unchanged."""
    if not isinstance(input, Tensor):
        return Tensor(np.asarray(input, np.float32))
    return input if input.dtype.is_float else input.cast(DType.float32)


def _declare(name, doc, binary=False):
    def unary(input):
        return special(name, input)

    def two(input, other):
        return special(name, input, other)
    fn = two if binary else unary
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return torchsymbol(functional=False)(fn)


erfc = _declare("erfc", "Elementwise complementary error function 1 - erf(x), accurate where erf is near 1.")
erfinv = _declare("erfinv", "Elementwise inverse error function on (-1, 1) (+-inf at +-1).")
lgamma = _declare("lgamma", "Elementwise log |Gamma(x)| (inf at 0 and the negative integers).")
digamma = _declare("digamma", "Elementwise digamma, Gamma'(x) / Gamma(x) (-inf at 0, NaN at negative integers).")
i0 = _declare("i0", "Elementwise modified Bessel function of the first kind, order 0.")
igamma = _declare("igamma", "Regularized lower incomplete gamma function P(input, other).", binary=True)
igammac = _declare("igammac", "Regularized upper incomplete gamma function Q(input, other) = 1 - P.", binary=True)


def _order(n):
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise GraphcError(f"polygamma: the order n must be a non-negative int (as PyTorch), got {n!r}")
    return int(n)


@torchsymbol(method=False, functional=False)
def polygamma(n, input):
    """The n-th derivative of digamma (``torch.polygamma(n, input)``; n = 0 is digamma).

    >>> import graphc as gc
    >>> round(gc.polygamma(1, gc.tensor([1.0])).item(), 5)  # pi^2 / 6
    1.64493
    """
    return special("polygamma", input, n=_order(n))


def _polygamma_method(input, n):
    """``Tensor.polygamma(n)``: the n-th derivative of digamma at the tensor's values."""
    return special("polygamma", input, n=_order(n))


_polygamma_method.__name__ = _polygamma_method.__qualname__ = "polygamma"
torchsymbol(top=False, functional=False)(_polygamma_method)


@torchsymbol(functional=False)
def mvlgamma(input, p):
    """Multivariate log-gamma of dimension p: ``sum_j lgamma(x - j / 2) + p (p - 1) / 4 log(pi)``
    over j < p (a composite over lgamma, so its gradient is digamma's sum). Eagerly, values not
    above (p - 1) / 2 are refused, as PyTorch does; a compiled plan gives NaN or inf there.

    >>> import graphc as gc
    >>> round(gc.mvlgamma(gc.tensor([2.5]), 2).item(), 5)
    0.85705
    """
    if isinstance(p, bool) or not isinstance(p, (int, np.integer)) or p < 1:
        raise GraphcError(f"mvlgamma: p must be an int >= 1 (as PyTorch), got {p!r}")
    if input._tracer is None and input.numel() and not bool((input.numpy() > (p - 1) / 2).all()):
        raise GraphcError(f"mvlgamma: all elements must be greater than (p-1)/2 = {(p - 1) / 2} (as PyTorch)")
    x = as_float(input)
    total = lgamma(x)
    for j in range(1, int(p)):
        total = total + lgamma(x - 0.5 * j)
    return total + p * (p - 1) / 4 * math.log(math.pi)


def ndtr(input):
    """The standard normal CDF, ``erfc(-x / sqrt 2) / 2`` (accurate in both tails).

    >>> import graphc as gc
    >>> round(ndtr(gc.tensor([0.0])).item(), 6)
    0.5
    """
    return 0.5 * erfc(as_float(input) * (-1.0 / math.sqrt(2.0)))


def _scalar_like(value, like):
    if isinstance(value, Tensor):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
        raise ShapeError(f"expected a tensor or a number, got {type(value).__name__}")
    dtype = like.dtype if like.dtype.is_float else DType.float32
    return Tensor(np.asarray(value, dtype.numpy))


def xlog1py(input, other):
    """``input * log1p(other)``, 0 where input is 0 unless other is NaN (ints give float32). A
    composite, ``input * L`` with L = log1p(other) but 0 where input is 0 and other <= -1 (or
    +inf), so that the gradients are PyTorch's: L for input (derivatives.yaml's masked log1p),
    input / (1 + other) for other.

    >>> import graphc as gc
    >>> xlog1py(gc.tensor([0.0, 2.0]), gc.tensor([-1.0, 0.0])).numpy().tolist()
    [0.0, 0.0]
    """
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        raise ShapeError("xlog1py: at least one of input and other must be a tensor")
    input = _scalar_like(input, other) if not isinstance(input, Tensor) else input
    other = _scalar_like(other, input) if not isinstance(other, Tensor) else other
    other = as_float(other)
    off_domain = apply("logical_or", [apply("le", [other, -1.0]), apply("eq", [other, math.inf])])
    masked = apply("logical_and", [apply("eq", [input, 0]), off_domain])
    return apply("mul", [input, apply("where", [masked, 0.0, apply("log1p", [other])])])


for _name in ("erfc", "erfinv", "lgamma", "digamma", "i0"):
    _arithmetic(_name, lambda x, _n=_name: getattr(x, _n)())
for _name in ("igamma", "igammac", "mvlgamma", "polygamma"):
    _arithmetic(_name, lambda x, arg, _n=_name: getattr(x, _n)(arg))
