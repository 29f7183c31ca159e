"""``gc.special``: PyTorch's ``torch.special`` namespace. Special functions are the ``special``
primitive (ir/ops/special.py: scipy.special's kernels, an optional extra,
``pip install 'graphc[special]'``) or composites over it (ndtr, xlog1py, multigammaln);
the names PyTorch also lists here for functions graphc has elsewhere (expit, erf, exp2, expm1,
log1p, logsumexp, softmax, log_softmax, round, xlogy, gammaln, psi, ...) are those functions.
Gradients are PyTorch's (derivatives.yaml); where PyTorch has none (the polynomials, the
Bessel functions j, y, k, airy_ai, zeta in its first argument) differentiating raises.

>>> import graphc as gc
>>> abs(gc.special.ndtr(gc.tensor([1.0])).item() - 0.841345) < 1e-6
True
>>> gc.special.chebyshev_polynomial_t(gc.tensor([0.5]), 2).numpy().tolist()
[-0.5]
"""
from __future__ import annotations

from .ops.functions import log1p, round_ as round, sigmoid as expit  # noqa: A004, F401  (PyTorch's names)
from .ops.functions_math import exp2, expm1, xlogy  # noqa: F401
from .ops.functions_nn import erf, log_softmax, softmax  # noqa: F401
from .ops.functions_special import (digamma, erfc, erfinv, i0, mvlgamma as multigammaln, ndtr,  # noqa: F401
                                    polygamma, xlog1py)
from .ops.functions_special import special as _special
from .ops.functions_special import igamma as gammainc, igammac as gammaincc, lgamma as gammaln  # noqa: F401
from .ops.reductions_more import logsumexp  # noqa: F401
from .ops.surface import TOP_LEVEL

psi = digamma

_FORWARDED = ("logit", "sinc")  # gc.special.x is gc.x, once graphc declares it (issue #34's other families)


def __getattr__(name):
    if name in _FORWARDED and name in TOP_LEVEL:
        return TOP_LEVEL[name]
    raise AttributeError(f"module 'graphc.special' has no attribute {name!r}")


def _unary(fn, doc):
    def function(input):
        return _special(fn, input)
    function.__name__ = function.__qualname__ = fn
    function.__doc__ = doc
    return function


def _polynomial(fn, doc):
    def function(input, n):
        return _special(fn, input, n)
    function.__name__ = function.__qualname__ = fn
    function.__doc__ = doc + " of degree n (non-integer n truncated toward 0; 0 for n < 0), as PyTorch's."
    return function


entr = _unary("entr", "Elementwise entropy term: -x log x for x > 0, 0 at 0, -inf for x < 0.")
erfcx = _unary("erfcx", "Scaled complementary error function exp(x^2) erfc(x).")
ndtri = _unary("ndtri", "Inverse of the standard normal CDF (the probit) on (0, 1).")
log_ndtr = _unary("log_ndtr", "Log of the standard normal CDF, accurate far in the left tail.")
i0e = _unary("i0e", "Exponentially scaled modified Bessel function of order 0, exp(-|x|) I0(x).")
i1 = _unary("i1", "Modified Bessel function of the first kind, order 1.")
i1e = _unary("i1e", "Exponentially scaled modified Bessel function of order 1, exp(-|x|) I1(x).")
modified_bessel_i0 = _unary("i0", "Modified Bessel function of the first kind, order 0 (i0).")
modified_bessel_i1 = _unary("i1", "Modified Bessel function of the first kind, order 1 (i1).")
modified_bessel_i0.__name__ = modified_bessel_i0.__qualname__ = "modified_bessel_i0"
modified_bessel_i1.__name__ = modified_bessel_i1.__qualname__ = "modified_bessel_i1"
modified_bessel_k0 = _unary("modified_bessel_k0", "Modified Bessel function of the second kind, order 0.")
modified_bessel_k1 = _unary("modified_bessel_k1", "Modified Bessel function of the second kind, order 1.")
scaled_modified_bessel_k0 = _unary("scaled_modified_bessel_k0", "exp(x) K0(x).")
scaled_modified_bessel_k1 = _unary("scaled_modified_bessel_k1", "exp(x) K1(x).")
bessel_j0 = _unary("bessel_j0", "Bessel function of the first kind, order 0.")
bessel_j1 = _unary("bessel_j1", "Bessel function of the first kind, order 1.")
bessel_y0 = _unary("bessel_y0", "Bessel function of the second kind, order 0.")
bessel_y1 = _unary("bessel_y1", "Bessel function of the second kind, order 1.")
spherical_bessel_j0 = _unary("spherical_bessel_j0", "Spherical Bessel function of the first kind, order 0, sin(x) / x.")
airy_ai = _unary("airy_ai", "Airy function Ai(x).")
chebyshev_polynomial_t = _polynomial("chebyshev_polynomial_t", "Chebyshev polynomial of the first kind")
chebyshev_polynomial_u = _polynomial("chebyshev_polynomial_u", "Chebyshev polynomial of the second kind")
chebyshev_polynomial_v = _polynomial("chebyshev_polynomial_v", "Chebyshev polynomial of the third kind")
chebyshev_polynomial_w = _polynomial("chebyshev_polynomial_w", "Chebyshev polynomial of the fourth kind")
shifted_chebyshev_polynomial_t = _polynomial("shifted_chebyshev_polynomial_t", "T of 2x - 1")
shifted_chebyshev_polynomial_u = _polynomial("shifted_chebyshev_polynomial_u", "U of 2x - 1")
shifted_chebyshev_polynomial_v = _polynomial("shifted_chebyshev_polynomial_v", "V of 2x - 1")
shifted_chebyshev_polynomial_w = _polynomial("shifted_chebyshev_polynomial_w", "W of 2x - 1")
hermite_polynomial_h = _polynomial("hermite_polynomial_h", "Physicists' Hermite polynomial")
hermite_polynomial_he = _polynomial("hermite_polynomial_he", "Probabilists' Hermite polynomial")
laguerre_polynomial_l = _polynomial("laguerre_polynomial_l", "Laguerre polynomial")
legendre_polynomial_p = _polynomial("legendre_polynomial_p", "Legendre polynomial")


def zeta(input, other):
    """Hurwitz zeta function, sum over k >= 0 of (k + other)^-input (Riemann's at other = 1).

    >>> import graphc as gc
    >>> abs(gc.special.zeta(gc.tensor([2.0]), 1.0).item() - 1.644934) < 1e-6  # pi^2 / 6
    True
    """
    return _special("zeta", input, other)
