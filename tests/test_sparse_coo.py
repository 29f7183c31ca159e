"""Sparse COO tensors (graphc/ops/sparse_ops.py, graphc/sparse.py) against PyTorch in float64:
construction, ``to_dense``, ``coalesce``, ``to_sparse``, the sparse-dense product through every
name PyTorch gives it (``spmm``, ``sparse.mm``, ``mm``, ``matmul``, ``@``) with gradients to the
dense operand and the values, compiled plans equal to eager, and the refusals.
"""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc

try:
    import torch
except ImportError:  # CI installs torch; the tests without PyTorch as their oracle still run
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is this test's oracle")

M, K, F, NNZ = 5, 4, 3, 9


def coo(rng, dtype=np.float64):
    """Random indices with duplicates (uncoalesced), values and a dense right operand."""
    indices = np.stack([rng.integers(0, M, NNZ), rng.integers(0, K, NNZ)]).astype(np.int64)
    indices[:, 1] = indices[:, 0]  # one duplicated entry for sure
    return indices, rng.standard_normal(NNZ).astype(dtype), rng.standard_normal((K, F)).astype(dtype)


def torch_sparse(indices, values, requires_grad=False):
    v = torch.tensor(values, requires_grad=requires_grad)
    return torch.sparse_coo_tensor(torch.from_numpy(indices), v, (M, K)), v


@needs_torch
def test_construction_and_dense_form_match_torch():
    indices, values, _ = coo(np.random.default_rng(0))
    s = gc.sparse_coo_tensor(gc.tensor(indices), gc.tensor(values), gc.Size((M, K)))
    t, _ = torch_sparse(indices, values)
    assert s.is_sparse and not gc.zeros(1).is_sparse and s.layout == "sparse_coo"
    assert (s.shape, s.dtype, s.sparse_dim(), s.dense_dim(), s._nnz()) == ((M, K), gc.float64, 2, 0, NNZ)
    assert not s.is_coalesced()
    np.testing.assert_array_equal(s._indices().numpy(), t._indices().numpy())
    np.testing.assert_allclose(s.to_dense().numpy(), t.to_dense().numpy(), rtol=1e-15, atol=0)
    c, tc = s.coalesce(), t.coalesce()
    assert c.is_coalesced()
    np.testing.assert_array_equal(c.indices().numpy(), tc.indices().numpy())
    np.testing.assert_allclose(c.values().numpy(), tc.values().numpy(), rtol=1e-15, atol=0)
    # size inferred from the indices; hybrid values (nnz, 2) give a dense trailing dim
    assert gc.sparse_coo_tensor([[0, 2]], [1.0, 2.0]).shape == (3,)
    h = gc.sparse_coo_tensor([[0, 2]], [[1.0, 2.0], [3.0, 4.0]], (3, 2))
    np.testing.assert_array_equal(h.to_dense().numpy(), [[1, 2], [0, 0], [3, 4]])


