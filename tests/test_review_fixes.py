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


def test_iterating_over_the_traced_batch_specializes_it_not_a_hang():
    """Iterating needs the batch size: the graph is traced at the example's (as torch.compile
    unrolls at a specialized size) and says why; it never hangs."""
    class Rows(nn.Module):
        def forward(self, x):
            return sum(row for row in x)

    graph = gc.jit.trace(Rows(), np.ones((3, 2), np.float32))
    assert graph.meta["fixed_batch"]["size"] == 3
    assert "iterating over the batch dim" in graph.meta["fixed_batch"]["where"]
    assert [t.shape for t in gc.zeros(3, 2)] == [(2,), (2,), (2,)]  # eager iteration works


def test_root_module_errors_name_the_model_class():
    class Net(nn.Module):
        def forward(self, x):
            return x.view(x.shape[0], 7)

    with pytest.raises(gc.ShapeError, match=r"\[Net at test_review_fixes.py:\d+\]"):
        gc.jit.trace(Net(), np.ones((2, 3), np.float32))


def test_a_parameter_of_another_model_is_refused_not_frozen():
    other = nn.Linear(4, 2)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 2)

        def forward(self, x):
            return self.fc(x) + other.bias

    with pytest.raises(gc.TraceError, match="not part of the traced Net"):
        gc.jit.trace(Net(), np.ones((3, 4), np.float32))


def test_plans_take_inputs_by_name_and_keep_a_bounded_program_cache():
    plan = gc.compile(nn.Linear(4, 2).eval(), (np.ones((8, 4), np.float32),))
    assert plan(x=np.ones((3, 4), np.float32)).shape == (3, 2)
    with pytest.raises(gc.ShapeError, match="unknown input name"):
        plan(z=np.ones((3, 4), np.float32))
    for batch in range(1, 12):
        plan(np.ones((batch, 4), np.float32))
    assert len(plan._programs) == plan.max_programs


def test_mixed_float_dtypes_are_refused_with_a_hint():
    with pytest.raises(gc.ShapeError, match="input is float64 but weight is float32"):
        gc.compile(nn.Linear(4, 2), (np.ones((3, 4), np.float64),))
    model = nn.Linear(4, 2).to(gc.float64)
    assert gc.compile(model.eval(), (np.ones((3, 4), np.float64),))(np.ones((2, 4))).dtype == np.float64
    plan = gc.compile(nn.Linear(4, 2).eval(), (np.ones((3, 4), np.float32),))
    with pytest.raises(gc.ShapeError, match=r"astype\(np.float32\)"):
        plan(np.ones((3, 4)))


def test_bad_constructor_arguments_and_paths_are_graphc_errors(tmp_path):
    for make in (lambda: nn.Linear(4.0, 3), lambda: nn.Linear(-1, 3), lambda: nn.Conv2d(1, 3, 0),
                 lambda: nn.BatchNorm2d(0)):
        with pytest.raises(gc.GraphcError):
            make()
    plan = gc.compile(nn.Linear(4, 2).eval(), (np.ones((3, 4), np.float32),))
    with pytest.raises(gc.GraphcError, match="cannot save plan"):
        plan.save(tmp_path / "missing" / "x.graphc")
    with pytest.raises(gc.GraphcError, match="no parameter has a gradient; call loss.backward"):
        optim.SGD(nn.Linear(2, 2).parameters(), lr=0.1).step()


def test_small_pytorch_conveniences():
    t = gc.tensor([[3.0, 1.0], [2.0, 5.0]])
    assert float(t.min()) == 1.0
    np.testing.assert_array_equal(t.min(1).values.numpy(), [1.0, 2.0])
    assert gc.stack([t, t], dim=0).shape == (2, 2, 2)
    assert gc.arange(5).dtype == gc.int64 and gc.zeros_like(t).shape == (2, 2)
    with gc.no_grad():
        assert t.clone().numpy() is not t.numpy()


def test_a_scalar_first_input_does_not_hide_the_batch_dim():
    plan = gc.compile(lambda s, x: x * s, (np.float32(2.0), np.ones((4, 3), np.float32)))
    out = plan(np.float32(3.0), np.ones((7, 3), np.float32))
    np.testing.assert_array_equal(out, np.full((7, 3), 3.0, np.float32))


def test_clamp_squeeze_expand_eager_and_traced():
    t = gc.tensor([[-2.0, 0.5, 3.0]])
    np.testing.assert_array_equal(t.clamp(-1.0, 1.0).numpy(), [[-1.0, 0.5, 1.0]])
    assert t.squeeze(0).shape == (3,) and t.squeeze().shape == (3,) and t.unsqueeze(0).shape == (1, 1, 3)
    assert t.expand(4, 3).shape == (4, 3)

    def fn(x):  # the batch dim must survive squeeze/unsqueeze/expand without pinning the plan
        return x.unsqueeze(1).squeeze(1).clamp(0.0, 1.0).unsqueeze(2).expand(x.shape[0], 3, 2)

    plan = gc.compile(fn, (np.ones((4, 3), np.float32),))
    assert plan(np.full((6, 3), 2.0, np.float32)).shape == (6, 3, 2)
    assert "fixed_batch" not in plan.graph.meta
