"""gc.segment_reduce (graphc/ops/segment_ops.py) against torch.segment_reduce in float64:
values, initial, empty segments, offsets, another axis, gradients, and a compiled plan that
takes the lengths as data."""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc

torch = pytest.importorskip("torch")

X = np.random.default_rng(5).standard_normal((6, 3))
LENGTHS = np.array([2, 0, 3, 1])


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
@pytest.mark.parametrize("initial", [None, 0.5])
def test_values_and_gradients_match_torch(reduce, initial):
    t = torch.tensor(X, requires_grad=True)
    want = torch.segment_reduce(t, reduce, lengths=torch.tensor(LENGTHS), initial=initial)
    g = gc.tensor(X, requires_grad=True)
    got = gc.segment_reduce(g, reduce, lengths=gc.tensor(LENGTHS), initial=initial)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12, atol=1e-12)
    weights = np.random.default_rng(6).uniform(0.5, 1.5, want.shape)
    finite = np.isfinite(want.detach().numpy())  # empty segments without initial: inf/NaN, no gradient
    (torch.where(torch.tensor(finite), want, 0.0) * torch.tensor(weights)).sum().backward()
    (gc.where(gc.tensor(finite), got, 0.0) * gc.tensor(weights)).sum().backward()
    np.testing.assert_allclose(g.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_offsets_and_the_axis():
    offsets = np.array([0, 2, 2, 5, 6])
    want = torch.segment_reduce(torch.tensor(X), "sum", offsets=torch.tensor(offsets))
    got = gc.segment_reduce(gc.tensor(X), "sum", offsets=gc.tensor(offsets))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    with pytest.raises(gc.GraphcError, match="axis must be 0"):  # PyTorch: the last dim of lengths
        gc.segment_reduce(gc.tensor(X), "sum", offsets=gc.tensor(offsets), axis=1)


def test_a_plan_takes_the_lengths_as_data():
    plan = gc.compile(lambda x, n: gc.segment_reduce(x, "mean", lengths=n, initial=0.0), (X, LENGTHS))
    other = np.array([1, 1, 4, 0])
    want = torch.segment_reduce(torch.tensor(X), "mean", lengths=torch.tensor(other), initial=0.0)
    np.testing.assert_allclose(plan(X, other), want.numpy(), rtol=1e-12)


def test_bad_arguments():
    with pytest.raises(gc.GraphcError, match="one of"):
        gc.segment_reduce(gc.tensor(X), "median", lengths=gc.tensor(LENGTHS))
    with pytest.raises(gc.GraphcError, match="exactly one"):
        gc.segment_reduce(gc.tensor(X), "sum")
