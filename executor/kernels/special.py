"""Kernel of the ``special`` op (ir/ops/special.py). The special functions are scipy.special's
(cupyx.scipy.special's on cupy: ``xp`` tells which), evaluated in float64 and rounded to the
output dtype; scipy is an optional extra (``pip install graphc[special]``), imported when a
kernel is built, so graphc imports without it. The orthogonal polynomials and
spherical_bessel_j0 and trigamma follow PyTorch's own algorithms instead (its recurrences and special cases
for n < 0, |x| = 1, non-integer n truncated toward 0), in the output dtype as PyTorch computes
them, so that overflow gives the same inf or NaN.
"""
from __future__ import annotations

import math

import numpy as np

from ...ir.errors import GraphcError
from ...ir.ops.special import POLYNOMIALS
from .base import writes_out

# PyTorch's name -> scipy.special's (a callable of the float64 arrays for the odd ones)
_SCIPY = {
    "entr": "entr", "erfc": "erfc", "erfinv": "erfinv", "erfcx": "erfcx", "ndtri": "ndtri", "log_ndtr": "log_ndtr",
    "lgamma": "gammaln", "digamma": "psi", "i0": "i0", "i0e": "i0e", "i1": "i1", "i1e": "i1e",
    "bessel_j0": "j0", "bessel_j1": "j1", "bessel_y0": "y0", "bessel_y1": "y1",
    "modified_bessel_k0": "k0", "modified_bessel_k1": "k1", "scaled_modified_bessel_k0": "k0e",
    "scaled_modified_bessel_k1": "k1e", "igamma": "gammainc", "igammac": "gammaincc", "zeta": "zeta",
}


def _library(xp, fn):
    """scipy.special (cupyx.scipy.special on the GPU), or a GraphcError naming the extra."""
    try:
        if xp.__name__ == "numpy":
            import scipy.special as library
        else:
            import cupyx.scipy.special as library
    except ImportError:
        raise GraphcError(f"special function {fn} needs scipy (an optional extra of graphc): "
                          "pip install 'graphc[special]'") from None
    return library


def _function(xp, fn, n):
    """The float64 function of the arrays for ``fn``."""
    library = _library(xp, fn)
    if fn == "polygamma" and n == 0:
        return library.psi
    if fn == "polygamma":  # PyTorch's formula, so that its poles and infinities are PyTorch's
        sign = 1.0 if n % 2 else -1.0
        return lambda x: sign * math.exp(math.lgamma(n + 1.0)) * _zeta(xp, library, n + 1.0, x)
    if fn == "zeta":
        return lambda x, q: _zeta(xp, library, x, q)
    name = "airy" if fn == "airy_ai" else _SCIPY[fn]
    if not hasattr(library, name):
        raise GraphcError(f"special function {fn}: {library.__name__} has no {name} on this backend")
    if fn == "airy_ai":
        return lambda x: library.airy(x)[0]
    return getattr(library, name)


def _spherical_bessel_j0(xp, x):
    """PyTorch's: 0 at +-inf, its Taylor series for |x| < 0.5, sin(x) / x beyond."""
    x2 = x * x
    series = 1.0 + x2 * (-1.0 / 6.0 + x2 * (1.0 / 120.0 + x2 * (-1.0 / 5040.0 + x2 * (
        1.0 / 362880.0 + x2 * (-1.0 / 39916800.0 + x2 * (1.0 / 6227020800.0))))))
    with np.errstate(all="ignore"):
        far = xp.sin(x) / x
    out = xp.where(xp.abs(x) < 0.5, series, far)
    return xp.where(xp.isinf(x), xp.zeros_like(x), out).astype(x.dtype)


def _zeta(xp, library, x, q):
    """Hurwitz zeta; NaN at q = +inf for x > 1, as PyTorch's series gives (scipy says 0)."""
    return xp.where((q == math.inf) & (x > 1), math.nan, library.zeta(x, q))


def _trigamma(xp, x):
    """PyTorch's trigamma (polygamma of order 1), in x's dtype as PyTorch computes it: the
    reflection pi^2 / sin^2(pi x) below 1/2, six recurrence steps, then the asymptotic series."""
    pi = x.dtype.type(math.pi)
    small = x < 0.5
    sin_pi_x = xp.sin(pi * x)
    result = xp.where(small, -(pi * pi) / (sin_pi_x * sin_pi_x), 0).astype(x.dtype)
    x = xp.where(small, 1 - x, x).astype(x.dtype)
    for _ in range(6):
        result = result + 1 / (x * x)
        x = x + 1
    ixx = 1 / (x * x)
    result = result + (1 + 1 / (2 * x) + ixx * (1 / 6 - ixx * (1 / 30 - ixx * (1 / 42)))) / x
    return xp.where(small, -result, result)


def _degree(xp, n):
    """PyTorch's static_cast<int64_t>(n): toward zero; NaN and inf (undefined in C++, INT64_MIN
    on x86) count as negative, whose polynomials are 0."""
    if n.dtype.kind == "f":
        finite = xp.isfinite(n)
        return xp.where(finite, xp.trunc(xp.where(finite, n, -1.0)), -1.0).astype(np.int64)
    return n.astype(np.int64)


def make(xp, spec):
    fn, n = spec.attrs["fn"], spec.attrs["n"]
    out_dtype = spec.out_types[0].dtype.numpy
    if fn in POLYNOMIALS:
        from ._special_polynomials import polynomial
        compute = np.dtype(np.float32) if out_dtype == np.float16 else out_dtype  # PyTorch computes in the dtype
        run = polynomial(xp, fn)

        def poly(x, degree, out=None):
            result = run(x.astype(compute, copy=False), _degree(xp, degree)).astype(out_dtype, copy=False)
            return _finish(xp, result, out)
        return writes_out(poly)
    if fn == "polygamma" and n == 1:
        compute = np.dtype(np.float32) if out_dtype == np.float16 else out_dtype
        return writes_out(lambda x, out=None: _finish(xp, _errstate(_trigamma, xp, x.astype(compute, copy=False))
                                                      .astype(out_dtype, copy=False), out))
    if fn == "spherical_bessel_j0":
        return writes_out(lambda x, out=None: _finish(xp, _spherical_bessel_j0(xp, x).astype(out_dtype, copy=False), out))
    function = _function(xp, fn, n)

    def run(*arrays, out=None):
        with np.errstate(all="ignore"):
            result = function(*(a.astype(np.float64, copy=False) for a in arrays))
        return _finish(xp, xp.asarray(result).astype(out_dtype, copy=False), out)
    return writes_out(run)


def _errstate(function, *args):
    with np.errstate(all="ignore"):
        return function(*args)


def _finish(xp, result, out):
    if out is None:
        return result
    xp.copyto(out, result)
    return out


KERNELS = {"special": make}
