"""Learning-rate schedulers against PyTorch 2.13, and saved training plans that resume them.

Every scheduler's lr sequence (two parameter groups, 30 steps) must equal torch's to float64
rounding: the formulas are PyTorch's, evaluated in the same order. torch's sequences come
through the ``torch_ref`` fixture (live with torch installed, else the recording in
tests/data/torch_test_schedulers_torch.npz). Scheduler specs are data (class name, kwargs;
LambdaLR functions by name in ``LAMBDAS``) so the recording is fingerprinted by them.
"""
from __future__ import annotations


import msgpack
import numpy as np
import pytest

import graphc as gc
from graphc import nn, optim
from graphc.optim import lr_scheduler as S
from plan_edit import rewrite_body

STEPS = 30
RTOL = 1e-13  # the same float64 formulas: equal up to libm's last bit on another machine
# atol=0 below: learning rates are Python float64 scalars from the same formulas (no float32, no
# BLAS), and a schedule that reaches 0 reaches it exactly on both sides.
LAMBDAS = {
    "warmup_then_decay": lambda epoch: min(1.0, (epoch + 1) / 5) * 0.95 ** epoch,
    "sawtooth": lambda epoch: 1.0 / (1 + epoch % 4),
}
# metrics for ReduceLROnPlateau: improves, stalls, improves slightly (under the threshold), ...
METRICS = [1.0, 0.9, 0.95, 0.95, 0.96, 0.97, 0.8, 0.79999, 0.82, 0.83, 0.84, 0.85, 0.6, 0.61, 0.62] * 2

SCHEDULES = {
    "MultiStepLR": ("MultiStepLR", {"milestones": [3, 7, 7, 12], "gamma": 0.5}),
    "LinearLR": ("LinearLR", {"start_factor": 0.25, "end_factor": 0.9, "total_iters": 8}),
    "ConstantLR": ("ConstantLR", {"factor": 0.3, "total_iters": 6}),
    "OneCycleLR": ("OneCycleLR", {"max_lr": [0.5, 0.2], "total_steps": 30, "cycle_momentum": False}),
    "OneCycleLR_three_phase_linear": ("OneCycleLR", {
        "max_lr": 0.5, "epochs": 3, "steps_per_epoch": 10, "pct_start": 0.25, "anneal_strategy": "linear",
        "three_phase": True, "div_factor": 10.0, "final_div_factor": 100.0, "cycle_momentum": False}),
    "LambdaLR": ("LambdaLR", {"lr_lambda": "warmup_then_decay"}),
    "LambdaLR_per_group": ("LambdaLR", {"lr_lambda": ["warmup_then_decay", "sawtooth"]}),
    "SequentialLR": ("SequentialLR", {"schedulers": [
        ("LinearLR", {"start_factor": 0.1, "total_iters": 5}),
        ("CosineAnnealingLR", {"T_max": 10, "eta_min": 0.01}),
        ("ExponentialLR", {"gamma": 0.9})], "milestones": [5, 15]}),
    "SequentialLR_mixed": ("SequentialLR", {"schedulers": [
        ("ConstantLR", {"factor": 0.5, "total_iters": 3}),
        ("MultiStepLR", {"milestones": [2, 4]}),
        ("CosineAnnealingWarmRestarts", {"T_0": 3}),
        ("LambdaLR", {"lr_lambda": "sawtooth"})], "milestones": [4, 10, 20]}),
    "CosineAnnealingWarmRestarts": ("CosineAnnealingWarmRestarts", {"T_0": 3, "T_mult": 2, "eta_min": 0.001}),
    "CosineAnnealingWarmRestarts_T_mult_1": ("CosineAnnealingWarmRestarts", {"T_0": 4}),
    "ReduceLROnPlateau": ("ReduceLROnPlateau", {"patience": 2, "factor": 0.5, "cooldown": 1,
                                                "min_lr": [0.001, 0.01]}),
    "ReduceLROnPlateau_max_abs": ("ReduceLROnPlateau", {"mode": "max", "threshold_mode": "abs",
                                                        "threshold": 0.05, "patience": 1}),
    "ReduceLROnPlateau_min_abs_eps": ("ReduceLROnPlateau", {"threshold_mode": "abs", "patience": 0,
                                                            "factor": 0.9, "min_lr": 0.085, "eps": 1e-3}),
    # the ones that were there before, now with PyTorch 2.13's _is_initial rules
    "StepLR": ("StepLR", {"step_size": 4, "gamma": 0.5}),
    "ExponentialLR": ("ExponentialLR", {"gamma": 0.9}),
    "CosineAnnealingLR": ("CosineAnnealingLR", {"T_max": 7, "eta_min": 0.01}),
}


