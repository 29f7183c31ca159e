"""Special functions of issue #34 (``torch.special`` and friends) as ONE primitive, ``special``,
whose ``fn`` attr names the function by PyTorch's name: entr, the error function's relatives
(erfc, erfinv, erfcx, ndtri, log_ndtr), the gamma family (lgamma, digamma, polygamma of order
``n``, igamma, igammac, zeta), Bessel functions (i0, i0e, i1, i1e, bessel_j0/j1/y0/y1,
modified_bessel_k0/k1 and their scaled forms, spherical_bessel_j0, airy_ai) and the orthogonal
polynomials of PyTorch (chebyshev T/U/V/W, shifted too, hermite H/He, laguerre L, legendre P),
which take ``(x, n)``. One op, not thirty: they share a shape rule (elementwise, ints give
float32), a kernel shape (a scipy.special call, executor/kernels/special.py) and a gradient
rule written in other ``special`` nodes, as PyTorch's derivatives.yaml writes them.
Composites (ndtr, xlog1py, mvlgamma) live in graphc/ops/functions_special.py.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import GraphcError, ShapeError
from ..registry import Attr, OpDef, register
from ..types import DType, TensorType
from ._shapes import broadcast, result_dtype
from ._vjp import scalar

POLYNOMIALS = ("chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
               "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
               "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
               "laguerre_polynomial_l", "legendre_polynomial_p")
UNARY = ("entr", "erfc", "erfinv", "erfcx", "ndtri", "log_ndtr", "lgamma", "digamma", "polygamma", "i0", "i0e", "i1", "i1e",
         "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_k0", "modified_bessel_k1",
         "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "spherical_bessel_j0", "airy_ai")
BINARY = ("igamma", "igammac", "zeta") + POLYNOMIALS


def _infer(in_types, attrs):
    """Elementwise with broadcasting; the promoted dtype, ints and bools giving float32."""
    fn = attrs["fn"]
    if fn not in UNARY and fn not in BINARY:
        raise ShapeError(f"special: unknown function {fn!r}; known: {', '.join(UNARY + BINARY)}")
    want = 1 if fn in UNARY else 2
    if len(in_types) != want:
        raise ShapeError(f"special {fn} takes {want} input{'s' if want > 1 else ''}, got {len(in_types)}")
    if attrs["n"] and fn != "polygamma":
        raise ShapeError(f"special {fn}: the order n={attrs['n']} belongs to polygamma only")
    if fn in ("igamma", "igammac") and not any(t.dtype.is_float for t in in_types):
        raise ShapeError(f"{fn} takes a floating-point tensor (as PyTorch, which has no integer kernel for it), "
                         f"got {' and '.join(t.dtype.name for t in in_types)}; cast first (x.float())")
    out = TensorType(broadcast(*(t.shape for t in in_types)), result_dtype(in_types))
    return [out if out.dtype.is_float else out.with_dtype(DType.float32)]


def _sp(b, fn, *xs, n=0):
    return b.emit1("special", list(xs), {"fn": fn, "n": n})


def _mul(b, *xs):
    out = xs[0]
    for x in xs[1:]:
        out = b.emit1("mul", [out, x])
    return out


def _c(b, value, like):
    return scalar(b, value, like.type.dtype)


def _as_float(b, x, like):
    return x if x.type.dtype == like.type.dtype else b.emit1("cast", [x], {"dtype": like.type.dtype.name})


def _tiny_safe(b, x, grad_of_safe, at_zero):
    """PyTorch's i1/i1e backward: ``grad_of_safe(safe x)`` where |x| > eps, ``at_zero`` below
    (the formula divides by x; its limit there is 0.5)."""
    eps = float(np.finfo(x.type.dtype.numpy).eps)  # PyTorch's numeric_limits<scalar_t>::epsilon()
    big = b.emit1("gt", [b.emit1("abs", [x]), _c(b, eps, x)])
    safe = b.emit1("where", [big, x, _c(b, eps, x)])
    return b.emit1("where", [big, grad_of_safe(safe), _c(b, at_zero, x)])


# d fn / dx as PyTorch's derivatives.yaml: (builder, x, y = fn(x), n) -> derivative
_DERIVATIVE = {
    "entr": lambda b, x, y, n: b.emit1("neg", [b.emit1("add", [b.emit1("log", [x]), _c(b, 1.0, x)])]),
    "erfc": lambda b, x, y, n: _mul(b, b.emit1("exp", [b.emit1("neg", [_mul(b, x, x)])]),
                                    _c(b, -2.0 / math.sqrt(math.pi), x)),
    "erfinv": lambda b, x, y, n: _mul(b, b.emit1("exp", [_mul(b, y, y)]), _c(b, 0.5 * math.sqrt(math.pi), y)),
    "erfcx": lambda b, x, y, n: b.emit1("sub", [_mul(b, x, y, _c(b, 2.0, x)), _c(b, 2.0 / math.sqrt(math.pi), x)]),
    "ndtri": lambda b, x, y, n: _mul(b, b.emit1("exp", [_mul(b, y, y, _c(b, 0.5, y))]),
                                     _c(b, math.sqrt(2.0 * math.pi), y)),
    "log_ndtr": lambda b, x, y, n: _mul(b, b.emit1("exp", [b.emit1("neg", [b.emit1("add", [y, _mul(b, x, x, _c(b, 0.5, x))])])]),
                                        _c(b, 1.0 / math.sqrt(2.0 * math.pi), x)),
    "lgamma": lambda b, x, y, n: _sp(b, "digamma", x),
    "digamma": lambda b, x, y, n: _sp(b, "polygamma", x, n=1),
    "polygamma": lambda b, x, y, n: _sp(b, "polygamma", x, n=n + 1),
    "i0": lambda b, x, y, n: _sp(b, "i1", x),
    "i0e": lambda b, x, y, n: b.emit1("sub", [_sp(b, "i1e", x), _mul(b, b.emit1("sign", [x]), y)]),
    "i1": lambda b, x, y, n: _tiny_safe(b, x, lambda s: b.emit1("sub", [_sp(b, "i0", s), b.emit1("div", [y, s])]), 0.5),
    "i1e": lambda b, x, y, n: _tiny_safe(b, x, lambda s: b.emit1("sub", [
        _sp(b, "i0e", s), _mul(b, y, b.emit1("add", [b.emit1("sign", [s]), b.emit1("reciprocal", [s])]))]), 0.5),
}


def _vjp_unary(b, node, cts, needs):
    fn, n = node.attrs["fn"], node.attrs["n"]
    if fn not in _DERIVATIVE:
        raise GraphcError(f"torch.special.{fn} has no gradient in PyTorch (derivatives.yaml: not implemented), "
                          "nor in graphc; detach its input")
    return [_mul(b, cts[0], _DERIVATIVE[fn](b, node.inputs[0], node.outputs[0], n))]


def _vjp_incomplete_gamma(b, node, cts, needs):
    """d/dx igamma(a, x) = exp((a - 1) log x - x - lgamma a), igammac's its negative; PyTorch has
    no gradient for a (not implemented there either)."""
    fn, (a, x), g = node.attrs["fn"], node.inputs, cts[0]
    if needs[0]:
        raise GraphcError(f"torch.{fn}: the gradient for the first argument (a) is not implemented in PyTorch, "
                          "nor in graphc; detach it")
    a = _as_float(b, a, x)
    log_density = b.emit1("sub", [b.emit1("sub", [_mul(b, b.emit1("sub", [a, _c(b, 1.0, a)]), b.emit1("log", [x])), x]),
                                  _sp(b, "lgamma", a)])
    gx = _mul(b, g, b.emit1("exp", [log_density]))
    return [None, b.emit1("neg", [gx]) if fn == "igammac" else gx]


def _vjp_zeta(b, node, cts, needs):
    """d/dq zeta(x, q) = -x zeta(x + 1, q); PyTorch has no gradient for x (nor has graphc)."""
    x, q = node.inputs
    if needs[0]:
        raise GraphcError("torch.special.zeta: the gradient for x (the exponent) is not implemented in PyTorch, "
                          "nor in graphc; detach it")
    x = _as_float(b, x, q)
    shifted = _sp(b, "zeta", b.emit1("add", [x, _c(b, 1.0, x)]), q)
    return [None, b.emit1("neg", [_mul(b, cts[0], x, shifted)])]


def _vjp(b, node, cts, needs):
    fn = node.attrs["fn"]
    if fn in ("igamma", "igammac"):
        return _vjp_incomplete_gamma(b, node, cts, needs)
    if fn == "zeta":
        return _vjp_zeta(b, node, cts, needs)
    if fn in POLYNOMIALS:
        raise GraphcError(f"torch.special.{fn} has no gradient in PyTorch (x: not implemented, n: not "
                          "differentiable), nor in graphc; detach its inputs")
    return _vjp_unary(b, node, cts, needs)


register(OpDef("special", _infer, inputs=(1, 2), vjp=_vjp, promotes_inputs=True,
               attrs={"fn": Attr("str"), "n": Attr("int", default=0, minimum=0)},
               doc="a special function of torch.special named by fn (polygamma of order n), elementwise; "
                   "ints give float32"))
