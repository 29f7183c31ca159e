"""Op table entry of the ``special`` op (ir/ops/special.py): one sample or more per function,
inputs from this module's own seeded generator. References are scipy.special in float64
(imported when a reference runs: the samples skip without scipy) and, for the orthogonal
polynomials, scipy's eval_* (V and W of the third and fourth kinds as U_n -+ U_{n-1}); the
PyTorch counterpart is ``torch.special.<fn>`` (``torch.<fn>`` for the names PyTorch keeps
at the top). Bessel y, j and airy_ai are sampled in float32 only: PyTorch's float64 values of
these differ from scipy's by up to 3e-6 relative, above the table's float64 tolerance.
"""
from __future__ import annotations

import numpy as np

from op_table import F32, F64, I64, OpInfo, S, T, fortran, promote, strided

_RNG = np.random.default_rng(3434)


def _between(lo, hi, shape, dt):
    return _RNG.uniform(lo, hi, shape).astype(dt)


def _scipy():
    import pytest

    return pytest.importorskip("scipy.special")


def _eval(fn, n, args):
    sp = _scipy()
    if fn == "polygamma":
        return sp.polygamma(n, *args)
    if "polynomial" in fn:
        return _polynomial(sp, fn, *args)
    name = {"lgamma": "gammaln", "digamma": "psi", "igamma": "gammainc", "igammac": "gammaincc",
            "bessel_j0": "j0", "bessel_j1": "j1", "bessel_y0": "y0", "bessel_y1": "y1",
            "modified_bessel_k0": "k0", "modified_bessel_k1": "k1", "scaled_modified_bessel_k0": "k0e",
            "scaled_modified_bessel_k1": "k1e"}.get(fn, fn)
    if fn == "airy_ai":
        return sp.airy(*args)[0]
    if fn == "spherical_bessel_j0":
        return sp.spherical_jn(0, *args)
    return getattr(sp, name)(*args)


def _u(sp, n, x):
    return np.where(n >= 0, sp.eval_chebyu(np.maximum(n, 0), x), 0.0)


_POLYNOMIAL_REFS = {  # fn -> value of (scipy.special, n >= 0 ints, x)
    "chebyshev_polynomial_t": lambda sp, n, x: sp.eval_chebyt(n, x),
    "chebyshev_polynomial_u": lambda sp, n, x: sp.eval_chebyu(n, x),
    "chebyshev_polynomial_v": lambda sp, n, x: _u(sp, n, x) - _u(sp, n - 1, x),
    "chebyshev_polynomial_w": lambda sp, n, x: _u(sp, n, x) + _u(sp, n - 1, x),
    "hermite_polynomial_h": lambda sp, n, x: sp.eval_hermite(n, x),
    "hermite_polynomial_he": lambda sp, n, x: sp.eval_hermitenorm(n, x),
    "laguerre_polynomial_l": lambda sp, n, x: sp.eval_laguerre(n, x),
    "legendre_polynomial_p": lambda sp, n, x: sp.eval_legendre(n, x),
}


def _polynomial(sp, fn, x, n):
    x, n = np.broadcast_arrays(x, np.trunc(n).astype(np.int64))
    base = fn.replace("shifted_", "")
    y = 2 * x - 1 if fn.startswith("shifted_") else x
    return np.where(n < 0, 0.0, _POLYNOMIAL_REFS[base](sp, np.maximum(n, 0), y))


def _ref(ins, attrs):
    dt = promote(*ins)
    dt = dt if dt.kind == "f" else F32
    return [np.asarray(_eval(attrs["fn"], attrs.get("n", 0), [a.astype(F64) for a in ins])).astype(dt)]


def _s(fn, inputs, desc, n=0, **kw):
    return S(inputs, _ref, f"{fn}{n if fn == 'polygamma' else ''}-{desc}", {"fn": fn, "n": n}, **kw)


def _torch(ts, a):
    torch, fn = T(), a["fn"]
    if fn == "polygamma":
        return torch.polygamma(a["n"], ts[0])
    return getattr(torch, fn)(*ts) if fn in ("erfc", "erfinv", "lgamma", "digamma", "i0", "igamma", "igammac") \
        else getattr(torch.special, fn)(*ts)


