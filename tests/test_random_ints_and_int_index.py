"""``gc.randint`` / ``randint_like`` (graphc/ops/random_more.py), ``randperm`` (random_ints.py) and reading a
tensor at an integer index tensor (graphc/core/indexing.py: ``output[idx_train]``), the pieces
of issue 34's model files that are not sparse: against PyTorch in float64, eager and compiled.
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


def test_randint_and_randperm_follow_torchs_signatures_and_the_seed():
    gc.manual_seed(5)
    a = gc.randint(3, 7, (1000,))
    assert a.dtype == gc.int64 and a.shape == (1000,) and set(a.numpy().tolist()) == {3, 4, 5, 6}
    gc.manual_seed(5)
    np.testing.assert_array_equal(gc.randint(3, 7, (1000,)).numpy(), a.numpy())  # seeded
    assert gc.randint(5, (2, 3)).shape == (2, 3) and int(gc.randint(5, (50,)).max()) < 5
    assert gc.randint(0, 2, (4,), dtype=gc.float32).dtype == gc.float32
    g = gc.Generator().manual_seed(1)
    np.testing.assert_array_equal(gc.randint(0, 100, (5,), generator=g).numpy(),
                                  gc.randint(0, 100, (5,), generator=gc.Generator().manual_seed(1)).numpy())
    like = gc.randint_like(gc.zeros(3, 2, dtype=gc.float64), 2, 4)
    assert like.dtype == gc.float64 and like.shape == (3, 2) and set(like.numpy().ravel()) <= {2.0, 3.0}
    p = gc.randperm(10)
    assert p.dtype == gc.int64 and sorted(p.numpy().tolist()) == list(range(10))
    with pytest.raises(gc.GraphcError, match="low < high"):
        gc.randint(4, 4, (2,))


@needs_torch
@pytest.mark.parametrize("index", [[2, 0, 2], [[1, -1], [0, 0]], [-3]], ids=["repeated", "2d_negative", "one"])
def test_integer_index_values_and_gradients_match_torch(index):
    x = np.random.default_rng(0).standard_normal((3, 4))
    w = np.random.default_rng(1).standard_normal(np.array(x)[np.array(index)].shape)
    tx = torch.tensor(x, requires_grad=True)
    tout = tx[torch.tensor(index)]
    (tout * torch.tensor(w)).sum().backward()
    gx = gc.tensor(x, requires_grad=True)
    out = gx[gc.tensor(index)]
    (out * gc.tensor(w)).sum().backward()
    np.testing.assert_array_equal(out.numpy(), tout.detach().numpy())
    np.testing.assert_allclose(gx.grad.numpy(), tx.grad.numpy(), rtol=1e-15)  # repeated rows add
    if np.ndim(index) == 1:  # a flat list of ints too (a nested list is a tuple of indices to PyTorch)
        np.testing.assert_array_equal(gc.tensor(x)[index].numpy(), x[np.array(index)])
    np.testing.assert_array_equal(gc.tensor(x)[np.array(index)].numpy(), x[np.array(index)])
    np.testing.assert_array_equal(gc.tensor(x)[gc.tensor(index), :].numpy(), x[np.array(index), :])
    np.testing.assert_array_equal(gc.tensor(x)[gc.tensor(index), ...].numpy(), x[np.array(index), ...])


def test_integer_index_compiles_with_constant_and_traced_indices():
    x = np.random.default_rng(2).standard_normal((6, 3))
    idx = gc.tensor([5, 1, 1])
    plan = gc.compile(lambda a: a[idx] * 2, (x,))
    np.testing.assert_array_equal(plan(x), x[[5, 1, 1]] * 2)
    np.testing.assert_array_equal(plan(x[:5][[1, 0, 2, 3, 4, 0]]), x[:5][[1, 0, 2, 3, 4, 0]][[5, 1, 1]] * 2)
    labels = np.array([0, 2, 2, 1])
    plan = gc.compile(lambda rows, table: table[rows], (labels, x))  # the index a graph input
    np.testing.assert_array_equal(plan(labels, x), x[labels])
    np.testing.assert_array_equal(plan(labels[:2], x), x[labels[:2]])


def test_integer_index_refusals():
    x = gc.zeros(3, 2)
    with pytest.raises(gc.GraphcError, match="out of bounds"):
        x[gc.tensor([0, 3])]
    with pytest.raises(gc.GraphcError, match="too many indices"):
        gc.tensor(1.0)[gc.tensor([0])]
    assert x[gc.tensor([True, False, True])].shape == (2, 2)  # a mask selects rows eagerly, as PyTorch
    with pytest.raises(gc.TraceError, match="mask"):  # compiled, the number of rows would depend on the data
        gc.compile(lambda a: a[a[:, 0] > 0], (np.ones((3, 2), np.float32),))
