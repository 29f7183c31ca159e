"""Non-finite training steps: gc.NonFiniteError names the step and leaves every piece of state
exactly as it was; gc.debug.find_nonfinite names the first node that made a NaN or inf."""
from __future__ import annotations

import math

import numpy as np
import pytest

import graphc as gc
from graphc import nn, optim

RNG = np.random.default_rng(3)
X = RNG.random((6, 1, 4, 4)).astype(np.float32)
Y = RNG.integers(0, 3, 6)


def cnn():
    return nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.BatchNorm2d(2), nn.ReLU(), nn.Flatten(),
                         nn.Dropout(0.3), nn.Linear(2 * 4 * 4, 3))


class Head(nn.Module):
    """fc -> (a user-chosen expression) -> out: log(relu(h)), h / (h - h), sqrt(relu(h))."""

    def __init__(self, expr):
        super().__init__()
        self.fc, self.out, self.expr = nn.Linear(16, 8), nn.Linear(8, 3), expr

    def forward(self, x):
        h = self.fc(x.flatten(1))
        return self.out(self.expr(h))


def compile_step(model, check_finite=True, opt=None):
    gc.manual_seed(0)
    opt = opt or optim.Adam(model.parameters(), lr=1e-2)
    return gc.compile(model, (X, Y), loss_fn=nn.CrossEntropyLoss(), optimizer=opt, check_finite=check_finite)


def snapshot(step):
    return {k: np.array(v, copy=True) for k, v in step.state.items()}, step.rng.bit_generator.state


def assert_unchanged(step, before):
    arrays, rng = before
    for name, value in step.state.items():
        np.testing.assert_array_equal(value, arrays[name], err_msg=name)
    assert step.rng.bit_generator.state == rng


def nan_weight(model):
    model[0].weight.data[0, 0, 0, 0] = np.nan


def cases():
    inf_pixel = X.copy()
    inf_pixel[2, 0, 1, 1] = np.inf
    return {
        "nan conv weight": (cnn, nan_weight, X, "the loss is not finite"),
        "inf input pixel": (cnn, None, inf_pixel, "the loss is not finite"),
        "log(relu(h))": (lambda: Head(lambda h: h.relu().log()), None, X, "the loss is not finite"),
        "h/(h-h)": (lambda: Head(lambda h: h / (h - h)), None, X, "the loss is not finite"),
        "sqrt(relu(h)) backward": (lambda: Head(lambda h: h.relu().sqrt()), None, X,
                                   "the gradient of fc.weight is not finite"),
    }


@pytest.mark.parametrize("case", sorted(cases()))
def test_non_finite_step_raises_and_changes_nothing(case):
    make, spoil, x, message = cases()[case]
    model = make()
    step = compile_step(model)
    healthy_first = isinstance(model, nn.Sequential)  # the Head expressions fail from the first step
    if healthy_first:
        step(X, Y)  # one good step: optimizer state and BN statistics are non-trivial now
    if spoil:
        spoil(model)
    before = snapshot(step)
    number = 2 if healthy_first else 1
    with pytest.raises(gc.NonFiniteError, match=rf"training step {number}: {message}.*unchanged"):
        step(x, Y)
    assert_unchanged(step, before)
    assert step.step_count == number - 1


def test_nan_learning_rate_is_refused_before_the_step():
    model = cnn()
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    step = compile_step(model, opt=opt)
    step(X, Y)
    before = snapshot(step)
    opt.param_groups[0]["lr"] = math.nan  # a scheduler or a direct edit gone wrong
    with pytest.raises(gc.NonFiniteError, match=r"training step 2: the learning rate of parameter group 0 is nan"):
        step(X, Y)
    assert_unchanged(step, before)


def test_check_finite_false_turns_the_guard_off():
    model = cnn()
    step = compile_step(model, check_finite=False)
    assert "assert_finite" not in [n.op for n in step.graph.nodes]
    nan_weight(model)
    assert np.isnan(step(X, Y))  # no error: the user asked for no check
    assert np.isnan(model[5].weight.numpy()).all()


def test_guard_sits_after_the_backward_and_before_every_update():
    step = compile_step(cnn())
    ops = [n.op for n in step.graph.nodes]
    guard = ops.index("assert_finite")
    phases = [n.meta.get("phase") for n in step.graph.nodes]
    assert "backward" not in phases[guard + 1:] and "update" not in phases[:guard]
    assert "= assert_finite[names=['the loss', 'the gradient of 0.weight'" in str(step.graph)


def test_refused_step_then_good_steps_and_save(tmp_path):
    model = cnn()
    step = compile_step(model)
    bad = X.copy()
    bad[0, 0, 0, 0] = np.nan
    with pytest.raises(gc.NonFiniteError):
        step(bad, Y)
    losses = [float(step(X, Y)) for _ in range(3)]
    assert all(np.isfinite(losses)) and step.step_count == 3
    step.save(tmp_path / "t.graphc")
    loaded = gc.load(tmp_path / "t.graphc")
    with pytest.raises(gc.NonFiniteError, match="training step 4"):  # the guard is in the file too
        loaded(bad, Y)


# ---- find_nonfinite ---------------------------------------------------------------------------
@pytest.mark.parametrize("case, op, phase", [
    ("nan conv weight", "conv_bn_train", "forward"), ("inf input pixel", "conv_bn_train", "forward"),
    ("log(relu(h))", "log", "forward"), ("h/(h-h)", "div", "forward"),
])
def test_find_nonfinite_names_the_first_forward_node(case, op, phase):
    make, spoil, x, _ = cases()[case]
    model = make()
    step = compile_step(model)
    if spoil:
        spoil(model)
    before = snapshot(step)
    found = gc.debug.find_nonfinite(step, x, Y)
    assert (found.op, found.phase) == (op, phase)
    assert found.source and found.source.startswith("test_nonfinite.py:")
    assert_unchanged(step, before)  # it ran on copies


def test_find_nonfinite_names_a_backward_node_and_its_forward_node():
    step = compile_step(Head(lambda h: h.relu().sqrt()))
    found = gc.debug.find_nonfinite(step, X, Y)
    assert found.phase == "backward" and found.inf > 0
    assert "(sqrt) at" in found.grad_of and "test_nonfinite.py:" in found.grad_of
    assert "backward node" in str(found) and "it is the gradient of" in str(found)


def test_find_nonfinite_on_a_healthy_step_is_none():
    assert gc.debug.find_nonfinite(compile_step(cnn()), X, Y) is None
