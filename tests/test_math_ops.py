"""The BLAS-like products, elementwise math, scans and statistics of graphc/ops/functions_blas.py,
functions_math_more.py, functions_compare.py, functions_distance.py, reductions_scan.py and
reductions_stats.py: float64 values and gradients against PyTorch, compiled against eager, and
the refusals."""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc

torch = pytest.importorskip("torch")

_RNG = np.random.default_rng(3436)


def _x(*shape, lo=-2.0, hi=2.0):
    return _RNG.uniform(lo, hi, shape)


# name -> (function of the module (gc or torch), inputs, keyword arguments)
CASES = {
    "addmm": (lambda m, a, b, c: m.addmm(a, b, c, beta=0.5, alpha=2.0), [_x(3, 4), _x(3, 2), _x(2, 4)]),
    "addmm-beta0": (lambda m, a, b, c: m.addmm(a, b, c, beta=0), [_x(1, 4), _x(3, 2), _x(2, 4)]),
    "baddbmm": (lambda m, a, b, c: m.baddbmm(a, b, c, alpha=0.3), [_x(2, 3, 4), _x(2, 3, 5), _x(2, 5, 4)]),
    "addbmm": (lambda m, a, b, c: m.addbmm(a, b, c), [_x(3, 4), _x(2, 3, 5), _x(2, 5, 4)]),
    "addmv": (lambda m, a, b, c: m.addmv(a, b, c, beta=2), [_x(3), _x(3, 4), _x(4)]),
    "addr": (lambda m, a, b, c: m.addr(a, b, c), [_x(3, 4), _x(3), _x(4)]),
    "dot": (lambda m, a, b: m.dot(a, b), [_x(5), _x(5)]),
    "inner": (lambda m, a, b: m.inner(a, b), [_x(2, 3, 4), _x(5, 4)]),
    "outer": (lambda m, a, b: m.outer(a, b), [_x(3), _x(4)]),
    "tensordot": (lambda m, a, b: m.tensordot(a, b, dims=([2, 0], [0, 1])), [_x(3, 4, 5), _x(5, 3, 2)]),
    "einsum-batched": (lambda m, a, b: m.einsum("bij,bjk->bik", a, b), [_x(2, 3, 4), _x(2, 4, 5)]),
    "einsum-ellipsis": (lambda m, a, b: m.einsum("...ij,...jk", a, b), [_x(2, 3, 4), _x(4, 5)]),
    "einsum-diagonal": (lambda m, a: m.einsum("ii->i", a), [_x(4, 4)]),
    "einsum-three": (lambda m, a, b, c: m.einsum("ab,bc,cd->ad", [a, b, c]), [_x(2, 3), _x(3, 4), _x(4, 5)]),
    "einsum-broadcast": (lambda m, a, b: m.einsum("ij,ij->i", a, b), [_x(3, 4), _x(1, 4)]),
    "cross": (lambda m, a, b: m.cross(a, b, dim=1), [_x(4, 3, 2), _x(4, 3, 2)]),
    "cdist-2": (lambda m, a, b: m.cdist(a, b), [_x(2, 4, 3), _x(2, 5, 3)]),
    "cdist-1.5": (lambda m, a, b: m.cdist(a, b, p=1.5), [_x(4, 3), _x(5, 3)]),
    "cdist-inf": (lambda m, a, b: m.cdist(a, b, p=float("inf")), [_x(4, 3), _x(5, 3)]),
    "dist-3": (lambda m, a, b: m.dist(a, b, 3), [_x(3, 4), _x(4)]),
    "addcdiv": (lambda m, a, b, c: m.addcdiv(a, b, c, value=0.5), [_x(3, 4), _x(3, 1), _x(4, lo=0.5)]),
    "rsub": (lambda m, a, b: m.rsub(a, b, alpha=2), [_x(3, 4), _x(4)]),
    "fmax": (lambda m, a, b: m.fmax(a, b), [_x(3, 4), _x(3, 4)]),
    "float_power": (lambda m, a, b: m.float_power(a, b), [_x(3, 4, lo=0.5), _x(3, 4)]),
    "ldexp": (lambda m, a, b: m.ldexp(a, b), [_x(3, 4), _x(3, 4)]),
    "lerp-tensor": (lambda m, a, b, w: m.lerp(a, b, w), [_x(3, 4), _x(3, 4), _x(3, 4, lo=-0.5, hi=1.5)]),
    "logaddexp": (lambda m, a, b: m.logaddexp(a, b), [_x(3, 4) * 30, _x(3, 4) * 30]),
    "logaddexp2": (lambda m, a, b: m.logaddexp2(a, b), [_x(3, 4), _x(4)]),
    "logit-eps": (lambda m, a: m.logit(a, eps=0.2), [_x(3, 4, lo=0.0, hi=1.0)]),
    "sinc": (lambda m, a: m.sinc(a), [_x(3, 4, lo=-3.0, hi=3.0)]),
    "round-decimals": (lambda m, a: m.round(a * 100, decimals=-1), [_x(3, 4)]),
    "logcumsumexp": (lambda m, a: m.logcumsumexp(a * 10, 1), [_x(3, 5)]),
    "cummax": (lambda m, a: m.cummax(a, 0), [_x(5, 3)]),
    "cummin": (lambda m, a: m.cummin(a, -1), [_x(3, 5)]),
    "diff": (lambda m, a, b: m.diff(a, n=2, dim=0, append=b), [_x(4, 3), _x(2, 3)]),
    "gradient-coords": (lambda m, a: m.gradient(a, spacing=(m.tensor([0.0, 1.0, 3.0, 3.5]),), dim=1), [_x(3, 4)]),
    "gradient-edge2": (lambda m, a: m.gradient(a, spacing=[0.5, 2.0], edge_order=2), [_x(4, 5)]),
    "trapezoid-x": (lambda m, a, b: m.trapezoid(a, b, dim=0), [_x(4, 3), np.sort(_x(4))]),
    "cumulative_trapezoid": (lambda m, a: m.cumulative_trapezoid(a, dx=0.5, dim=0), [_x(4, 3)]),
    "renorm-inf": (lambda m, a: m.renorm(a, float("inf"), 0, 1.0), [_x(3, 4)]),
    "renorm-3": (lambda m, a: m.renorm(a, 3, 1, 1.5), [_x(3, 4)]),
    "aminmax": (lambda m, a: m.aminmax(a, dim=0), [_x(4, 3)]),
    "nanmean": (lambda m, a: m.nanmean(m.where(a > 1.5, float("nan"), a), 1), [_x(3, 4)]),
    "cov-weights": (lambda m, a, w: m.cov(a, fweights=m.tensor([1, 2, 1, 3]), aweights=w),
                    [_x(3, 4), _x(4, lo=0.5, hi=1.5)]),
    "corrcoef": (lambda m, a: m.corrcoef(a), [_x(3, 6)]),
}


