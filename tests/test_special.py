"""``gc.special`` and the special functions at the top (lgamma, erfinv, polygamma, ...) against
PyTorch: values in float64 and float32 over their domains and edges (0, poles, +-inf, NaN),
gradients in float64 against torch.autograd, compiled plans against eager, integer inputs
giving float32, and the refusals (no gradient where PyTorch has none, bad orders, scipy
missing). The kernels need scipy (the ``special`` extra)."""
from __future__ import annotations

import math
import sys

import numpy as np
import pytest

import graphc as gc
from graphc.ops.functions_special import special

pytest.importorskip("scipy")
torch = pytest.importorskip("torch")

_RNG = np.random.default_rng(77)
EDGES = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 1e-8, 30.0, math.inf, -math.inf, math.nan]
VALUES = np.concatenate([_RNG.uniform(-6, 6, 60), _RNG.uniform(-1, 1, 20), EDGES])
TOL = {np.float64: (1e-10, 1e-12), np.float32: (2e-5, 1e-6)}  # rtol, atol scaled by max(1, |want|)
# PyTorch's float64 airy_ai and Bessel j, y are less accurate than scipy's (airy_ai(-2.3): mpmath
# 0.026706333057357, scipy 0.026706333057357055, PyTorch 0.02670717628978034): compared as float32
LOOSER_F64 = {"airy_ai": (1e-4, 1e-6), "bessel_y0": (1e-4, 1e-6), "bessel_y1": (1e-4, 1e-6),
              "bessel_j0": (1e-4, 1e-6), "bessel_j1": (1e-4, 1e-6)}

UNARY = ["erfc", "erfinv", "erfcx", "ndtri", "log_ndtr", "ndtr", "entr", "i0", "i0e", "i1", "i1e", "bessel_j0",
         "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0", "modified_bessel_i1", "modified_bessel_k0",
         "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "spherical_bessel_j0",
         "airy_ai", "digamma", "psi", "gammaln", "expit", "exp2", "expm1", "log1p", "erf"]
POLYNOMIALS = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
               "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
               "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w", "hermite_polynomial_h",
               "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p"]


def assert_matches(got, want, dtype, tol=None):
    got, want = np.asarray(got), want.detach().numpy()
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
    r, a = tol or TOL[dtype]
    g, w = got.astype(np.float64), want.astype(np.float64)
    with np.errstate(invalid="ignore"):  # inf - inf
        same = (np.isnan(g) & np.isnan(w)) | (g == w) | (np.abs(g - w) <= a * np.maximum(1, np.abs(w)) + r * np.abs(w))
    assert same.all(), list(zip(g[~same][:5], w[~same][:5]))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", UNARY)
def test_unary_values_match_torch(name, dtype):
    x = VALUES.astype(dtype)
    got = getattr(gc.special, name)(gc.tensor(x)).numpy()
    assert_matches(got, getattr(torch.special, name)(torch.from_numpy(x)), dtype,
                   LOOSER_F64.get(name) if dtype is np.float64 else None)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", ["lgamma", "digamma", "erfc", "erfinv", "i0"])
