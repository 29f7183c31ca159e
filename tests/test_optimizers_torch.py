"""Adadelta, RMSprop and Adagrad against PyTorch: training runs, state_dict layout, resuming.

Each optimizer setting trains an MLP and a small CNN with BatchNorm for ``STEPS`` steps through
``gc.compile(..., loss_fn, optimizer)`` and through torch's eager loop from the same initial
weights on the same batches; the per-step losses, the final parameters and BN buffers and the
optimizer state (``square_avg``, ``acc_delta``, ``grad_avg``, ``momentum_buffer``, ``sum``)
must agree at tests/test_train_torch.py's tolerances (float32 rounding over the run; not to
be loosened). torch's side comes through the ``torch_ref`` fixture (live with torch
installed, else PyTorch 2.13's recording in tests/data/torch_test_optimizers_torch.npz).

The CNN's convolution has no bias, as in tests/test_train_torch.py: a bias followed by
BatchNorm has a zero gradient up to rounding noise, which adaptive optimizers normalise into
full-size steps, so it would compare noise, not graphc.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import graphc as gc
from graphc import nn, optim
from conftest import HAVE_TORCH
from torch_refs import torch_steps

if HAVE_TORCH:
    import torch

RTOL, ATOL = 1e-4, 1e-6  # as tests/test_train_torch.py


def assert_state_close(actual, want, err_msg):
    """Elementwise rtol, and an absolute bound of ATOL times the tensor's largest magnitude:
    float32 steps summed in a different order (numpy/OpenBLAS here, oneDNN in PyTorch) differ
    by ~1e-7 of a tensor's scale, and an element far below its tensor's scale (0.048 in a
    momentum buffer reaching 14, after five centered-RMSprop steps) differs by as much in
    absolute terms, so a fixed 1e-6 would test the summation order, not the update rule."""
    want = np.asarray(want)
    scale = max(1.0, float(np.abs(want).max(initial=0.0)))
    np.testing.assert_allclose(actual, want, rtol=RTOL, atol=ATOL * scale, err_msg=err_msg)
STEPS, BATCH, CLASSES = 10, 16, 5


def mlp(lib):
    return lib.Sequential(lib.Linear(12, 16), lib.ReLU(), lib.Linear(16, CLASSES))


def cnn(lib):
    return lib.Sequential(lib.Conv2d(2, 4, 3, padding=1, bias=False), lib.BatchNorm2d(4), lib.ReLU(),
                          lib.MaxPool2d(2), lib.Flatten(), lib.Linear(4 * 4 * 4, CLASSES))


MODELS = {"mlp": (mlp, (12,)), "cnn": (cnn, (2, 8, 8))}

# (class name, kwargs): built with graphc.optim or torch.optim, and part of the fingerprint
OPTIMIZERS = {
    "adadelta": ("Adadelta", {}),
    "adadelta_wd_maximize": ("Adadelta", {"lr": 0.5, "rho": 0.8, "weight_decay": 1e-2, "maximize": True}),
    "rmsprop": ("RMSprop", {"lr": 1e-3}),
    "rmsprop_momentum_centered_wd": ("RMSprop", {"lr": 1e-3, "momentum": 0.9, "centered": True,
                                                 "weight_decay": 1e-3}),
    "rmsprop_low_alpha": ("RMSprop", {"lr": 1e-3, "alpha": 0.3, "centered": True}),  # lerp's weight >= 0.5 branch
    "adagrad": ("Adagrad", {"lr": 0.05}),
    "adagrad_decay_init_wd": ("Adagrad", {"lr": 0.1, "lr_decay": 0.01, "initial_accumulator_value": 0.1,
                                          "weight_decay": 1e-3}),
}


def make(lib, spec, *args):
    name, kwargs = spec
    return getattr(lib, name)(*args, **kwargs)


def batches_for(shape, steps=STEPS, seed=1):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((BATCH, *shape)).astype(np.float32),
             rng.integers(0, CLASSES, BATCH).astype(np.int64)) for _ in range(steps)]


def snapshot(model) -> dict:
    return {k: np.array(v, copy=True) for k, v in model.state_dict().items()}


# ---- torch's side ---------------------------------------------------------------------------------
def torch_run(builder, state, opt_spec, batches) -> dict:
    """torch's losses, final state (``state.<key>``), optimizer state (``opt.<index>.<slot>``)
    and the state_dict layout (``state_keys``: "index:slot", ``group_keys``)."""
    tm = builder(torch.nn)
    tm.load_state_dict({k: torch.from_numpy(np.array(v, copy=True)) for k, v in state.items()})
    topt, loss_fn = make(torch.optim, opt_spec, tm.parameters()), torch.nn.CrossEntropyLoss()
    losses = [loss.item() for _, loss in torch_steps(topt, lambda x, y: loss_fn(tm(x), y), batches)]
    sd = topt.state_dict()
    ref = {"losses": np.array(losses), **{f"state.{k}": v.detach().numpy().copy() for k, v in tm.state_dict().items()}}
    ref.update({f"opt.{i}.{slot}": np.asarray(v) for i, slots in sd["state"].items() for slot, v in slots.items()})
    ref["state_keys"] = np.array([f"{i}:{slot}" for i, slots in sd["state"].items() for slot in sorted(slots)])
    ref["group_keys"] = np.array(list(sd["param_groups"][0]))
    return ref


def torch_reference(torch_ref, builder, state, opt_spec, batches) -> dict:
    return torch_ref([opt_spec, state, batches], lambda: torch_run(builder, state, opt_spec, batches))


# ---- graphc's side --------------------------------------------------------------------------------
def train(model_name, opt_spec, steps=STEPS):
    """(model, optimizer, compiled step, per-step losses) after ``steps`` steps."""
    builder, shape = MODELS[model_name]
    gc.manual_seed(0)
    model = builder(nn)
    opt = make(optim, opt_spec, model.parameters())
    batches = batches_for(shape, max(steps, 1))[:steps]
    example = batches_for(shape, 1)[0]
    step = gc.compile(model, example, loss_fn=nn.CrossEntropyLoss(), optimizer=opt)
    return model, opt, step, np.array([float(step(x, y)) for x, y in batches])


# ---- parity ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
@pytest.mark.parametrize("model_name", list(MODELS))
def test_training_run_matches_torch(model_name, opt_name, torch_ref):
    builder, shape = MODELS[model_name]
    gc.manual_seed(0)
    initial = snapshot(builder(nn))
    ref = torch_reference(torch_ref, builder, initial, OPTIMIZERS[opt_name], batches_for(shape))
    model, opt, _, losses = train(model_name, OPTIMIZERS[opt_name])
    np.testing.assert_allclose(losses, ref["losses"], rtol=RTOL, atol=ATOL, err_msg="per-step losses differ")
    for key, value in model.state_dict().items():
        want = ref[f"state.{key}"]
        assert not np.array_equal(value, initial[key]) or key.endswith("num_batches_tracked"), f"{key} never moved"
        assert_state_close(value, want, err_msg=f"{key} differs from torch")
    state = opt.state_dict()["state"]
    for name in (n for n in ref if n.startswith("opt.")):
        _, index, slot = name.split(".")
        assert_state_close(state[int(index)][slot], ref[name], err_msg=f"optimizer state {index}.{slot} differs from torch")


@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
def test_state_dict_has_torch_layout(opt_name, torch_ref):
    builder, shape = MODELS["mlp"]
    gc.manual_seed(0)
    initial = snapshot(builder(nn))
    ref = torch_reference(torch_ref, builder, initial, OPTIMIZERS[opt_name], batches_for(shape))
    _, opt, _, _ = train("mlp", OPTIMIZERS[opt_name])
    sd = opt.state_dict()
    assert [f"{i}:{slot}" for i, slots in sd["state"].items() for slot in sorted(slots)] == ref["state_keys"].tolist()
    assert list(sd["param_groups"][0]) == ref["group_keys"].tolist()
    assert sd["param_groups"][0]["params"] == [0, 1, 2, 3]
    assert all(slots["step"] == float(STEPS) for slots in sd["state"].values())


# ---- resuming is exact --------------------------------------------------------------------------------
RESUMED = ["adadelta_wd_maximize", "rmsprop_momentum_centered_wd", "adagrad_decay_init_wd"]


@pytest.mark.parametrize("opt_name", RESUMED)
def test_plan_file_resumes_bit_for_bit(opt_name, tmp_path):
    """3 steps, save, load, 3 more == 6 steps uninterrupted (parameters, BN, optimizer state)."""
    _, _, step, _ = train("cnn", OPTIMIZERS[opt_name], steps=3)
    step.save(tmp_path / "t.graphc")
    plan = gc.load(tmp_path / "t.graphc")
    later = batches_for(MODELS["cnn"][1], 3, seed=5)
    for x, y in later:
        np.testing.assert_array_equal(plan(x, y), step(x, y))
    assert set(plan.state) == set(step.state)
    for key, value in step.state.items():
        np.testing.assert_array_equal(plan.state[key], value, err_msg=f"{key} after resuming")


@pytest.mark.parametrize("opt_name", RESUMED)
def test_optimizer_state_dict_resumes_bit_for_bit(opt_name):
    """The PyTorch way: model.state_dict() + opt.state_dict() into a fresh compiled step."""
    model, opt, step, _ = train("mlp", OPTIMIZERS[opt_name], steps=3)
    weights, opt_state = snapshot(model), opt.state_dict()
    model2, opt2, step2, _ = train("mlp", OPTIMIZERS[opt_name], steps=0)  # the same initial weights
    model2.load_state_dict(weights)
    opt2.load_state_dict(opt_state)
    for x, y in batches_for(MODELS["mlp"][1], 3, seed=5):
        np.testing.assert_array_equal(step2(x, y), step(x, y))
    for key, value in step.state.items():
        np.testing.assert_array_equal(step2.state[key], value, err_msg=f"{key} after resuming")


def test_adagrad_sum_starts_at_initial_accumulator_value():
    """PyTorch fills ``sum`` when Adagrad is built; graphc's plan holds it from compile on."""
    _, opt, _, _ = train("mlp", ("Adagrad", {"initial_accumulator_value": 0.25}), steps=0)
    state = opt.state_dict()["state"]
    assert set(state) == {0, 1, 2, 3} and all(s["step"] == 0.0 for s in state.values())
    for slots in state.values():
        np.testing.assert_array_equal(slots["sum"], np.full_like(slots["sum"], 0.25))


