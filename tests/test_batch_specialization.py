"""gc.compile specializes the batch size an op needs (graphc/tracing.py, design-notes "A batch
size an op needs specializes the plan"): traced again at the example's batch, the plan refuses
another batch naming why; refusals not about the batch, or about declared symbols, stand."""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.nn.functional as F

RNG = np.random.default_rng(34)


def test_a_literal_reshape_of_the_batch_compiles_at_that_batch():
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    plan = gc.compile(lambda a: a.reshape(2, 12) * 2.0, (x,))
    np.testing.assert_array_equal(plan(x), x.reshape(2, 12) * 2.0)
    assert plan.graph.meta["fixed_batch"]["size"] == 4
    with pytest.raises(gc.ShapeError, match=r"only runs at batch size 4, got 3 .*reshape.*test_batch_specialization.py:\d+"):
        plan(x[:3])


def test_a_weight_whose_first_dim_equals_the_batch_is_not_the_batch():
    """conv1d's weight (3, 2, 3) next to an input batch of 3: the symbolic trace would make
    the output channels N; the specialized plan is PyTorch's convolution."""
    x = RNG.standard_normal((3, 2, 7)).astype(np.float32)
    w = RNG.standard_normal((3, 2, 3)).astype(np.float32)
    plan = gc.compile(lambda a, b: F.conv1d(a, b), (x, w))
    np.testing.assert_allclose(plan(x, w), F.conv1d(gc.tensor(x), gc.tensor(w)).numpy(), rtol=1e-6)


def test_a_refusal_not_about_the_batch_stands():
    x = np.ones((4, 3), np.float32)
    with pytest.raises(gc.ShapeError, match=r"\[4,3\]|\[N,3\]"):
        gc.compile(lambda a: a @ gc.ones(4, 2), (x,))
    calls = []

    def f(a):
        calls.append(1)
        raise gc.TraceError("something else went wrong")
    with pytest.raises(gc.TraceError, match="something else"):
        gc.compile(f, (x,))
    assert len(calls) == 1  # traced once: nothing about N, no second trace


def test_a_declared_batch_symbol_is_kept_or_refused():
    x = np.ones((4, 3), np.float32)
    with pytest.raises(gc.TraceError, match="batch dim|symbolic dim"):
        gc.compile(lambda a: a.flip(0), (x,), dynamic_dims={0: {0: "N"}})


def test_a_zero_size_batch_compiles_at_zero():
    x = np.zeros((0, 3), np.float32)
    plan = gc.compile(lambda a: (a * 2.0).sum(1), (x,))
    assert plan(x).shape == (0,)
    with pytest.raises(gc.ShapeError, match="batch size 0, got 1.*zero-size batch"):
        plan(np.ones((1, 3), np.float32))


def test_to_takes_non_blocking_and_copy_positionally():
    t = gc.ones(2)
    copied = t.to(gc.float32, False, True)
    assert copied is not t and copied.dtype == gc.float32
    assert t.to(gc.float32, False, False) is t
    with pytest.raises(gc.GraphcError, match="non_blocking and copy"):
        t.to(gc.float32, False, True, True)
