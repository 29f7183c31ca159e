"""Regression tests for problems a fresh-eyes review found (one test per problem)."""
import numpy as np
import pytest

import graphc as gc
from graphc import nn, optim


def _xy(n=64):
    rng = np.random.default_rng(0)
    return rng.standard_normal((n, 4)).astype(np.float32), rng.standard_normal((n, 2)).astype(np.float32)


def test_batch_size_used_as_a_number_pins_the_plan_to_that_batch():
    x, y = _xy()
    model = nn.Linear(4, 2)
    step = gc.compile(model, (x, y), loss_fn=lambda out, t: ((out - t) ** 2).sum() / out.shape[0],
                      optimizer=optim.SGD(model.parameters(), lr=0.0))
    step(x, y)
    with pytest.raises(gc.ShapeError, match="only runs at batch size 64"):
        step(x[:8], y[:8])


def test_batch_size_kept_symbolic_still_runs_other_batches():
    plan = gc.compile(lambda x: x.view(x.shape[0], -1) * 2, (np.ones((4, 2, 3), np.float32),))
    assert plan(np.ones((7, 2, 3), np.float32)).shape == (7, 6)
    assert "fixed_batch" not in plan.graph.meta


def test_len_and_range_over_the_batch_pin_the_plan():
    def fn(x):
        return sum(x[i] for i in range(len(x)))

    plan = gc.compile(fn, (np.ones((4, 3), np.float32),))
    np.testing.assert_array_equal(plan(np.ones((4, 3), np.float32)), np.full(3, 4.0, np.float32))
    with pytest.raises(gc.ShapeError, match="only runs at batch size 4"):
        plan(np.ones((8, 3), np.float32))


def test_iterating_over_the_traced_batch_is_a_trace_error_not_a_hang():
    class Rows(nn.Module):
        def forward(self, x):
            return sum(row for row in x)

    with pytest.raises(gc.TraceError, match="iterating over the batch dim"):
        gc.trace(Rows(), np.ones((3, 2), np.float32))
    assert [t.shape for t in gc.zeros(3, 2)] == [(2,), (2,), (2,)]  # eager iteration works


def test_root_module_errors_name_the_model_class():
    class Net(nn.Module):
        def forward(self, x):
            return x.view(x.shape[0], 7)

    with pytest.raises(gc.ShapeError, match=r"\[Net at test_review_fixes.py:\d+\]"):
        gc.trace(Net(), np.ones((2, 3), np.float32))
