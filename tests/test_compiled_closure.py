"""A compiled function that calls ``backward()`` without an optimizer step (an L-BFGS closure):
the plan returns what the function returns and puts the gradients on the parameters' ``.grad``
as the eager ``backward()`` would: replacing them when the function zeroed or cleared them,
adding to the caller's otherwise. Each case runs the same function eagerly and compiled from
the same start and compares the ``.grad`` arrays (float64: the same ops, so 1e-12 relative).
"""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc import nn
from graphc.errors import PlanFormatError
from plan_edit import rewrite_body

RTOL = 1e-12


def make_model():
    gc.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)).double()


def batch():
    rng = np.random.default_rng(0)
    return gc.tensor(rng.normal(size=(6, 3))), gc.tensor(rng.normal(size=(6, 1)))


def grads_of(model):
    return [None if p.grad is None else p.grad.numpy().copy() for p in model.parameters()]


def assert_same_grads(got, want):
    assert [g is None for g in got] == [w is None for w in want]
    for g, w in zip(got, want):
        if w is not None:
            np.testing.assert_allclose(g, w, rtol=RTOL, atol=0)


def closure_for(model, x, y, reset):
    def closure():
        if reset == "none":
            model.zero_grad()
        elif reset == "zeros":
            model.zero_grad(set_to_none=False)
        elif reset == "assign":
            for p in model.parameters():
                p.grad = None
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        return loss
    return closure


@pytest.mark.parametrize("reset", ["none", "zeros", "assign", "keep"])
def test_gradients_land_on_the_parameters_as_eagerly(reset):
    x, y = batch()
    eager_model, compiled_model = make_model(), make_model()
    eager = closure_for(eager_model, x, y, reset)
    compiled = gc.compile(closure_for(compiled_model, x, y, reset), ())
    assert [v for v in compiled.output_names] == ["output"] + [f"grad.{n}" for n, _ in
                                                               compiled_model.named_parameters()]
    for model in (eager_model, compiled_model):  # a gradient left over from before
        for p in model.parameters():
            p.grad = gc.tensor(np.full(p.shape, 0.5))
    for _ in range(2):  # "keep" accumulates call after call, as backward() does
        loss_e, loss_c = eager(), compiled()
        assert float(loss_c) == pytest.approx(float(loss_e.numpy()), rel=RTOL)
        assert_same_grads(grads_of(compiled_model), grads_of(eager_model))
    if reset == "keep":  # the leftover 0.5 and two calls' gradients
        first = grads_of(compiled_model)[0]
        assert not np.allclose(first, 0.5)


def test_the_plan_reads_parameters_changed_between_calls():
    """L-BFGS moves the parameters in place between closure calls: each call sees them."""
    x, y = batch()
    eager_model, compiled_model = make_model(), make_model()
    eager = closure_for(eager_model, x, y, "none")
    compiled = gc.compile(closure_for(compiled_model, x, y, "none"), ())
    for step in range(3):
        loss_e, loss_c = eager(), compiled()
        assert float(loss_c) == pytest.approx(float(loss_e.numpy()), rel=RTOL)
        assert_same_grads(grads_of(compiled_model), grads_of(eager_model))
        for model in (eager_model, compiled_model):
            with gc.no_grad():
                for p in model.parameters():
                    p.sub_(0.1 * p.grad)


def test_gradients_of_frozen_or_unused_parameters_are_left_alone():
    x, y = batch()
    model = make_model()
    model[0].weight.requires_grad_(False)
    extra = nn.Linear(2, 2).double()  # seen by the function but not by the loss
    holder = nn.ModuleList([model, extra])

    def closure():
        holder.zero_grad()
        loss = ((holder[0](x) - y) ** 2).mean()
        loss.backward()
        return loss
    compiled = gc.compile(closure, ())
    compiled()
    assert model[0].weight.grad is None and extra.weight.grad is None
    assert model[0].bias.grad is not None and model[2].weight.grad is not None


def test_a_saved_plan_keeps_its_gradients_apart(tmp_path):
    """Without the model, a loaded plan returns the function's outputs and keeps the
    gradients in ``plan.gradients`` (by state name)."""
    x, y = batch()
    model = make_model()
    compiled = gc.compile(closure_for(model, x, y, "none"), ())
    loss = compiled()
    compiled.save(tmp_path / "closure.graphc")
    loaded = gc.load(tmp_path / "closure.graphc")
    again = loaded()
    assert np.asarray(again).shape == () and float(again) == pytest.approx(float(loss), rel=RTOL)
    assert sorted(loaded.gradients) == sorted(compiled.gradients)
    for name, grad in compiled.gradients.items():
        np.testing.assert_allclose(loaded.gradients[name], grad, rtol=RTOL, atol=0)


@pytest.mark.parametrize("bad", [[{"param": 3, "accumulates": True}], "all", [{"param": "w"}],
                                 [{"param": "w", "accumulates": True}] * 40])
def test_a_file_whose_gradients_entry_is_wrong_is_refused(tmp_path, bad):
    x, y = batch()
    compiled = gc.compile(closure_for(make_model(), x, y, "none"), ())
    path = tmp_path / "closure.graphc"
    compiled.save(path)

    def edit(body):
        body["graph"]["meta"]["gradients"] = bad
    rewrite_body(path, edit)
    with pytest.raises(PlanFormatError, match="gradients"):
        gc.load(path)
