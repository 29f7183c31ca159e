"""PyTorch's orthogonal polynomials (aten/src/ATen/native/Math.h), elementwise over arrays of x
and integer degrees n: the same three-term recurrences, the same closed forms at the
interval's ends and the same trigonometric forms inside it for large n, evaluated in x's dtype
as PyTorch does (so a float32 recurrence that overflows gives PyTorch's inf or NaN).

>>> import numpy as np
>>> polynomial(np, "chebyshev_polynomial_t")(np.array([0.5, 2.0]), np.array([2, 3])).tolist()
[-0.5, 26.0]
"""
from __future__ import annotations

import numpy as np


def _chebyshev(first):
    """T, U, V, W: P_m = 2x P_{m-1} - P_{m-2}, with P_1 = first(x)."""
    return first, lambda x, m, p, q: (x + x) * q - p


_RECURRENCES = {  # fn -> (P_1(x), P_m(x, m, P_{m-2}, P_{m-1}))
    "chebyshev_polynomial_t": _chebyshev(lambda x: x),
    "chebyshev_polynomial_u": _chebyshev(lambda x: x + x),
    "chebyshev_polynomial_v": _chebyshev(lambda x: x + x - 1),
    "chebyshev_polynomial_w": _chebyshev(lambda x: x + x + 1),
    "hermite_polynomial_h": (lambda x: x + x, lambda x, m, p, q: (x + x) * q - (2 * (m - 1)) * p),
    "hermite_polynomial_he": (lambda x: x, lambda x, m, p, q: x * q - (m - 1) * p),
    "laguerre_polynomial_l": (lambda x: 1 - x, lambda x, m, p, q: ((2 * (m - 1) + (1 - x)) * q - (m - 1) * p) / m),
    "legendre_polynomial_p": (lambda x: x, lambda x, m, p, q: ((2 * m - 1) * x * q - (m - 1) * p) / m),
}


def _recurrence(xp, fn, x, n, needed=None):
    """P_n(x) by the recurrence, stepping up to the largest n among the ``needed`` elements (the
    others take a closed form); once every element still stepping is NaN (float overflow gives
    inf, then inf - inf), the remaining steps would change nothing and are skipped."""
    first, step = _RECURRENCES[fn]
    one = xp.ones_like(x)
    q = first(x).astype(x.dtype, copy=False)
    out = xp.where(n == 1, q, one)
    p = one
    active = n if needed is None else xp.where(needed, n, 0)
    top = int(active.max()) if n.size else 0
    for m in range(2, top + 1):
        p, q = q, step(x, m, p, q).astype(x.dtype, copy=False)
        out = xp.where(n == m, q, out)
        if m % 64 == 0 and bool(xp.all((xp.isnan(p) & xp.isnan(q)) | (active <= m))):
            return xp.where(active > m, xp.nan, out).astype(x.dtype, copy=False)
    return out


def _parity(xp, n, even, odd):
    return xp.where(n % 2 == 0, even, odd)


def _chebyshev_ends(xp, fn, n, y):
    """PyTorch's closed forms at y = +-1, the ends of the interval."""
    one, twice = xp.ones_like(y), (n + n + 1).astype(y.dtype)
    kind = fn[-1]
    upper = {"t": one, "u": (n + 1).astype(y.dtype), "v": one, "w": twice}[kind]
    lower = {"t": _parity(xp, n, one, -one), "u": _parity(xp, n, n + 1.0, -(n + 1.0)).astype(y.dtype),
             "v": _parity(xp, n, twice, -twice), "w": _parity(xp, n, one, -one)}[kind]
    return xp.where(y == 1, upper, xp.where(y == -1, lower, xp.nan))


def _chebyshev_inside(xp, fn, y, n):
    """The trigonometric forms PyTorch uses for large n inside the interval (with its fallbacks
    where the denominator rounds to 0 or the half-angle to a right angle)."""
    theta = xp.arccos(y)
    nf = n.astype(y.dtype)
    kind, one = fn[-1], xp.ones_like(y)
    if kind == "t":
        return xp.cos(nf * theta)
    if kind == "u":
        s = xp.sin(theta)
        return xp.where(s != 0, xp.sin((nf + 1) * theta) / s, (nf + 1) * xp.cos((nf + 1) * theta) / y)
    twice = nf + nf + 1
    if kind == "v":
        return xp.where(xp.sin(theta / 2) != 1, xp.cos((nf + 0.5) * theta) / xp.cos(theta / 2),
                        _parity(xp, n, twice, -twice))
    fallback = _parity(xp, n, one, -one)
    if not fn.startswith("shifted_"):  # PyTorch's unshifted W looks at the sign of x there
        fallback = xp.where(y > 0, twice, fallback)
    return xp.where(xp.cos(theta / 2) != 1, xp.sin((nf + 0.5) * theta) / xp.sin(theta / 2), fallback)


_TRIG_FROM = {"chebyshev_polynomial_t": 6, "chebyshev_polynomial_u": 8, "chebyshev_polynomial_v": 8,
              "chebyshev_polynomial_w": 8, "shifted_chebyshev_polynomial_t": 6, "shifted_chebyshev_polynomial_u": 6,
              "shifted_chebyshev_polynomial_v": 6, "shifted_chebyshev_polynomial_w": 4}


def _chebyshev_family(xp, fn, x, n):
    """T, U, V, W of y = x, or of y = 2x - 1 for the shifted ones (PyTorch's x == 1 and x == 0
    tests are y == 1 and y == -1)."""
    shifted = fn.startswith("shifted_")
    y = (x + x - 1).astype(x.dtype, copy=False) if shifted else x
    inside, ends = (n > _TRIG_FROM[fn]) & (xp.abs(y) < 1), xp.abs(y) == 1
    out = _recurrence(xp, fn[len("shifted_"):] if shifted else fn, y, n, ~(inside | ends))
    out = xp.where(inside, _chebyshev_inside(xp, fn, y, n), out)
    return xp.where(ends, _chebyshev_ends(xp, fn, n, y), out)


def polynomial(xp, fn):
    """``run(x, n)`` for the polynomial ``fn``: x float, n int64 (already truncated), broadcast."""
    def run(x, n):
        x, n = xp.broadcast_arrays(x, n)
        with np.errstate(all="ignore"):
            if "chebyshev" in fn:
                out = _chebyshev_family(xp, fn, x, n)
            else:
                out = _recurrence(xp, fn, x, n, x != 0 if "laguerre" in fn else
                                  xp.abs(x) != 1 if "legendre" in fn else None)
                if fn == "laguerre_polynomial_l":
                    out = xp.where(x == 0, xp.ones_like(x), out)
                elif fn == "legendre_polynomial_p":
                    out = xp.where(xp.abs(x) == 1, _parity(xp, n, xp.ones_like(x), -xp.ones_like(x)), out)
                    out = xp.where(x == 1, xp.ones_like(x), out)
        return xp.where(n < 0, xp.zeros_like(x), out).astype(x.dtype, copy=False)
    return run