@pytest.mark.parametrize("kwargs", [{"foreach": True}, {"foreach": False}, {"capturable": True}])
def test_kernel_choices_are_accepted_and_change_nothing(kwargs):
    """foreach/capturable pick among PyTorch kernels for the same update: one plan serves all."""
    _, _, _, plain = train("mlp", ("RMSprop", {"momentum": 0.5}), steps=3)
    _, opt, _, chosen = train("mlp", ("RMSprop", {"momentum": 0.5, **kwargs}), steps=3)
    np.testing.assert_array_equal(chosen, plain)
    assert all(opt.param_groups[0][k] == v for k, v in kwargs.items())


def test_adagrad_fused_is_accepted():
    _, _, _, plain = train("mlp", ("Adagrad", {}), steps=3)
    _, _, _, fused = train("mlp", ("Adagrad", {"fused": True}), steps=3)
    np.testing.assert_array_equal(fused, plain)


# ---- constructor checks (PyTorch's ValueError/RuntimeError are GraphcErrors) -------------------------------
@pytest.mark.parametrize("name, kwargs, message", [
    ("Adadelta", {"lr": -1.0}, "learning rate"),
    ("Adadelta", {"lr": math.nan}, "learning rate"),
    ("Adadelta", {"rho": 1.5}, "Invalid rho value"),
    ("Adadelta", {"eps": -1e-6}, "Invalid eps value"),
    ("Adadelta", {"weight_decay": -0.1}, "Invalid weight_decay value"),
    ("RMSprop", {"alpha": -0.1}, "Invalid alpha value"),
    ("RMSprop", {"momentum": -0.9}, "Invalid momentum value"),
    ("RMSprop", {"eps": -1.0}, "Invalid eps value"),
    ("Adagrad", {"lr_decay": -0.1}, "Invalid lr_decay value"),
    ("Adagrad", {"initial_accumulator_value": -1.0}, "Invalid initial_accumulator_value value"),
    ("Adagrad", {"eps": math.nan}, "Invalid eps value"),
    ("Adagrad", {"fused": True, "foreach": True}, "`fused` and `foreach`"),
    ("Adadelta", {"differentiable": True}, r"differentiable=True\) is not supported"),
    ("RMSprop", {"differentiable": True}, r"differentiable=True\) is not supported"),
    ("Adagrad", {"differentiable": True}, r"differentiable=True\) is not supported"),
])
def test_invalid_arguments_are_refused(name, kwargs, message):
    with pytest.raises(gc.GraphcError, match=message):
        getattr(optim, name)(nn.Linear(2, 2).parameters(), **kwargs)


def test_parameter_groups_keep_their_own_settings():
    """Per-group momentum/centered reach the graph: group 1 gets no momentum buffer."""
    gc.manual_seed(0)
    model = mlp(nn)
    opt = optim.RMSprop([{"params": model[0].parameters(), "momentum": 0.9, "centered": True},
                         {"params": model[2].parameters()}], lr=1e-3)
    x, y = batches_for((12,), 1)[0]
    step = gc.compile(model, (x, y), loss_fn=nn.CrossEntropyLoss(), optimizer=opt)
    step(x, y)
    slots = {i: sorted(s) for i, s in opt.state_dict()["state"].items()}
    assert slots[0] == slots[1] == ["grad_avg", "momentum_buffer", "square_avg", "step"]
    assert slots[2] == slots[3] == ["square_avg", "step"]