def build(lib, spec, opt):
    """A scheduler from its spec, with graphc's lr_scheduler module or torch's."""
    name, kwargs = spec
    kwargs = dict(kwargs)
    if name == "SequentialLR":
        kwargs["schedulers"] = [build(lib, child, opt) for child in kwargs["schedulers"]]
    if name == "LambdaLR":
        fn = kwargs["lr_lambda"]
        kwargs["lr_lambda"] = [LAMBDAS[f] for f in fn] if isinstance(fn, list) else LAMBDAS[fn]
    return getattr(lib, name)(opt, **kwargs)


def two_groups(lib, params):
    """SGD over two groups with their own lr (0.1 and 0.05), as graphc or torch builds it."""
    return lib.SGD([{"params": [params[0]]}, {"params": [params[1]], "lr": 0.05}], lr=0.1)


def advance(sched, spec, epoch: int) -> None:
    if spec[0] == "ReduceLROnPlateau":
        sched.step(METRICS[epoch])
    else:
        sched.step()


def lr_sequence(lib, opt, spec, steps=STEPS) -> np.ndarray:
    """(steps + 1) x groups: the lr each step trains with, then get_last_lr() at the end."""
    sched = build(lib, spec, opt)
    lrs = []
    for epoch in range(steps):
        lrs.append([g["lr"] for g in opt.param_groups])
        advance(sched, spec, epoch)
    return np.array(lrs + [sched.get_last_lr()], np.float64)


def torch_lrs(spec, steps=STEPS) -> dict:
    import warnings

    import torch

    params = [torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(2))]
    with warnings.catch_warnings():  # "lr_scheduler.step() before optimizer.step()": no training here
        warnings.simplefilter("ignore")
        return {"lrs": lr_sequence(torch.optim.lr_scheduler, two_groups(torch.optim, params), spec, steps)}


def graphc_opt():
    model = nn.Linear(2, 2)
    return two_groups(optim, [model.weight, model.bias])


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_lr_sequence_matches_torch(name, torch_ref):
    spec = SCHEDULES[name]
    ref = torch_ref([spec, METRICS, STEPS], lambda: torch_lrs(spec))
    got = lr_sequence(S, graphc_opt(), spec)
    np.testing.assert_allclose(got, ref["lrs"], rtol=RTOL, atol=0, err_msg=f"{name}: lr sequence differs")
    assert len(np.unique(got[:, 0])) > 1, "the schedule should change the lr"


CLOSED_FORM = ["MultiStepLR", "LinearLR", "ConstantLR", "StepLR", "ExponentialLR", "CosineAnnealingLR"]
EPOCHS = [1, 2, 5, 3, 9, 12, 7, 20, 29]


@pytest.mark.parametrize("name", CLOSED_FORM)
def test_step_with_epoch_uses_torchs_closed_form(name, torch_ref):
    """``step(epoch)`` (deprecated in PyTorch, still used) jumps by the closed form."""
    spec = SCHEDULES[name]

    def run(lib, opt):
        sched = build(lib, spec, opt)
        out = []
        for epoch in EPOCHS:
            sched.step(epoch)
            out.append(sched.get_last_lr())
        return np.array(out)

    def torch_side():
        import warnings

        import torch

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            params = [torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(2))]
            return {"lrs": run(torch.optim.lr_scheduler, two_groups(torch.optim, params))}

    ref = torch_ref([spec, EPOCHS], torch_side)
    np.testing.assert_allclose(run(S, graphc_opt()), ref["lrs"], rtol=RTOL, atol=0)


def test_warm_restarts_with_fractional_epochs_match_torch(torch_ref):
    """The documented idiom ``scheduler.step(epoch + i / iters)`` inside an epoch loop."""
    spec, iters = SCHEDULES["CosineAnnealingWarmRestarts"], 4

    def run(lib, opt):
        sched, out = build(lib, spec, opt), []
        for epoch in range(8):
            for i in range(iters):
                sched.step(epoch + i / iters)
                out.append(sched.get_last_lr())
        return np.array(out)

    def torch_side():
        import torch

        params = [torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(2))]
        return {"lrs": run(torch.optim.lr_scheduler, two_groups(torch.optim, params))}

    ref = torch_ref([spec, iters], torch_side)
    np.testing.assert_allclose(run(S, graphc_opt()), ref["lrs"], rtol=RTOL, atol=0)


# ---- state_dict and saved training plans ------------------------------------------------------------------
RNG = np.random.default_rng(7)
X = RNG.standard_normal((8, 3)).astype(np.float32)
Y = RNG.integers(0, 2, 8).astype(np.int64)
SAVEABLE = [n for n in SCHEDULES if n not in ("StepLR", "ExponentialLR", "CosineAnnealingLR")]