def test_top_level_values_match_torch(name, dtype):
    x = VALUES.astype(dtype)
    assert_matches(getattr(gc, name)(gc.tensor(x)).numpy(), getattr(torch, name)(torch.from_numpy(x)), dtype)
    assert_matches(getattr(gc.tensor(x), name)().numpy(), getattr(torch, name)(torch.from_numpy(x)), dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n", [0, 1, 2, 3, 5])
def test_polygamma_matches_torch_at_poles_and_infinities(n, dtype):
    x = VALUES.astype(dtype)
    assert_matches(gc.polygamma(n, gc.tensor(x)).numpy(), torch.polygamma(n, torch.from_numpy(x)), dtype)
    assert_matches(gc.special.polygamma(n, gc.tensor(x)).numpy(), torch.special.polygamma(n, torch.from_numpy(x)),
                   dtype)
    assert_matches(gc.tensor(x).polygamma(n).numpy(), torch.from_numpy(x).polygamma(n), dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", ["zeta", "xlog1py", "xlogy", "gammainc", "gammaincc"])
def test_binary_values_match_torch(name, dtype):
    a, b = _RNG.choice(VALUES, 300).astype(dtype), _RNG.choice(VALUES, 300).astype(dtype)
    got = getattr(gc.special, name)(gc.tensor(a), gc.tensor(b)).numpy()
    assert_matches(got, getattr(torch.special, name)(torch.from_numpy(a), torch.from_numpy(b)), dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomials_match_torch(name, dtype):
    """Degrees -2..14 (the trigonometric forms from 5, 7 or 9 on), halves truncated toward 0,
    x inside and outside the interval and at its ends."""
    x = _RNG.choice(np.concatenate([_RNG.uniform(-1.5, 1.5, 40), [-1.0, 0.0, 0.5, 1.0]]), 400).astype(dtype)
    n = _RNG.choice(np.concatenate([np.arange(-2, 15), [2.5, -0.5, 7.9]]), 400).astype(dtype)
    got = getattr(gc.special, name)(gc.tensor(x), gc.tensor(n)).numpy()
    want = getattr(torch.special, name)(torch.from_numpy(x), torch.from_numpy(n))
    if dtype is np.float64:
        assert_matches(got, want, dtype)
        return
    # float32: a degree-14 recurrence near one of its roots loses digits in any float32 evaluation
    # (U_13(-0.9001417): float64 -0.0611430, PyTorch float32 -0.0611454, graphc -0.0611367), so a
    # value is right when it is near PyTorch's float32 or within float32 evaluation's own error
    # bound of the float64 truth (the larger of 4x PyTorch float32's error and the polynomial's bound)
    assert got.dtype == np.float32 and got.shape == x.shape
    g, w = got.astype(np.float64), want.numpy().astype(np.float64)
    truth = getattr(torch.special, name)(torch.from_numpy(x).double(), torch.from_numpy(n).double()).numpy()
    bound = np.maximum(4 * np.abs(w - truth), _float32_evaluation_bound(name, x, np.trunc(n), truth))
    with np.errstate(invalid="ignore"):  # inf - inf
        near = (np.isnan(g) & np.isnan(w)) | (g == w) | (np.abs(g - w) <= 1e-4 * np.abs(w) + 1e-6 * np.maximum(1, np.abs(w)))
        same = near | (np.abs(g - truth) <= bound)
    assert same.all(), list(zip(x[~same][:5], n[~same][:5], g[~same][:5], w[~same][:5], truth[~same][:5]))


def _float32_evaluation_bound(name, x, n, truth):
    """Forward error of evaluating a degree-n polynomial in float32: (n+1)^2 eps |P| for the
    well-conditioned recurrences; for Hermite, whose terms dwarf the value, the textbook bound
    2(n+1) eps sum|a_k||x|^k over the power-basis coefficients."""
    eps = float(np.finfo(np.float32).eps)
    degree = np.abs(n) + 1
    if not name.startswith("hermite"):
        return degree ** 2 * eps * np.maximum(1, np.abs(truth))
    from numpy.polynomial import hermite, hermite_e, polynomial
    to_power = hermite.herm2poly if name == "hermite_polynomial_h" else hermite_e.herme2poly
    size = np.ones_like(truth)
    for k in np.unique(n[n >= 0]):
        at = n == k
        size[at] = polynomial.polyval(np.abs(x[at].astype(np.float64)), np.abs(to_power(np.eye(int(k) + 1)[-1])))
    return 2 * degree * eps * size


def test_python_number_arguments_match_torch():
    x = gc.tensor(np.linspace(0.1, 0.9, 5, dtype=np.float32))
    tx = torch.linspace(0.1, 0.9, 5)
    assert_matches(gc.special.chebyshev_polynomial_t(x, 3).numpy(), torch.special.chebyshev_polynomial_t(tx, 3),
                   np.float32)
    assert_matches(gc.special.zeta(x + 1.5, 2.0).numpy(), torch.special.zeta(tx + 1.5, 2.0), np.float32)
    assert_matches(gc.special.xlog1py(2.0, x).numpy(), torch.special.xlog1py(2.0, tx), np.float32)
    assert_matches(gc.special.multigammaln(x + 2, 3).numpy(), torch.special.multigammaln(tx + 2, 3), np.float32)


@pytest.mark.parametrize("make", [
    lambda lib, x: lib.special.entr(x), lambda lib, x: lib.special.ndtr(x), lambda lib, x: lib.lgamma(x),
    lambda lib, x: lib.special.i0e(x), lambda lib, x: lib.special.zeta(x, x),
    lambda lib, x: lib.special.chebyshev_polynomial_u(x, 4), lambda lib, x: lib.igamma(x, lib.tensor([0.5, 1.0, 1.5, 2.0])),
])
@pytest.mark.parametrize("dtype", ["int64", "bool", "uint8"])
def test_integer_and_bool_inputs_give_float32_as_torch(make, dtype):
    x = np.array([0, 1, 2, 3]).astype(dtype)
    want = make(torch, torch.from_numpy(x))
    got = make(gc, gc.tensor(x)).numpy()
    assert_matches(got, want, np.float32)


def test_two_integer_inputs_of_igamma_are_refused_as_torch():
    with pytest.raises(RuntimeError):
        torch.igamma(torch.tensor([1, 2]), torch.tensor([1, 2]))
    with pytest.raises(gc.ShapeError, match="igamma takes a floating-point tensor"):
        gc.igamma(gc.tensor([1, 2]), gc.tensor([1, 2]))


def _grad(lib, fn, arrays, wanted):
    ts = [lib.tensor(a, requires_grad=w) for a, w in zip(arrays, wanted)]
    out = fn(lib, *ts)
    weights = np.linspace(0.5, 1.5, out.numel()).reshape(tuple(out.shape))
    (out * lib.tensor(weights)).sum().backward()
    return [np.asarray(t.grad.numpy()) for t, w in zip(ts, wanted) if w]


GRADIENTS = {  # name -> (function of the library and tensors, inputs, which inputs are differentiated)
    "erfc": (lambda lib, x: lib.erfc(x), [_RNG.uniform(-3, 3, 6)], [True]),
    "erfinv": (lambda lib, x: lib.erfinv(x), [_RNG.uniform(-0.9, 0.9, 6)], [True]),
    "lgamma": (lambda lib, x: lib.lgamma(x), [_RNG.uniform(-2.9, 5, 6)], [True]),
    "digamma": (lambda lib, x: lib.digamma(x), [_RNG.uniform(0.2, 5, 6)], [True]),
    "polygamma2": (lambda lib, x: lib.polygamma(2, x), [_RNG.uniform(0.2, 5, 6)], [True]),
    "mvlgamma": (lambda lib, x: lib.mvlgamma(x, 3), [_RNG.uniform(1.2, 5, 6)], [True]),
    "i0": (lambda lib, x: lib.i0(x), [_RNG.uniform(-4, 4, 6)], [True]),
    "i0e": (lambda lib, x: lib.special.i0e(x), [_RNG.uniform(-4, 4, 6)], [True]),
    "i1": (lambda lib, x: lib.special.i1(x), [np.array([0.0, -1e-20, 0.3, -2.0, 3.5])], [True]),
    "i1e": (lambda lib, x: lib.special.i1e(x), [np.array([0.0, 1e-20, 0.3, -2.0, 3.5])], [True]),
    "erfcx": (lambda lib, x: lib.special.erfcx(x), [_RNG.uniform(-2, 4, 6)], [True]),
    "ndtri": (lambda lib, x: lib.special.ndtri(x), [_RNG.uniform(0.05, 0.95, 6)], [True]),
    "log_ndtr": (lambda lib, x: lib.special.log_ndtr(x), [_RNG.uniform(-8, 4, 6)], [True]),
    "ndtr": (lambda lib, x: lib.special.ndtr(x), [_RNG.uniform(-4, 4, 6)], [True]),
    "entr": (lambda lib, x: lib.special.entr(x), [np.array([0.0, 0.2, 1.0, 3.0, -1.0])], [True]),
    "xlog1py": (lambda lib, x, y: lib.special.xlog1py(x, y), [np.array([0.0, 0.5, -2.0, 0.0, 0.0, 1.5]),
                np.array([0.3, -0.5, 2.0, math.nan, -2.0, -0.25])], [True, True]),
    "igamma": (lambda lib, a, x: lib.igamma(a, x), [_RNG.uniform(0.5, 3, 5), _RNG.uniform(0.1, 4, 5)], [False, True]),
    "igammac": (lambda lib, a, x: lib.igammac(a, x), [_RNG.uniform(0.5, 3, 5), _RNG.uniform(0.1, 4, 5)], [False, True]),
    "zeta": (lambda lib, x, q: lib.special.zeta(x, q), [_RNG.uniform(1.5, 4, 5), _RNG.uniform(0.5, 3, 5)], [False, True]),
}


@pytest.mark.parametrize("name", list(GRADIENTS))
def test_gradients_match_torch_autograd(name):
    fn, arrays, wanted = GRADIENTS[name]
    got = _grad(gc, fn, arrays, wanted)
    want = _grad(torch, fn, [torch.from_numpy(a).numpy() for a in arrays], wanted)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("call", [
    lambda x: gc.special.chebyshev_polynomial_t(x, 3), lambda x: gc.special.bessel_j0(x),
    lambda x: gc.special.airy_ai(x), lambda x: gc.special.modified_bessel_k0(x),
    lambda x: gc.igamma(x, gc.tensor([1.0, 2.0, 3.0])), lambda x: gc.special.zeta(x, gc.tensor([1.0, 2.0, 3.0])),
])
def test_no_gradient_where_torch_has_none(call):
    x = gc.tensor([1.5, 2.5, 3.5], requires_grad=True)
    with pytest.raises(gc.GraphcError, match="not implemented in PyTorch|no gradient in PyTorch"):
        call(x).sum().backward()


def test_compiled_plan_matches_eager_with_a_symbolic_batch():
    def fn(x, n):
        return (gc.special.erfcx(x) + gc.lgamma(x.abs() + 0.1) + gc.special.polygamma(2, x.abs() + 0.5)
                + gc.special.hermite_polynomial_he(x, n) + gc.special.log_ndtr(x) + gc.special.entr(x.abs())
                + gc.special.xlog1py(x, x.abs()) + gc.mvlgamma(x.abs() + 2, 2))
    x, n = _RNG.uniform(-2, 2, (3, 4)).astype(np.float32), np.arange(4)
    plan = gc.compile(fn, example_inputs=(x, n))
    assert plan.graph.inputs[0].type.shape[0] == "N"
    bigger = _RNG.uniform(-2, 2, (7, 4)).astype(np.float32)
    np.testing.assert_allclose(plan.run([bigger, n])[0], fn(gc.tensor(bigger), gc.tensor(n)).numpy(), rtol=1e-6)


def test_bad_orders_and_domains_are_refused():
    x = gc.tensor([1.0, 2.0])
    with pytest.raises(gc.GraphcError, match="non-negative int"):
        gc.polygamma(-1, x)
    with pytest.raises(gc.GraphcError, match="p must be an int >= 1"):
        gc.mvlgamma(x, 0)
    with pytest.raises(gc.GraphcError, match=r"greater than \(p-1\)/2"):
        gc.mvlgamma(x, 4)
    with pytest.raises(gc.ShapeError, match="unknown function"):
        special("no_such_function", x)
    with pytest.raises(gc.ShapeError, match="takes 2 inputs"):
        special("zeta", x)


def test_missing_scipy_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "scipy.special", None)  # import scipy.special raises ImportError
    with pytest.raises(gc.GraphcError, match=r"graphc\[special\]"):
        gc.special.erfcx(gc.tensor([0.25, 0.5]))
    # the polynomials and spherical_bessel_j0 are PyTorch's own algorithms: no scipy needed
    assert gc.special.legendre_polynomial_p(gc.tensor([0.5]), 2).numpy().tolist() == [-0.125]


def test_namespace_covers_torch_special():
    forwarded = {"logit", "sinc"}  # gc.logit / gc.sinc belong to another family of issue #34
    missing = [name for name in torch.special.__all__ if not hasattr(gc.special, name) and name not in forwarded]
    assert not missing
    def same(a, b):  # gc.x wraps the declared function to take out= (graphc/core/out_arg.py)
        return getattr(a, "__wrapped__", a) is getattr(b, "__wrapped__", b)
    assert same(gc.special.expit, gc.sigmoid) and same(gc.special.gammaln, gc.lgamma) and same(gc.special.psi, gc.digamma)
    assert same(gc.special.multigammaln, gc.mvlgamma) and same(gc.special.gammainc, gc.igamma)


def test_in_place_methods():
    x = gc.tensor([0.5, 1.5])
    assert x.lgamma_() is x
    np.testing.assert_allclose(x.numpy(), [math.lgamma(0.5), math.lgamma(1.5)], rtol=1e-6)


def test_huge_degrees_take_the_closed_forms_or_stop_at_nan():
    """Inside the interval PyTorch's trigonometric forms cover a huge n; outside, float overflow
    makes the recurrence NaN, after which graphc stops stepping (PyTorch keeps going, to NaN)."""
    x = np.array([0.3, 3.0, -2.5, 1.0001, math.inf], np.float32)
    for n in (300.0, 5000.0):
        got = gc.special.chebyshev_polynomial_u(gc.tensor(x), gc.tensor(np.full_like(x, n))).numpy()
        want = torch.special.chebyshev_polynomial_u(torch.from_numpy(x), torch.full((5,), n))
        assert_matches(got, want, np.float32, (1e-3, 1e-5))
    huge = gc.special.chebyshev_polynomial_t(gc.tensor(x), gc.tensor(np.full_like(x, 1e9))).numpy()
    assert np.isfinite(huge[0]) and np.isnan(huge[1:]).all()


def test_plan_file_round_trip(tmp_path):
    def fn(x):
        return gc.special.zeta(x + 1.0, 2.0) + gc.special.legendre_polynomial_p(x, 3) + gc.special.i1e(x)
    x = _RNG.uniform(0.5, 2, (2, 3)).astype(np.float32)
    gc.export(fn, (x,), str(tmp_path / "special.gcplan"))
    plan = gc.load(str(tmp_path / "special.gcplan"))
    bigger = _RNG.uniform(0.5, 2, (4, 3)).astype(np.float32)
    np.testing.assert_allclose(plan.run([bigger])[0], fn(gc.tensor(bigger)).numpy(), rtol=1e-6)
