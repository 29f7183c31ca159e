"""Tensor functions the sequence-model files (tests/models) needed, composites in graphc/ops, against
PyTorch: ``topk`` and ``bmm`` (values, indices and gradients, eager and compiled), ``narrow`` and
``t``. (sin and cos are primitives: the op table covers them.)"""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc

TOPK_CASES = {  # name: (input, k, dim, largest)
    "last-dim-k1": (np.random.default_rng(0).standard_normal((3, 7)).astype(np.float32), 1, -1, True),
    "dim1-k3": (np.random.default_rng(1).standard_normal((2, 6, 4)), 3, 1, True),
    "dim0-smallest": (np.random.default_rng(2).standard_normal((5, 3)).astype(np.float32), 2, 0, False),
    "int64": (np.array([[3, 1, 4, 1, 5, 9, 2, 6]]), 4, 1, True),
}
WEIGHTS = np.random.default_rng(3).standard_normal(4 * 3 * 2)  # a cotangent for the values


def torch_topk(x, k, dim, largest):
    import torch

    t = torch.from_numpy(x).requires_grad_(x.dtype.kind == "f")
    values, indices = t.topk(k, dim=dim, largest=largest)
    out = {"values": values, "indices": indices}
    if t.requires_grad:
        (values * torch.from_numpy(WEIGHTS[:values.numel()].reshape(values.shape)).to(values.dtype)).sum().backward()
        out["grad"] = t.grad
    return out


@pytest.mark.parametrize("case", list(TOPK_CASES))
def test_topk_matches_torch(case, torch_ref):
    x, k, dim, largest = TOPK_CASES[case]
    ref = torch_ref([x, k, dim, largest], lambda: torch_topk(x, k, dim, largest))
    t = gc.tensor(x, requires_grad=x.dtype.kind == "f")
    values, indices = t.topk(k, dim=dim, largest=largest)
    np.testing.assert_array_equal(values.numpy(), ref["values"])  # selected, not computed: exact
    np.testing.assert_array_equal(indices.numpy(), ref["indices"])
    assert (values.dtype.numpy, indices.dtype.numpy) == (x.dtype, np.int64)
    if "grad" in ref:  # the gradient reaches exactly the chosen elements
        weights = WEIGHTS[:int(np.prod(values.shape))].reshape(values.shape).astype(x.dtype)
        (values * gc.tensor(weights)).sum().backward()
        np.testing.assert_array_equal(t.grad.numpy(), ref["grad"])
    if dim % x.ndim == 0:  # the positions need the batch size: the plan runs at the example's only
        with pytest.raises(gc.ShapeError, match="topk along a symbolic dim"):
            gc.compile(lambda a: gc.topk(a, k, dim, largest), example_inputs=(x,))(x[:-1])
        x, dim = x.T.copy(), 1  # the same selection along a static dim
        ref = {n: np.swapaxes(v, 0, 1) for n, v in ref.items()}
    plan = gc.compile(lambda a: gc.topk(a, k, dim, largest), example_inputs=(x,))
    got_values, got_indices = plan(x)
    np.testing.assert_array_equal(got_values, ref["values"])
    np.testing.assert_array_equal(got_indices, ref["indices"])


def test_topk_refuses_what_it_cannot_do():
    x = gc.ones(2, 3)
    for bad in (lambda: x.topk(4), lambda: x.topk(0), lambda: x.topk(1, dim=2), lambda: gc.tensor(1.0).topk(1)):
        with pytest.raises(gc.GraphcError):
            bad()


def test_bmm_matches_torch(torch_ref):
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((3, 2, 4)).astype(np.float32), rng.standard_normal((3, 4, 5)).astype(np.float32)
    g = rng.standard_normal((3, 2, 5)).astype(np.float32)

    def run():
        import torch

        ta, tb = (torch.from_numpy(v).requires_grad_() for v in (a, b))
        out = torch.bmm(ta, tb)
        (out * torch.from_numpy(g)).sum().backward()
        return {"out": out, "ga": ta.grad, "gb": tb.grad}

    ref = torch_ref([a, b, g], run)
    ta, tb = gc.tensor(a, requires_grad=True), gc.tensor(b, requires_grad=True)
    out = gc.bmm(ta, tb)
    (out * gc.tensor(g)).sum().backward()
    # float32 products of 4 terms (grads of 2 to 5): BLAS and numpy may sum in different orders
    for got, want in ((out, ref["out"]), (ta.grad, ref["ga"]), (tb.grad, ref["gb"])):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(gc.compile(gc.bmm, example_inputs=(a, b))(a, b), ref["out"], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(ta.bmm(tb).numpy(), ref["out"], rtol=1e-6, atol=1e-6)
    with pytest.raises(gc.GraphcError):
        gc.bmm(gc.ones(2, 3), gc.ones(3, 2))  # 2-d: torch.bmm refuses them too
    with pytest.raises(gc.GraphcError):
        gc.bmm(gc.ones(2, 1, 3), gc.ones(3, 3, 2))


def test_narrow_and_t_match_torch(torch_ref):
    """The word language model's batchify: ``data.narrow(0, 0, n).view(bsz, -1).t().contiguous()``."""
    x = np.random.default_rng(5).standard_normal((4, 6))

    def run():
        import torch

        tx = torch.from_numpy(x).requires_grad_()
        cut = tx.narrow(1, 1, 3).t()
        (cut * torch.arange(12.0, dtype=torch.float64).view(3, 4)).sum().backward()
        return {"cut": cut, "grad": tx.grad, "neg": torch.from_numpy(x).narrow(0, -2, 2), "t1": torch.arange(3).t()}

    ref = torch_ref([x], run)
    tx = gc.tensor(x, requires_grad=True)
    cut = tx.narrow(1, 1, 3).t()
    (cut * gc.arange(12.0, dtype=gc.float64).view(3, 4)).sum().backward()
    np.testing.assert_array_equal(cut.numpy(), ref["cut"])
    np.testing.assert_array_equal(tx.grad.numpy(), ref["grad"])
    np.testing.assert_array_equal(gc.narrow(gc.tensor(x), 0, -2, 2).numpy(), ref["neg"])
    np.testing.assert_array_equal(gc.arange(3).t().numpy(), ref["t1"])
    plan = gc.compile(lambda a: a.narrow(1, 1, 3).t(), example_inputs=(x,))
    np.testing.assert_array_equal(plan(x), ref["cut"])
    for bad in (lambda: tx.narrow(1, 4, 3), lambda: tx.narrow(0, 0, -1), lambda: gc.zeros(2, 2, 2).t()):
        with pytest.raises(gc.GraphcError):
            bad()
