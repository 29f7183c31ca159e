"""Sorting, selection and indexing (issue #34): float64 parity with PyTorch for values and
gradients on ties, NaN, negative dims, keepdim and 0-d inputs; compiled == eager; the
refusals of data-dependent sizes (nonzero, masked_select, unique, a traced bool mask)."""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(7)
TIES = np.array([[3.0, 1.0, 3.0, 1.0, 2.0, 5.0], [2.0, 2.0, 1.0, 1.0, 7.0, 7.0], [0.0, 0.0, 0.0, 4.0, 4.0, 4.0]])
NANS = np.array([[1.0, np.nan, 2.0, -np.inf, 2.0, np.inf], [4.0, 3.0, np.nan, np.nan, 0.0, 1.0]])


def _outs(result):
    return list(result) if isinstance(result, (tuple, list)) else [result]


def check(gc_fn, torch_fn, *arrays, grad=True, compiled=True):
    """Forward values and dtypes (eager and compiled) and gradients of sum(out * w) match
    PyTorch in float64."""
    tins = [torch.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
    gins = [gc.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
    touts, gouts = _outs(torch_fn(*tins)), _outs(gc_fn(*gins))
    assert len(touts) == len(gouts)
    for t, g in zip(touts, gouts):
        want = t.detach().numpy()
        got = g.detach().numpy()
        assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12, equal_nan=True)
    if compiled:
        plan = gc.compile(lambda *xs: gc_fn(*xs), example_inputs=tuple(arrays))
        for g, c in zip(gouts, _outs(plan(*arrays))):
            np.testing.assert_allclose(np.asarray(c), g.detach().numpy(), rtol=1e-12, equal_nan=True)
    if not grad:
        return
    floats = [(k, t) for k, t in enumerate(touts) if t.dtype.is_floating_point]
    weights = [RNG.uniform(0.5, 1.5, tuple(t.shape)) for _, t in floats]
    tloss = sum((t * torch.tensor(w)).nansum() for (_, t), w in zip(floats, weights))
    gloss = None
    for (k, _), w in zip(floats, weights):
        out = gouts[k]
        term = gc.where(gc.isnan(out), 0.0, out * gc.tensor(w)).sum()
        gloss = term if gloss is None else gloss + term
    leaves = [(t, g) for t, g in zip(tins, gins) if t.requires_grad]
    tgrads = torch.autograd.grad(tloss, [t for t, _ in leaves], allow_unused=True)
    gloss.backward()
    for tg, (_, g) in zip(tgrads, leaves):
        want = np.zeros(g.shape) if tg is None else tg.numpy()
        got = np.zeros(g.shape) if g.grad is None else g.grad.numpy()
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


# ---- sorting --------------------------------------------------------------------------------

@pytest.mark.parametrize("dim, descending", [(-1, False), (1, True), (0, False), (0, True)])
def test_sort_ties_stable(dim, descending):
    check(lambda x: gc.sort(x, dim, descending), lambda x: torch.sort(x, dim=dim, descending=descending, stable=True),
          TIES)


@pytest.mark.parametrize("descending", [False, True])
def test_sort_nan_and_inf(descending):
    check(lambda x: x.sort(descending=descending), lambda x: x.sort(descending=descending, stable=True), NANS,
          grad=False)


def test_argsort_msort_0d_and_int():
    check(lambda x: gc.argsort(x), lambda x: torch.argsort(x), np.array(2.0), grad=False, compiled=False)
    ints = RNG.integers(-3, 3, (4, 5))
    check(lambda x: x.argsort(dim=0, descending=True), lambda x: x.argsort(dim=0, descending=True, stable=True),
          ints, grad=False)
    check(gc.msort, torch.msort, RNG.standard_normal((4, 3)))


@pytest.mark.parametrize("keepdim", [False, True])
def test_kthvalue_median_mode(keepdim):
    x = RNG.standard_normal((3, 7))
    check(lambda t: t.kthvalue(3, -1, keepdim), lambda t: t.kthvalue(3, -1, keepdim), x)
    check(lambda t: t.median(0, keepdim), lambda t: t.median(0, keepdim), x)
    check(lambda t: t.mode(1, keepdim), lambda t: t.mode(1, keepdim), TIES)  # smallest value, last index


def test_median_lower_middle_and_nan():
    even = RNG.standard_normal((2, 6))
    check(lambda t: t.median(), lambda t: t.median(), even)
    check(lambda t: t.median(1), lambda t: t.median(1), NANS, grad=False)  # NaN rows: the first NaN
    check(lambda t: t.nanmedian(1), lambda t: t.nanmedian(1), NANS, grad=False)
    check(lambda t: t.nanmedian(), lambda t: t.nanmedian(), np.full(3, np.nan), grad=False)
    check(lambda t: t.median(0), lambda t: t.median(0), np.array(1.5))


@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantile(interpolation):
    x = RNG.standard_normal((4, 7))
    q = np.array([0.0, 0.25, 0.5, 0.9, 1.0])
    check(lambda t, qq: gc.quantile(t, qq, dim=1, keepdim=True, interpolation=interpolation),
          lambda t, qq: torch.quantile(t, qq, dim=1, keepdim=True, interpolation=interpolation), x, q)
    check(lambda t: gc.nanquantile(t, 0.3, dim=0, interpolation=interpolation),
          lambda t: torch.nanquantile(t, 0.3, dim=0, interpolation=interpolation), NANS, grad=False)
    check(lambda t: gc.quantile(t, 0.5, interpolation=interpolation),
          lambda t: torch.quantile(t, 0.5, interpolation=interpolation), NANS, grad=False)


def test_searchsorted_bucketize_histograms():
    seq, vals = np.sort(RNG.standard_normal((3, 6)), axis=1), RNG.standard_normal((3, 4))
    check(lambda s, v: gc.searchsorted(s, v, right=True), lambda s, v: torch.searchsorted(s, v, right=True),
          seq, vals, grad=False)
    check(lambda v, b: gc.bucketize(v, b), lambda v, b: torch.bucketize(v, b), vals, np.array([-1.0, 0.0, 1.0]),
          grad=False)
    data = RNG.standard_normal(50)
    check(lambda x: gc.histc(x, 7), lambda x: torch.histc(x, 7), data, grad=False)
    check(lambda x: gc.histc(x, 5, -1, 1), lambda x: torch.histc(x, 5, -1, 1), data, grad=False)
    check(lambda x: gc.histogram(x, 6), lambda x: torch.histogram(x, 6), data, grad=False)
    check(lambda x, w: gc.histogram(x, 4, range=(-1.0, 2.0), weight=w, density=True),
          lambda x, w: torch.histogram(x, 4, range=(-1.0, 2.0), weight=w, density=True),
          data, RNG.uniform(0, 1, 50), grad=False)


# ---- gather / scatter family ----------------------------------------------------------------

def test_gather_scatter_and_reductions():
    x, src = RNG.standard_normal((3, 5)), RNG.standard_normal((3, 4))
    index = RNG.integers(0, 5, (3, 4))
    check(lambda a, i: a.gather(1, i), lambda a, i: a.gather(1, i), x, index)
    check(lambda a, i, s: a.scatter_add(-1, i, s), lambda a, i, s: a.scatter_add(-1, i, s), x, index, src)
    for reduce in ("sum", "prod", "mean", "amax", "amin"):
        for include_self in (True, False):
            check(lambda a, i, s: a.scatter_reduce(1, i, s, reduce, include_self=include_self),
                  lambda a, i, s: a.scatter_reduce(1, i, s, reduce, include_self=include_self), x, index, src)


def test_scatter_reduce_ties_share_gradient():
    x = np.array([[1.0, 2.0, 3.0]])
    src = np.array([[3.0, 3.0, 0.5]])
    check(lambda a, i, s: a.scatter_reduce(1, i, s, "amax"), lambda a, i, s: a.scatter_reduce(1, i, s, "amax"),
          x, np.array([[2, 2, 0]]), src)
    zeros = np.array([[0.0, 2.0, 0.0, 3.0]])
    check(lambda a, i, s: a.scatter_reduce(1, i, s, "prod"), lambda a, i, s: a.scatter_reduce(1, i, s, "prod"),
          np.ones((1, 2)), np.array([[0, 0, 1, 1]]), zeros)


def test_index_family():
    x, index = RNG.standard_normal((4, 3)), np.array([2, 0, 2])
    source = RNG.standard_normal((3, 3))
    check(lambda a, i: a.index_select(0, i), lambda a, i: a.index_select(0, i), x, index)
    check(lambda a, i, s: a.index_add(0, i, s, alpha=2.0), lambda a, i, s: a.index_add(0, i, s, alpha=2.0),
          x, index, source)
    check(lambda a, i, s: a.index_copy(0, i, s), lambda a, i, s: a.index_copy(0, i, s), x, np.array([3, 0, 1]),
          source)
    check(lambda a, i, v: a.index_fill(1, i, v), lambda a, i, v: a.index_fill(1, i, v), x, np.array([0, 0, 2]),
          np.array(1.5))
    for reduce in ("prod", "mean", "amax", "amin"):
        check(lambda a, i, s: a.index_reduce(0, i, s, reduce, include_self=False),
              lambda a, i, s: a.index_reduce(0, i, s, reduce, include_self=False), x, index, source)
    check(lambda a, i: a.take(i), lambda a, i: a.take(i), x, np.array([[0, -1], [5, 5]]))
    check(lambda a, i: gc.take_along_dim(a, i, 1), lambda a, i: torch.take_along_dim(a, i, 1),
          x, RNG.integers(0, 3, (1, 2)))
    check(lambda a, i, s: a.put(i, s, accumulate=True), lambda a, i, s: a.put(i, s, accumulate=True),
          x, np.array([1, 1, 11]), np.array([1.0, 2.0, 3.0]))
    mask = RNG.random((4, 3)) < 0.5
    check(lambda a, m, s: a.masked_scatter(m, s), lambda a, m, s: a.masked_scatter(m, s), x, mask,
          RNG.standard_normal(12))


# ---- advanced indexing ----------------------------------------------------------------------

INDICES = [[1, 2], (slice(None), [0, 3]), ([0, 3], [1, -2]), (0, slice(None), [1, 2]), ([[0], [1]], slice(1, 3), [1, 2]),
           (None, [1, -1], ...), (Ellipsis, [4, 4, 0]), ([0, 0, 3], 1)]


@pytest.mark.parametrize("index", INDICES, ids=[str(i) for i in range(len(INDICES))])
def test_advanced_getitem_matches_torch(index):
    check(lambda a: a[index], lambda a: a[index], RNG.standard_normal((5, 5, 5)))


def test_getitem_tensor_index_and_mask():
    x = RNG.standard_normal((5, 4))
    check(lambda a, i: a[i], lambda a, i: a[i], x, RNG.integers(-5, 5, (2, 3)))
    mask = np.array([True, False, True, True, False])
    check(lambda a: a[gc.tensor(mask)], lambda a: a[torch.tensor(mask)], x, compiled=False)
    with pytest.raises(gc.GraphcError, match="out of bounds"):
        gc.tensor(x)[[7]]


def test_traced_mask_read_is_refused_and_writes_compile():
    x, mask = RNG.standard_normal((5, 4)), RNG.random(5) < 0.5
    with pytest.raises(gc.TraceError, match="bool mask"):
        gc.compile(lambda a, m: a[m], example_inputs=(x, mask))
    check(lambda a, m: gc.index_put(a, (m,), gc.tensor(np.arange(4.0))),
          lambda a, m: torch.index_put(a, (m,), torch.arange(4.0, dtype=torch.float64)), x, mask)


def test_setitem_with_gradients_eager_and_traced():
    def gc_fn(a, v):
        y = a * 2
        y[[0, 2], 1:] = v
        y[y > 100] = 0.0
        return y

    def torch_fn(a, v):
        y = a * 2
        y[[0, 2], 1:] = v
        y[y > 100] = 0.0
        return y
    check(gc_fn, torch_fn, RNG.standard_normal((4, 3)), RNG.standard_normal(2), compiled=False)
    x, v = RNG.standard_normal((4, 3)), RNG.standard_normal(2)

    def traced(a, b):
        y = a * 2
        y[[0, 2], 1:] = b
        return y
    np.testing.assert_allclose(gc.compile(traced, example_inputs=(x, v))(x, v), torch_fn(torch.tensor(x),
                                                                                      torch.tensor(v)).numpy())
    acc = gc.zeros(3)
    acc.index_put_((gc.tensor([0, 0, 2]),), gc.tensor([1.0, 2.0, 3.0]), accumulate=True)
    assert acc.numpy().tolist() == [3.0, 0.0, 3.0]


def test_unsafe_masked_index_pair():
    x = RNG.standard_normal((5, 5))
    mask = RNG.random((6, 6)) < 0.7
    rows, cols = RNG.integers(0, 8, (6, 1)), RNG.integers(0, 8, (1, 6))
    check(lambda a, m, r, c: gc._unsafe_masked_index(a, m, [r, c], -1.0),
          lambda a, m, r, c: torch._unsafe_masked_index(a, m, [r, c], -1.0), x, mask, rows, cols)
    vals = RNG.standard_normal((6, 6))
    check(lambda a, m, r, c, v: gc._unsafe_masked_index_put_accumulate(a, m, [r, c], v),
          lambda a, m, r, c, v: torch._unsafe_masked_index_put_accumulate(a, m, [r, c], v), x, mask, rows, cols, vals)


# ---- data-dependent sizes -------------------------------------------------------------------

def test_eager_only_ops_match_torch_and_refuse_tracing():
    x = RNG.integers(0, 3, (3, 4)).astype(np.float64)
    check(lambda a: a.nonzero(), lambda a: a.nonzero(), x, compiled=False, grad=False)
    check(lambda a: a.nonzero(as_tuple=True), lambda a: a.nonzero(as_tuple=True), x, compiled=False, grad=False)
    check(gc.argwhere, torch.argwhere, x, compiled=False, grad=False)
    check(lambda a: a.masked_select(a > 0), lambda a: a.masked_select(a > 0), RNG.standard_normal((3, 4)),
          compiled=False)
    check(lambda a: a.unique(return_inverse=True, return_counts=True),
          lambda a: a.unique(return_inverse=True, return_counts=True), x, compiled=False, grad=False)
    check(lambda a: a.unique(dim=1), lambda a: a.unique(dim=1), x, compiled=False, grad=False)
    check(lambda a: a.unique_consecutive(return_counts=True, dim=0),
          lambda a: a.unique_consecutive(return_counts=True, dim=0), np.array([[1, 2], [1, 2], [0, 0], [1, 2]]),
          compiled=False, grad=False)
    check(lambda a: gc.nonzero_static(a, size=5, fill_value=-3), lambda a: torch.nonzero_static(a, size=5,
                                                                                                fill_value=-3),
          x, grad=False)
    for fn in (gc.nonzero, gc.argwhere, gc.unique, gc.unique_consecutive, lambda a: a.masked_select(a > 0)):
        with pytest.raises(gc.TraceError, match="cannot be compiled"):
            gc.compile(lambda a, f=fn: f(a), example_inputs=(x,))