def training_setup(name):
    gc.manual_seed(0)
    model = nn.Linear(3, 2)
    opt = optim.SGD([{"params": [model.weight]}, {"params": [model.bias], "lr": 0.05}], lr=0.1, momentum=0.9)
    sched = build(S, SCHEDULES[name], opt)
    step = gc.compile(model, example_inputs=(X, Y), loss_fn=nn.CrossEntropyLoss(), optimizer=opt)
    return opt, sched, step


def continue_schedule(sched, owner, name, start, steps=8):
    out = []
    for epoch in range(start, start + steps):
        advance(sched, SCHEDULES[name], epoch)
        out.append([g["lr"] for g in owner.param_groups])
    return out


def lambdas_of(spec) -> list:
    """The functions of a LambdaLR spec, one per parameter group."""
    fn = spec[1]["lr_lambda"]
    return [LAMBDAS[f] for f in fn] if isinstance(fn, list) else [LAMBDAS[fn]] * 2


@pytest.mark.parametrize("name", SAVEABLE)
def test_saved_training_plan_resumes_the_schedule(name, tmp_path):
    opt, sched, step = training_setup(name)
    for epoch in range(9):
        step(X, Y)
        advance(sched, SCHEDULES[name], epoch)
    step.save(tmp_path / "t.graphc")
    plan = gc.load(tmp_path / "t.graphc")
    [resumed] = plan.lr_schedulers  # SequentialLR's children are saved inside it, not beside it
    assert type(resumed) is type(sched) and resumed.optimizer is plan
    assert [g["lr"] for g in plan.param_groups] == [g["lr"] for g in opt.param_groups]
    if "LambdaLR" in name:
        _lambda_resume(name, sched, resumed, opt, plan)
    else:
        assert continue_schedule(resumed, plan, name, 9) == continue_schedule(sched, opt, name, 9)
    for _ in range(2):  # and the resumed plan trains like the original with the same lr
        np.testing.assert_array_equal(plan(X, Y), step(X, Y))


def _lambda_resume(name, sched, resumed, opt, plan):
    """A LambdaLR's function is not in the file: stepping into it is refused (changing nothing)
    until the function is given back; then the schedule continues exactly."""
    start, spec, lambda_sched = 9, SCHEDULES[name], resumed
    if name.startswith("SequentialLR"):  # its LambdaLR starts at milestone 20: the steps before it work
        assert continue_schedule(resumed, plan, name, 9, 10) == continue_schedule(sched, opt, name, 9, 10)
        start, spec, lambda_sched = 19, spec[1]["schedulers"][-1], resumed._schedulers[-1]
    before = resumed.state_dict()
    with pytest.raises(gc.GraphcError, match="set sched.lr_lambdas"):
        advance(resumed, SCHEDULES[name], start)
    assert resumed.state_dict() == before, "a refused step must change nothing"
    lambda_sched.lr_lambdas = lambdas_of(spec)
    assert continue_schedule(resumed, plan, name, start) == continue_schedule(sched, opt, name, start)


@pytest.mark.parametrize("name", SAVEABLE)
def test_state_dict_round_trips_in_memory(name):
    opt, sched, _ = training_setup(name)
    for epoch in range(11):
        advance(sched, SCHEDULES[name], epoch)
    state = sched.state_dict()
    opt2, fresh, _ = training_setup(name)
    fresh.load_state_dict(state)
    for mine, theirs in zip(opt2.param_groups, opt.param_groups):
        mine["lr"] = theirs["lr"]
    assert continue_schedule(fresh, opt2, name, 11) == continue_schedule(sched, opt, name, 11)
    assert msgpack.unpackb(msgpack.packb(state)) == state, "state_dict() must be plain data"


def test_sequential_children_are_not_saved_twice():
    opt, sched, step = training_setup("SequentialLR")
    assert step.lr_schedulers == [sched] and opt.lr_schedulers == [sched]
    assert sorted(k for k in sched.state_dict() if k.startswith("1.")) == [
        "1.T_max", "1._last_lr", "1._step_count", "1.base_lrs", "1.eta_min", "1.last_epoch"]