def _unary_samples():
    b = _between
    return [
        _s("erfc", [b(-3, 3, (3, 4), F32)], "f32"),  # first: tests/op_table_dtypes.py's variants start here
        _s("erfinv", [b(-0.9, 0.9, (2, 3), F64)], "f64"),
        _s("entr", [b(0.05, 3, (3, 2), F64)], "f64"),
        _s("erfcx", [fortran(b(-2, 3, (4, 3), F32))], "noncontig"),
        _s("ndtri", [b(0.05, 0.95, (3, 2), F32)], "f32"),
        _s("log_ndtr", [b(-6, 4, (2, 3), F64)], "f64"),
        _s("lgamma", [b(0.2, 6, (2, 3), F64)], "f64"),
        _s("lgamma", [b(-2.9, -2.1, (3,), F32)], "negative"),
        _s("digamma", [strided(b(0.2, 5, (2, 5), F64))], "strided-f64"),
        _s("polygamma", [b(0.3, 5, (3, 3), F32)], "f32", n=1),
        _s("polygamma", [b(-1.8, -1.2, (2, 2), F64)], "negative-f64", n=1),
        _s("polygamma", [b(0.3, 5, (2, 3), F64)], "f64", n=3),
        _s("i0", [b(-4, 4, (), F32)], "scalar"),
        _s("i0e", [b(-4, 4, (2, 4), F64)], "f64"),
        _s("i1", [b(-4, 4, (3, 2), F32)], "f32"),
        _s("i1e", [b(-4, 4, (4,), F64)], "f64"),
        _s("bessel_j0", [b(-8, 8, (2, 3), F32)], "f32", grad=False),
        _s("bessel_j1", [b(-8, 8, (2, 3), F32)], "f32", grad=False),
        _s("bessel_y0", [b(0.2, 8, (2, 3), F32)], "f32", grad=False),
        _s("bessel_y1", [fortran(b(0.2, 8, (3, 2), F32))], "noncontig", grad=False),
        _s("modified_bessel_k0", [b(0.2, 5, (2, 3), F64)], "f64", grad=False),
        _s("modified_bessel_k1", [b(0.2, 5, (2, 3), F32)], "f32", grad=False),
        _s("scaled_modified_bessel_k0", [b(0.2, 5, (3,), F64)], "f64", grad=False),
        _s("scaled_modified_bessel_k1", [b(0.2, 5, (3,), F32)], "f32", grad=False),
        _s("spherical_bessel_j0", [b(-6, 6, (2, 4), F64)], "f64", grad=False),
        _s("airy_ai", [b(-4, 3, (2, 3), F32)], "f32", grad=False),
    ]


def _binary_samples():
    b, ints = _between, lambda lo, hi, shape: _RNG.integers(lo, hi, shape, dtype=np.int64)
    samples = [
        _s("igamma", [ints(1, 5, (2, 3)), b(0.1, 5, (2, 3), F64)], "int-a-f64"),  # PyTorch: no gradient for a
        _s("igamma", [b(0.5, 4, (2, 1), F32), b(0.1, 5, (3,), F32)], "broadcast", grad=False),
        _s("igammac", [ints(1, 5, (2, 3)), fortran(b(0.1, 5, (2, 3), F32))], "int-a-noncontig"),
        _s("zeta", [ints(2, 6, (2, 3)), b(0.5, 4, (2, 3), F64)], "int-x-f64"),  # no gradient for x either
        _s("zeta", [b(1.5, 5, (3, 1), F32), b(0.5, 4, (2,), F32)], "broadcast", grad=False),
    ]
    for fn in _POLYNOMIAL_REFS:
        for shifted in (("", "shifted_") if fn.startswith("chebyshev") else ("",)):
            name = shifted + fn
            lo, hi = (0.0, 3.0) if "laguerre" in fn else (-0.1, 1.1) if shifted else (-1.2, 1.2)
            samples.append(_s(name, [b(lo, hi, (3, 4), F32), ints(-1, 13, (3, 4))], "f32", grad=False))
            samples.append(_s(name, [b(lo, hi, (2, 3), F64), ints(0, 6, (3,))], "f64", grad=False))
    return samples


def special_table():
    return [OpInfo("special", _unary_samples() + _binary_samples(), _torch)]
