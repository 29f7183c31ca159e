"""Scheduler and optimizer state: state_dict()/load_state_dict() as in PyTorch, and training
plans that save the schedule so a resumed run continues it exactly (plan file format 1.1)."""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc import nn, optim
from graphc.optim import lr_scheduler
from plan_edit import rewrite_body

RNG = np.random.default_rng(7)
X = RNG.standard_normal((8, 3)).astype(np.float32)
Y = RNG.integers(0, 2, 8).astype(np.int64)

SCHEDULES = {
    "step": lambda opt: lr_scheduler.StepLR(opt, step_size=2, gamma=0.5),
    "exponential": lambda opt: lr_scheduler.ExponentialLR(opt, gamma=0.7),
    "cosine": lambda opt: lr_scheduler.CosineAnnealingLR(opt, T_max=6, eta_min=0.01),
}


def setup(schedule="cosine", momentum=0.9):
    gc.manual_seed(0)
    model = nn.Linear(3, 2)
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=momentum)
    sched = SCHEDULES[schedule](opt)
    step = gc.compile(model, example_inputs=(X, Y), loss_fn=nn.CrossEntropyLoss(), optimizer=opt)
    return model, opt, sched, step


def lrs_after(sched, owner, steps=3):
    out = []
    for _ in range(steps):
        sched.step()
        out.append(owner.param_groups[0]["lr"])
    return out


@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
def test_saved_training_plan_resumes_the_schedule_exactly(schedule, tmp_path):
    _, opt, sched, step = setup(schedule)
    for _ in range(3):
        step(X, Y)
        sched.step()
    step.save(tmp_path / "t.graphc")
    plan = gc.load(tmp_path / "t.graphc")
    assert plan.param_groups[0]["lr"] == opt.param_groups[0]["lr"]
    assert plan.param_groups[0]["initial_lr"] == 0.1
    [resumed] = plan.lr_schedulers
    assert type(resumed) is type(sched) and resumed.optimizer is plan
    want = lrs_after(sched, opt)
    assert lrs_after(resumed, plan) == want  # was [0.025, 0.0125, 0.0033] vs [0.05, 0.025, 0.0067]
    for _ in range(2):  # and the resumed plan trains like the original with the same lr
        np.testing.assert_array_equal(plan(X, Y), step(X, Y))


@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
def test_scheduler_state_dict_round_trips(schedule):
    _, opt, sched, _ = setup(schedule)
    for _ in range(4):
        sched.step()
    state = sched.state_dict()
    _, opt2, fresh, _ = setup(schedule)
    fresh.load_state_dict(state)
    for group in opt2.param_groups:
        group["lr"] = opt.param_groups[0]["lr"]
    assert lrs_after(fresh, opt2) == lrs_after(sched, opt)
    state["last_epoch"] = 0  # a copy: editing it does not move the scheduler
    assert sched.last_epoch == 7


def test_scheduler_load_state_dict_refuses_wrong_keys():
    _, _, sched, _ = setup("step")
    with pytest.raises(gc.GraphcError, match="expected keys"):
        sched.load_state_dict({"last_epoch": 3})


def test_optimizer_state_dict_has_pytorch_layout_and_plan_state():
    _, opt, _, step = setup()
    step(X, Y)
    sd = opt.state_dict()
    assert sd["param_groups"][0]["params"] == [0, 1] and sd["param_groups"][0]["momentum"] == 0.9
    assert set(sd["state"]) == {0, 1} and sd["state"][0]["step"] == 1.0
    np.testing.assert_array_equal(sd["state"][0]["momentum_buffer"], step.state["optim.weight.momentum_buffer"])


def test_optimizer_load_state_dict_continues_training_exactly():
    model, opt, sched, step = setup()
    for _ in range(2):
        step(X, Y)
        sched.step()
    weights, opt_state = {k: v.copy() for k, v in model.state_dict().items()}, opt.state_dict()
    model2, opt2, _, step2 = setup()
    model2.load_state_dict(weights)
    opt2.load_state_dict(opt_state)
    assert opt2.param_groups[0]["lr"] == opt.param_groups[0]["lr"]
    for _ in range(2):
        np.testing.assert_array_equal(step2(X, Y), step(X, Y))


def test_optimizer_load_state_dict_refuses_compiled_hyper_parameter_changes():
    _, opt, _, _ = setup()
    sd = opt.state_dict()
    sd["param_groups"][0]["momentum"] = 0.5
    with pytest.raises(gc.GraphcError, match="only the learning rate"):
        opt.load_state_dict(sd)


def test_finished_schedule_is_reported():
    _, _, sched, _ = setup("cosine")
    for _ in range(6):
        sched.step()
    assert sched.finished() and "schedule finished" in sched.describe()


def _rewrite_schedulers(path, edit):
    """Re-pack a saved plan with its lr_schedulers edited (and a fresh checksum)."""
    rewrite_body(path, lambda body: edit(body["lr_schedulers"]))


@pytest.mark.parametrize("edit, message", [
    (lambda s: s[0].update(type="os.system"), "unknown learning-rate scheduler"),
    (lambda s: s[0]["state"].update(T_max="6"), "must be a number"),
    (lambda s: s[0]["state"].pop("T_max"), "expected keys"),
    (lambda s: s[0]["state"].update(base_lrs=[0.1, 0.1]), "parameter groups"),
    (lambda s: s.extend([s[0]] * 20), "at most"),
])
def test_hostile_scheduler_entries_are_refused(tmp_path, edit, message):
    _, _, _, step = setup("cosine")
    path = tmp_path / "t.graphc"
    step.save(path)
    _rewrite_schedulers(path, edit)
    with pytest.raises(gc.PlanFormatError, match=message):
        gc.load(path)


def test_inspect_says_where_the_schedule_stands(tmp_path):
    from graphc.apps.describe import describe_plan

    _, _, sched, step = setup("cosine")
    for _ in range(6):
        sched.step()
    step.save(tmp_path / "t.graphc")
    text = describe_plan(gc.load(tmp_path / "t.graphc"))
    assert "lr scheduler: CosineAnnealingLR(T_max=6, eta_min=0.01): 6 step(s) taken (schedule finished), lr 0.01" \
        in text
    model = nn.Linear(3, 2)
    plain = gc.compile(model, (X, Y), loss_fn=nn.CrossEntropyLoss(), optimizer=optim.SGD(model.parameters(), lr=0.1))
    plain.save(tmp_path / "p.graphc")
    assert "lr scheduler: none saved" in describe_plan(gc.load(tmp_path / "p.graphc"))