def test_inspect_describes_the_new_schedulers(tmp_path):
    from graphc.apps.describe import describe_plan

    for name, expected in [
        ("ReduceLROnPlateau", "ReduceLROnPlateau(mode=min, factor=0.5, patience=2"),
        ("OneCycleLR", "OneCycleLR(total_steps=30, pct_start=0.3, anneal_strategy=cos"),
        ("LambdaLR", "lr_lambda not saved: set .lr_lambdas to continue"),
        ("SequentialLR", "SequentialLR(milestones=[5, 15]): 0 step(s) taken, lr 0.01, 0.005 [LinearLR("),
    ]:
        _, _, step = training_setup(name)
        step.save(tmp_path / f"{name}.graphc")
        assert expected in describe_plan(gc.load(tmp_path / f"{name}.graphc")), name


# ---- refusals --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("make, message", [
    (lambda o: S.OneCycleLR(o, max_lr=1.0, total_steps=10), r"cycle_momentum=True\) is not supported"),
    (lambda o: S.OneCycleLR(o, max_lr=1.0, cycle_momentum=False), "total_steps OR"),
    (lambda o: S.OneCycleLR(o, max_lr=1.0, total_steps=10, pct_start=1, cycle_momentum=False), "pct_start"),
    (lambda o: S.OneCycleLR(o, max_lr=1.0, total_steps=10, anneal_strategy="exp", cycle_momentum=False),
     "anneal_strategy"),
    (lambda o: S.OneCycleLR(o, max_lr=[1.0], total_steps=10, cycle_momentum=False), "same length"),
    (lambda o: S.LinearLR(o, start_factor=0), "Starting multiplicative factor"),
    (lambda o: S.ConstantLR(o, factor=2), "between 0 and 1"),
    (lambda o: S.CosineAnnealingWarmRestarts(o, T_0=0), "positive integer T_0"),
    (lambda o: S.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=0), "T_mult >= 1"),
    (lambda o: S.ReduceLROnPlateau(o, factor=1.0), "Factor should be < 1.0"),
    (lambda o: S.ReduceLROnPlateau(o, mode="up"), "mode up is unknown"),
    (lambda o: S.ReduceLROnPlateau(o, min_lr=[0.1]), "min_lr must have the same length"),
    (lambda o: S.LambdaLR(o, [LAMBDAS["sawtooth"]]), "Expected 2 lr_lambdas"),
    (lambda o: S.SequentialLR(o, [], []), "at least one scheduler"),
    (lambda o: S.SequentialLR(o, [S.StepLR(o, 2)], [3]), "one more than the number of milestone"),
    (lambda o: S.SequentialLR(o, [S.StepLR(o, 2), S.ReduceLROnPlateau(o)], [3]), "ReduceLROnPlateau"),
    (lambda o: S.SequentialLR(o, [S.StepLR(o, 2), S.SequentialLR(o, [S.StepLR(o, 3)], [])], [3]),
     "SequentialLR inside it"),
    (lambda o: S.SequentialLR(o, [S.StepLR(graphc_opt(), 2)], []), "same optimizer"),
])
def test_invalid_schedulers_are_refused(make, message):
    with pytest.raises(gc.GraphcError, match=message):
        make(graphc_opt())


def test_one_cycle_refuses_steps_past_the_end():
    sched = S.OneCycleLR(graphc_opt(), max_lr=1.0, total_steps=3, cycle_momentum=False)
    for _ in range(3):
        sched.step()
    with pytest.raises(gc.GraphcError, match="Tried to step 4 times"):
        sched.step()


def _rewrite_schedulers(path, edit):
    """Re-pack a saved plan with its lr_schedulers edited (and a fresh checksum)."""
    rewrite_body(path, lambda body: edit(body["lr_schedulers"]))


@pytest.mark.parametrize("name, edit, message", [
    ("ReduceLROnPlateau", lambda s: s[0]["state"].update(mode=2), "index into"),
    ("OneCycleLR", lambda s: s[0]["state"].update(three_phase=7), "index into"),
    ("OneCycleLR", lambda s: s[0]["state"].update(max_lrs=[1.0]), "parameter groups"),
    ("MultiStepLR", lambda s: s[0]["state"].update(milestones=[1.5]), "list of integers"),
    ("SequentialLR", lambda s: s[0]["state"].update(_schedulers=[0, 99, 1]), "type numbers"),
    ("SequentialLR", lambda s: s[0]["state"].update({"7.gamma": 0.5}), "for no child"),
    ("SequentialLR", lambda s: s[0]["state"].pop("1.T_max"), "expected keys"),
    ("SequentialLR", lambda s: s[0]["state"].update({"0.base_lrs": [0.1]}), "parameter groups"),
])
def test_hostile_scheduler_entries_are_refused(tmp_path, name, edit, message):
    _, _, step = training_setup(name)
    path = tmp_path / "t.graphc"
    step.save(path)
    _rewrite_schedulers(path, edit)
    with pytest.raises(gc.PlanFormatError, match=message):
        gc.load(path)