def _outputs(out):
    return [o for o in (out if isinstance(out, (tuple, list)) else [out])]


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torch_values_and_gradients(name):
    fn, inputs = CASES[name]
    gx = [gc.tensor(a, requires_grad=True) for a in inputs]
    tx = [torch.tensor(a, requires_grad=True) for a in inputs]
    gout, tout = _outputs(fn(gc, *gx)), _outputs(fn(torch, *tx))
    for g, t in zip(gout, tout):
        assert g.dtype.name == str(t.dtype).replace("torch.", "")
        np.testing.assert_allclose(g.numpy(), t.detach().numpy(), rtol=1e-10, atol=1e-12)
    weights = [np.random.default_rng(k).uniform(0.5, 1.5, tuple(t.shape)) for k, t in enumerate(tout)]
    float_outs = [k for k, t in enumerate(tout) if t.dtype.is_floating_point]
    sum(((gout[k] * gc.tensor(weights[k])).sum() for k in float_outs), gc.tensor(0.0, dtype=gc.float64)).backward()
    tgrads = torch.autograd.grad(sum((tout[k] * torch.tensor(weights[k])).sum() for k in float_outs), tx,
                                 allow_unused=True)
    for g, t in zip(gx, tgrads):
        expected = np.zeros(g.shape) if t is None else t.numpy()
        actual = np.zeros(g.shape) if g.grad is None else g.grad.numpy()
        np.testing.assert_allclose(actual, expected, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_matches_eager(name):
    fn, inputs = CASES[name]
    arrays = [a.astype(np.float32) for a in inputs]
    plan = gc.compile(lambda *xs: fn(gc, *xs), example_inputs=tuple(arrays))
    compiled = _outputs(plan(*arrays))
    eager = _outputs(fn(gc, *[gc.tensor(a) for a in arrays]))
    for c, e in zip(compiled, eager):
        np.testing.assert_allclose(np.asarray(c), e.numpy(), rtol=1e-6, atol=1e-6)


def test_scans_along_the_symbolic_batch_dim_keep_it_symbolic():
    plan = gc.compile(lambda x: (gc.logcumsumexp(x, 0), gc.cummax(x, 0).indices), example_inputs=(np.ones((4, 3), np.float32),))
    x = _x(7, 3).astype(np.float32)
    values, indices = plan(x)
    torch_x = torch.tensor(x)
    np.testing.assert_allclose(values, torch.logcumsumexp(torch_x, 0).numpy(), rtol=1e-5)
    np.testing.assert_array_equal(indices, torch.cummax(torch_x, 0).indices.numpy())


def test_a_contraction_against_the_batch_dim_pins_it():
    """mat1 (N, 2) @ mat2 (N, 3) needs N == 2: the plan is traced at that size and refuses others."""
    plan = gc.compile(lambda a, b: gc.addmm(b, a, b), example_inputs=(
        np.ones((2, 2), np.float32), np.ones((2, 3), np.float32)))
    np.testing.assert_allclose(plan(np.ones((2, 2), np.float32), np.ones((2, 3), np.float32)), np.full((2, 3), 3.0))
    with pytest.raises(gc.ShapeError):
        plan(np.ones((3, 2), np.float32), np.ones((3, 3), np.float32))


def test_comparisons():
    a = gc.tensor([1.0, float("nan"), float("inf"), 2.0])
    b = gc.tensor([1.0 + 1e-6, float("nan"), float("inf"), 2.5])
    ta, tb = torch.tensor(a.numpy()), torch.tensor(b.numpy())
    for kw in ({}, {"equal_nan": True}, {"rtol": 0.3}, {"rtol": 0, "atol": 0}):
        assert gc.isclose(a, b, **kw).numpy().tolist() == torch.isclose(ta, tb, **kw).numpy().tolist()
        assert gc.allclose(a, b, **kw) == torch.allclose(ta, tb, **kw)
    assert gc.equal(a[:1], b[:1]) is False and gc.equal(gc.tensor([1, 2]), gc.tensor([1, 2])) is True
    x, s = gc.tensor([[1, 2], [3, 4]]), gc.tensor([4, 1, 9])
    assert gc.isin(x, s, invert=True).numpy().tolist() == torch.isin(torch.tensor(x.numpy()), torch.tensor(s.numpy()),
                                                                      invert=True).numpy().tolist()
    v = gc.tensor([-0.0, 0.0, -1.0, float("nan")])
    assert gc.signbit(v).numpy().tolist() == torch.signbit(torch.tensor(v.numpy())).numpy().tolist()
    assert gc.nan_to_num(v * float("inf")).numpy().tolist() == torch.nan_to_num(torch.tensor(v.numpy()) * float("inf")).numpy().tolist()


def test_in_place_forms():
    x = gc.tensor([[1.0, 2.0]])
    x.addcmul_(gc.tensor([1.0, 1.0]), gc.tensor([2.0, 3.0]), value=2).clamp_max_(7.0)
    assert x.numpy().tolist() == [[5.0, 7.0]]
    with pytest.raises(gc.GraphcError, match="float_power_"):
        gc.tensor([1.0]).float_power_(2)


def test_refusals():
    with pytest.raises(gc.ShapeError, match="einsum"):
        gc.einsum("ij,jk->ik", gc.ones(2, 3))
    with pytest.raises(gc.ShapeError, match="einsum"):
        gc.einsum("ij->ik", gc.ones(2, 3))
    with pytest.raises(gc.ShapeError, match="cross"):
        gc.cross(gc.ones(2, 4), gc.ones(2, 4))
    with pytest.raises(gc.ShapeError, match="addmm"):
        gc.addmm(gc.ones(2), gc.ones(2), gc.ones(2))
    with pytest.raises(gc.ShapeError, match="gradient"):
        gc.gradient(gc.ones(2), edge_order=2)
    with pytest.raises(gc.ShapeError, match="nextafter"):
        gc.nextafter(gc.tensor([1]), gc.tensor([2]))
    with pytest.raises(gc.ShapeError, match="heaviside"):
        gc.heaviside(gc.ones(2), gc.tensor([1]))
    with pytest.raises(gc.ShapeError, match="diff"):
        gc.diff(gc.tensor(1.0))


@pytest.mark.parametrize("reverse", [False, True])
def test_running_sums_export_to_onnx_cumsum(tmp_path, reverse):
    ort = pytest.importorskip("onnxruntime")
    from graphc.core.dispatch import apply

    for x in (_x(5, 3).astype(np.float32), _x(5, 3) > 0):
        def fn(t):
            return apply("cumulative", [t], {"kind": "sum", "dim": 0, "reverse": reverse})
        path = tmp_path / "cumsum.onnx"
        gc.onnx.export(fn, (gc.tensor(x),), str(path))
        session = ort.InferenceSession(str(path))
        got = session.run(None, {session.get_inputs()[0].name: x})[0]
        np.testing.assert_array_equal(got, fn(gc.tensor(x)).numpy())
    with pytest.raises(gc.GraphcError, match="cumulative logsumexp"):
        gc.onnx.export(lambda t: gc.logcumsumexp(t, 1), (gc.ones(2, 3),), str(tmp_path / "lse.onnx"))
