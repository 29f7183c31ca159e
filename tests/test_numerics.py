"""Numerics found wrong against PyTorch once, pinned here: sigmoid in the tails, clamp's
gradient at its bounds, 0-d activation backwards. References are float64 numpy formulas and
PyTorch's documented semantics, so these run with or without torch."""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc import nn
from graphc.tracing import trace_model
from graphc.executor import Plan
from graphc.passes.autodiff import autodiff

TAIL = np.array([-100, -88, -40, -20, -15, -10, -1, 0, 1, 10, 15, 20, 40, 100], np.float32)


def sigmoid64(x):
    return 1.0 / (1.0 + np.exp(-np.asarray(x, np.float64)))


def test_sigmoid_is_accurate_in_both_tails():
    got = gc.tensor(TAIL).sigmoid().numpy().astype(np.float64)
    want = sigmoid64(TAIL)
    # float32 keeps ~7 digits down to its smallest normal (1.2e-38); below that the result
    # is a subnormal and only its absolute error (< 1.4e-45) is meaningful.
    normal = want > np.finfo(np.float32).tiny
    np.testing.assert_allclose(got[normal], want[normal], rtol=2e-7)
    np.testing.assert_allclose(got[~normal], want[~normal], rtol=0, atol=1.5e-45)
    assert got[TAIL == -20][0] == pytest.approx(2.0611536e-09, rel=1e-6)  # PyTorch: 2.06e-9, not 0


def test_minus_log_sigmoid_stays_finite_where_float32_can_hold_it():
    x = np.array([-80, -40, -20, -15], np.float32)
    got = (-(gc.tensor(x).sigmoid().log())).numpy()
    np.testing.assert_allclose(got, -np.log(sigmoid64(x)), rtol=1e-6)


def test_compiled_sigmoid_matches_eager_in_the_tails():
    plan = gc.compile(nn.Sigmoid().eval(), example_inputs=(TAIL.reshape(1, -1),))
    np.testing.assert_array_equal(plan(TAIL.reshape(1, -1))[0], gc.tensor(TAIL).sigmoid().numpy())


class Clamp(nn.Module):
    def __init__(self, values):
        super().__init__()
        self.p = nn.Parameter(gc.tensor(np.asarray(values, np.float32)))

    def forward(self, x):
        return (self.p.clamp(-1.0, 1.0) * x).sum()


def clamp_gradient(values):
    model = Clamp(values)
    x = np.ones((1, len(values)), np.float32)
    graph, _ = trace_model(model, (x,), root=model)
    graph, grads = autodiff(graph, graph.outputs[0], ["p"])
    graph.outputs = [grads["p"]]
    return Plan(graph, {"p": model.p.data}, seed=0)(x)


def test_clamp_gradient_is_one_on_the_closed_interval_like_pytorch():
    # torch.clamp(p, -1, 1).sum().backward() gives p.grad = 1 for -1 <= p <= 1, else 0
    got = clamp_gradient([-2.0, -1.0, -0.5, 0.0, 1.0, 3.0])
    np.testing.assert_array_equal(got, [0, 1, 1, 1, 1, 0])


def test_clamp_forward_keeps_nan_and_respects_one_sided_bounds():
    t = gc.tensor(np.array([np.nan, -3.0, 0.25, 3.0], np.float32))
    np.testing.assert_array_equal(t.clamp(-1.0, 1.0).numpy(), [np.nan, -1.0, 0.25, 1.0])
    np.testing.assert_array_equal(t.clamp(min=0.0).numpy(), [np.nan, 0.0, 0.25, 3.0])
    np.testing.assert_array_equal(t.clamp(max=0.0).numpy(), [np.nan, -3.0, 0.0, 0.0])


@pytest.mark.parametrize("op", ["sigmoid", "tanh"])
def test_activation_backward_runs_on_0d_values(op):
    # y = act(p) for a 0-d parameter; d/dp = sigmoid(p)(1 - sigmoid(p)) or 1 - tanh(p)^2
    class Scalar(nn.Module):
        def __init__(self):
            super().__init__()
            self.p = nn.Parameter(gc.tensor(np.float32(0.3)))

        def forward(self, x):
            return getattr(self.p, op)() * x.sum()

    model = Scalar()
    x = np.ones((2, 1), np.float32)
    graph, _ = trace_model(model, (x,), root=model)
    graph, grads = autodiff(graph, graph.outputs[0], ["p"])
    graph.outputs = [grads["p"]]
    got = Plan(graph, {"p": model.p.data}, seed=0)(x)
    y = sigmoid64(0.3) if op == "sigmoid" else np.tanh(0.3)
    want = 2 * (y * (1 - y) if op == "sigmoid" else 1 - y * y)
    assert got.shape == () and got == pytest.approx(want, rel=1e-6)


# ---- float16: eager only; compiled plans refuse it clearly (no raw KeyError) -------------------------
def half_net():
    return nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.BatchNorm2d(2), nn.ReLU(), nn.Flatten(),
                         nn.Linear(2 * 4 * 4, 3))


def test_float16_training_compile_is_refused_naming_the_input():
    model = half_net().to(gc.float16)
    x, y = np.zeros((4, 1, 4, 4), np.float16), np.zeros(4, np.int64)
    with pytest.raises(gc.GraphcError, match=r"input 'x' is f16\[N,1,4,4\]: float16 runs in eager tensors only"):
        gc.compile(model, (x, y), loss_fn=nn.CrossEntropyLoss(), optimizer=gc.optim.Adam(model.parameters()))


def test_float16_parameters_and_casts_are_refused():
    class HalfBuffer(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("scale", gc.tensor(np.ones(3, np.float16)))

        def forward(self, x):
            return x * 2

    with pytest.raises(gc.GraphcError, match=r"parameter or buffer 'scale' is f16\[3\]"):
        gc.compile(HalfBuffer(), (np.zeros((2, 3), np.float32),))

    class Halves(nn.Module):
        def forward(self, x):
            return x.cast(gc.float16)

    with pytest.raises(gc.GraphcError, match=r"cast makes a float16 value.*test_numerics.py:\d+"):
        gc.compile(Halves(), (np.zeros((2, 3), np.float32),))


def test_float16_export_is_a_graphc_error(tmp_path):
    with pytest.raises(gc.GraphcError, match="float16"):
        gc.export(half_net().to(gc.float16), (np.zeros((2, 1, 4, 4), np.float16),), tmp_path / "m.graphc")
    assert not (tmp_path / "m.graphc").exists()


def test_saving_an_unsupported_dtype_is_a_graphc_error(tmp_path):
    plan = gc.compile(nn.Linear(3, 2).eval(), (np.zeros((2, 3), np.float32),))
    plan.state["weight"] = plan.state["weight"].astype(np.float16)  # only reachable by hand
    with pytest.raises(gc.GraphcError, match=r"cannot save tensor 'weight': it holds float16\[2, 3\] but the graph "
                                             r"says f32\[2,3\]"):
        plan.save(tmp_path / "m.graphc")


def test_float16_still_works_eagerly():
    t = gc.tensor(np.array([1.5, -2.0], np.float16))
    assert (t * 2).dtype is gc.float16 and (t * 2).numpy().tolist() == [3.0, -4.0]