@needs_torch
def test_to_sparse_matches_torch():
    x = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -3.0]])
    s, t = gc.tensor(x).to_sparse(), torch.tensor(x).to_sparse()
    np.testing.assert_array_equal(s.indices().numpy(), t.indices().numpy())
    np.testing.assert_array_equal(s.values().numpy(), t.values().numpy())
    np.testing.assert_array_equal(s.to_dense().numpy(), x)
    # gradients reach the dense tensor through the values, as PyTorch's
    g, tx = gc.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    (g.to_sparse().values() * gc.tensor([1.0, 2.0, 3.0])).sum().backward()
    (tx.to_sparse().values() * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    np.testing.assert_array_equal(g.grad.numpy(), tx.grad.numpy())
    h, th = gc.tensor(x).to_sparse(1), torch.tensor(x).to_sparse(1)  # hybrid: rows as dense values
    np.testing.assert_array_equal(h.indices().numpy(), th.indices().numpy())
    np.testing.assert_array_equal(h.values().numpy(), th.values().numpy())


@needs_torch
@pytest.mark.parametrize("how", ["spmm", "sparse.mm", "mm", "matmul", "@", "method"])
def test_product_and_gradients_match_torch(how):
    indices, values, dense = coo(np.random.default_rng(1))
    weights = np.random.default_rng(2).standard_normal((M, F))
    call = {"spmm": lambda a, b, lib: lib.spmm(a, b), "sparse.mm": lambda a, b, lib: lib.sparse.mm(a, b),
            "mm": lambda a, b, lib: lib.mm(a, b), "matmul": lambda a, b, lib: lib.matmul(a, b),
            "@": lambda a, b, lib: a @ b, "method": lambda a, b, lib: a.mm(b)}[how]

    t, tv = torch_sparse(indices, values, requires_grad=True)
    td = torch.tensor(dense, requires_grad=True)
    tout = call(t, td, torch)
    (tout * torch.from_numpy(weights)).sum().backward()

    gv, gd = gc.tensor(values, requires_grad=True), gc.tensor(dense, requires_grad=True)
    out = call(gc.sparse_coo_tensor(indices, gv, (M, K)), gd, gc)
    (out * gc.tensor(weights)).sum().backward()
    assert out.shape == (M, F) and out.dtype == gc.float64
    np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(gd.grad.numpy(), td.grad.numpy(), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(gv.grad.numpy(), tv.grad.numpy(), rtol=1e-13, atol=1e-15)


@needs_torch
def test_matrix_vector_and_addmm_match_torch():
    indices, values, dense = coo(np.random.default_rng(3))
    t, _ = torch_sparse(indices, values)
    s = gc.sparse_coo_tensor(indices, values, (M, K))
    np.testing.assert_allclose(gc.matmul(s, gc.tensor(dense[:, 0])).numpy(),
                               torch.matmul(t, torch.tensor(dense[:, 0])).numpy(), rtol=1e-13)
    bias = np.ones((M, F))
    np.testing.assert_allclose(gc.sparse.addmm(gc.tensor(bias), s, gc.tensor(dense), beta=0.5, alpha=2.0).numpy(),
                               torch.sparse.addmm(torch.tensor(bias), t, torch.tensor(dense), beta=0.5,
                                                  alpha=2.0).numpy(), rtol=1e-13)
    np.testing.assert_allclose(s.t().to_dense().numpy(), t.t().to_dense().numpy(), rtol=0)


def test_compiled_product_equals_eager_with_the_matrix_as_constant_and_as_graph_values():
    """A sparse matrix closed over by the step (its indices and values are plan constants), and
    one built inside the step from traced values (graph values, with their gradient)."""
    indices, values, dense = coo(np.random.default_rng(4))
    s = gc.sparse_coo_tensor(indices, values, (M, K))
    plan = gc.compile(lambda b: gc.spmm(s, b).relu(), (dense,))
    np.testing.assert_allclose(plan(dense), gc.spmm(s, gc.tensor(dense)).relu().numpy(), rtol=1e-15)
    idx = gc.tensor(indices)
    plan = gc.compile(lambda v, b: gc.spmm(gc.sparse_coo_tensor(idx, v, (M, K)), b), (values, dense))
    np.testing.assert_allclose(plan(values, dense), gc.spmm(s, gc.tensor(dense)).numpy(), rtol=1e-15)


def edge_weighted(lib, indices, values):
    """A layer whose sparse matrix's values are a Parameter (learned edge weights)."""
    class EdgeWeighted(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.values = lib.nn.Parameter(lib.from_numpy(values.copy()))

        def forward(self, x):
            adj = lib.sparse_coo_tensor(lib.from_numpy(indices), self.values, (M, K))
            return lib.sparse.mm(adj, x)
    return EdgeWeighted()


@needs_torch
def test_compiled_training_step_updates_the_values_as_torch():
    """SGD on the values of a sparse matrix, compiled: the gradient to the values in a plan."""
    indices, values, dense = coo(np.random.default_rng(6))
    target = np.random.default_rng(7).standard_normal((M, F))

    def steps(lib, compiled):
        model = edge_weighted(lib, indices, values)
        opt = lib.optim.SGD(model.parameters(), lr=0.1)

        def step(x, y):
            opt.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
            return loss
        if compiled:
            step = gc.compile(step, (dense, target))
            losses = [float(step(dense, target)) for _ in range(3)]
        else:
            losses = [float(step(lib.from_numpy(dense), lib.from_numpy(target))) for _ in range(3)]
        return losses, model.values.detach().numpy()

    want = steps(torch, False)
    for compiled in (False, True):
        got = steps(gc, compiled)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-12)
        assert not np.allclose(got[1], values)


def test_refusals():
    indices, values, dense = coo(np.random.default_rng(5))
    s = gc.sparse_coo_tensor(indices, values, (M, K))
    with pytest.raises(gc.GraphcError, match="uncoalesced"):
        s.indices()
    with pytest.raises(gc.GraphcError, match="float32"):
        gc.spmm(s, gc.tensor(dense.astype(np.float32)))
    with pytest.raises(gc.ShapeError, match="sparse matrix times"):
        gc.spmm(s, gc.ones(K + 1, 2, dtype=gc.float64))
    with pytest.raises(gc.GraphcError, match="CSR"):
        gc.sparse.mm(s, gc.tensor(dense), "mean")
    with pytest.raises(gc.ShapeError, match="out of range"):
        gc.sparse_coo_tensor([[0, M]], [1.0, 2.0], (M,))
    with pytest.raises(gc.TraceError, match="to_sparse"):
        gc.compile(lambda x: x.to_sparse().to_dense(), (dense,))
    with pytest.raises(gc.TraceError, match="coalesce"):
        gc.compile(lambda v: gc.sparse_coo_tensor(indices, v, (M, K)).coalesce().to_dense(), (values,))
