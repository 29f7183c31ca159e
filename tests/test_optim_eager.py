"""Eager optimizer steps (graphc/optim/eager.py): ``zero_grad / loss.backward() / step()`` loops.

Each optimizer setting (two parameter groups with their own hyper-parameters, and a StepLR
schedule) trains an MLP and a small CNN with BatchNorm for ``STEPS`` eager steps and is
compared with

- PyTorch's eager loop from the same initial weights on the same batches (``torch_ref``:
  live with torch installed, else PyTorch 2.13's recording in
  tests/data/torch_test_optim_eager.npz): per-step losses, parameters, BN buffers and the
  optimizer state, at tests/test_train_torch.py's tolerances;
- graphc's own compiled plan ``gc.compile(model, (x, y), loss_fn=, optimizer=)`` on the same
  data: the same update formulas (passes/optimizers.py) and kernels, so they agree to float32
  rounding (``SAME_RTOL``).

Then: parameters without a gradient are skipped, ``state_dict()`` layout and values,
``load_state_dict`` resuming, ``step(closure)``, eager steps continued by a compiled plan (and
back), and ``step()`` without gradients.

The CNN's convolution has no bias (see tests/test_optimizers_torch.py): a bias before
BatchNorm has a zero gradient up to rounding noise, which adaptive optimizers blow up.
"""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc import nn, optim
from conftest import HAVE_TORCH
from torch_refs import torch_steps

if HAVE_TORCH:
    import torch

# Against PyTorch, as tests/test_train_torch.py (float32 rounding over the run, summed in
# another order by oneDNN): rtol elementwise and ATOL times the tensor's largest magnitude
# (tests/test_optimizers_torch.py's assert_state_close gives the reason for the scaling).
RTOL, ATOL = 1e-4, 1e-6
# Eager vs compiled graphc: the same formulas and kernels; the compiled plan may fuse ops
# (linear + relu) and accumulate a gradient in another order, a few float32 ulps (1.2e-7
# each) per step at most, which over STEPS steps stays below 5e-6 relative.
SAME_RTOL, SAME_ATOL = 5e-6, 5e-7

STEPS, BATCH, CLASSES = 6, 16, 5
SCHEDULER = ("StepLR", {"step_size": 2, "gamma": 0.5})


def assert_state_close(actual, want, err_msg, rtol=RTOL, atol=ATOL):
    want = np.asarray(want)
    scale = max(1.0, float(np.abs(want).max(initial=0.0)))
    np.testing.assert_allclose(np.asarray(actual), want, rtol=rtol, atol=atol * scale, err_msg=err_msg)


# The models of the compiled optimizer tests (same sizes and CLASSES): eager and compiled
# runs are compared on the very same architectures.
from test_optimizers_torch import MODELS, cnn, mlp  # noqa: E402,F401

# name -> (class, kwargs, overrides of the first parameter group): data, so that torch's
# recording is fingerprinted by the configuration. Group 0 is every layer but the last,
# group 1 the last layer. (graphc's SGD has no ``maximize``; the adaptive ones have. No group
# overrides Adagrad's initial_accumulator_value: PyTorch fills ``sum`` from the constructor's
# argument, ignoring a group's own, where graphc uses the group's.)
OPTIMIZERS = {
    "sgd_momentum_dampening_wd": ("SGD", {"lr": 0.1, "momentum": 0.9, "dampening": 0.1, "weight_decay": 1e-3},
                                  {"momentum": 0.5, "lr": 0.05}),
    "sgd_nesterov_wd": ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 1e-2},
                        {"momentum": 0.6}),
    "sgd_plain": ("SGD", {"lr": 0.1}, {"weight_decay": 1e-2}),
    "adam": ("Adam", {"lr": 1e-2, "betas": (0.8, 0.99), "weight_decay": 1e-3}, {"lr": 3e-2, "eps": 1e-6}),
    "adamw": ("AdamW", {"lr": 1e-2, "weight_decay": 0.1}, {"weight_decay": 0.0}),
    "adadelta_maximize": ("Adadelta", {"lr": 0.5, "rho": 0.8, "weight_decay": 1e-2}, {"maximize": True}),
    "rmsprop_centered_momentum": ("RMSprop", {"lr": 1e-3, "momentum": 0.9, "centered": True, "weight_decay": 1e-3},
                                  {"centered": False, "momentum": 0.0}),
    "rmsprop_maximize": ("RMSprop", {"lr": 1e-3, "alpha": 0.9}, {"maximize": True}),
    "adagrad_decay_init": ("Adagrad", {"lr": 0.1, "lr_decay": 0.01, "initial_accumulator_value": 0.1,
                                       "weight_decay": 1e-3}, {"lr": 0.05, "eps": 1e-8}),
}


def groups(model, overrides) -> list:
    layers = list(model)
    body = [p for layer in layers[:-1] for p in layer.parameters()]
    return [{"params": body, **overrides}, {"params": list(layers[-1].parameters())}]


def make_optimizer(lib, model, spec, grouped=True):
    name, kwargs, overrides = spec
    params = groups(model, overrides) if grouped else model.parameters()
    return getattr(lib, name)(params, **kwargs)


def make_scheduler(lib_optim, opt):
    name, kwargs = SCHEDULER
    return getattr(lib_optim.lr_scheduler, name)(opt, **kwargs)


def batches_for(shape, steps=STEPS, seed=1):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((BATCH, *shape)).astype(np.float32),
             rng.integers(0, CLASSES, BATCH).astype(np.int64)) for _ in range(steps)]


def initial_state(builder) -> dict:
    gc.manual_seed(0)
    return {k: np.array(v, copy=True) for k, v in builder(nn).state_dict().items()}


def fresh_model(builder, state):
    model = builder(nn)
    model.load_state_dict({k: np.array(v, copy=True) for k, v in state.items()})
    return model


# ---- torch's side ---------------------------------------------------------------------------------
def torch_run(builder, state, spec, batches, scheduler=True, grouped=True) -> dict:
    """Losses, the lr each step used, final state (``state.<key>``), optimizer state
    (``opt.<index>.<slot>``), its layout (``state_keys``) and the groups' plain values
    (``group.<i>.<key>``; ``group_keys``)."""
    tm = builder(torch.nn)
    tm.load_state_dict({k: torch.from_numpy(np.array(v, copy=True)) for k, v in state.items()})
    topt = make_optimizer(torch.optim, tm, spec, grouped)
    sched = make_scheduler(torch.optim, topt) if scheduler else None
    loss_fn, losses, lrs = torch.nn.CrossEntropyLoss(), [], []
    lrs.append([g["lr"] for g in topt.param_groups])
    for _, loss in torch_steps(topt, lambda x, y: loss_fn(tm(x), y), batches):
        losses.append(loss.item())
        if sched:
            sched.step()
        lrs.append([g["lr"] for g in topt.param_groups])
    sd = topt.state_dict()
    ref = {"losses": np.array(losses), "lrs": np.array(lrs),
           **{f"state.{k}": v.detach().numpy().copy() for k, v in tm.state_dict().items()}}
    ref.update({f"opt.{i}.{slot}": np.asarray(v) for i, slots in sd["state"].items() for slot, v in slots.items()})
    ref["state_keys"] = np.array([f"{i}:{slot}" for i, slots in sd["state"].items() for slot in sorted(slots)])
    for i, group in enumerate(sd["param_groups"]):
        ref[f"group_keys.{i}"] = np.array(sorted(group))
        ref[f"group.{i}.params"] = np.array(group["params"])
        for key, value in group.items():
            if isinstance(value, (bool, int, float, tuple)):
                ref[f"group.{i}.{key}"] = np.array(value, np.float64)
    return ref


def torch_reference(torch_ref, builder, state, spec, batches, name="", **kw) -> dict:
    return torch_ref([spec, SCHEDULER, kw, state, batches], lambda: torch_run(builder, state, spec, batches, **kw),
                     name)


# ---- graphc's side --------------------------------------------------------------------------------
def eager_run(model, opt, batches, sched=None):
    """The PyTorch loop on graphc's eager tensors; returns (per-step losses, lr of every step)."""
    loss_fn, losses, lrs = nn.CrossEntropyLoss(), [], [[g["lr"] for g in opt.param_groups]]
    for x, y in batches:
        opt.zero_grad()
        loss = loss_fn(model(gc.tensor(x)), gc.tensor(y))
        loss.backward()
        opt.step()
        losses.append(float(loss))
        if sched is not None:
            sched.step()
        lrs.append([g["lr"] for g in opt.param_groups])
    return np.array(losses), np.array(lrs)


def compiled_run(model, opt, batches, sched=None):
    step = gc.compile(model, batches[0], loss_fn=nn.CrossEntropyLoss(), optimizer=opt)
    losses = []
    for x, y in batches:
        losses.append(float(step(x, y)))
        if sched is not None:
            sched.step()
    return np.array(losses)


def optimizer_arrays(opt) -> dict:
    return {f"{i}.{slot}": np.asarray(v) for i, slots in opt.state_dict()["state"].items() for slot, v in slots.items()}


# ---- training runs -------------------------------------------------------------------------------
@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
@pytest.mark.parametrize("model_name", list(MODELS))
def test_eager_training_matches_torch_and_compiled(model_name, opt_name, torch_ref):
    builder, shape = MODELS[model_name]
    spec, state, batches = OPTIMIZERS[opt_name], initial_state(builder), batches_for(shape)
    ref = torch_reference(torch_ref, builder, state, spec, batches)

    model = fresh_model(builder, state)
    opt = make_optimizer(optim, model, spec)
    losses, lrs = eager_run(model, opt, batches, make_scheduler(optim, opt))
    np.testing.assert_allclose(losses, ref["losses"], rtol=RTOL, atol=ATOL, err_msg="per-step losses differ")
    np.testing.assert_allclose(lrs, ref["lrs"], rtol=1e-12, err_msg="scheduled learning rates differ")
    for key, value in model.state_dict().items():
        assert not np.array_equal(value, state[key]) or key.endswith("num_batches_tracked"), f"{key} never moved"
        assert_state_close(value, ref[f"state.{key}"], f"{key} differs from torch")
    eager_opt = optimizer_arrays(opt)
    for name in (n for n in ref if n.startswith("opt.")):
        assert_state_close(eager_opt[name[4:]], ref[name], f"optimizer state {name[4:]} differs from torch")

    # the same run through graphc's compiled plan
    cmodel = fresh_model(builder, state)
    copt = make_optimizer(optim, cmodel, spec)
    closses = compiled_run(cmodel, copt, batches, make_scheduler(optim, copt))
    np.testing.assert_allclose(losses, closses, rtol=SAME_RTOL, atol=SAME_ATOL, err_msg="eager vs compiled losses")
    for key, value in model.state_dict().items():
        assert_state_close(value, cmodel.state_dict()[key], f"{key}: eager vs compiled", SAME_RTOL, SAME_ATOL)
    compiled_opt = optimizer_arrays(copt)
    assert set(compiled_opt) == set(eager_opt)
    for name, value in eager_opt.items():
        assert_state_close(value, compiled_opt[name], f"optimizer state {name}: eager vs compiled", SAME_RTOL,
                           SAME_ATOL)


@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
def test_state_dict_after_eager_steps_has_torch_layout(opt_name, torch_ref):
    builder, shape = MODELS["mlp"]
    spec, state, batches = OPTIMIZERS[opt_name], initial_state(builder), batches_for(shape, 3)
    ref = torch_reference(torch_ref, builder, state, spec, batches)
    model = fresh_model(builder, state)
    opt = make_optimizer(optim, model, spec)
    eager_run(model, opt, batches, make_scheduler(optim, opt))
    sd = opt.state_dict()

    torch_slots: dict = {}
    for key in ref["state_keys"].tolist():
        index, slot = key.split(":")
        torch_slots.setdefault(int(index), set()).add(slot)
    if spec[0] == "SGD":  # graphc's step count gives even a momentum-free SGD state entries (tests/test_schedulers.py)
        assert all(set(slots) == {"step"} for i, slots in sd["state"].items() if i not in torch_slots)
        torch_slots.update({i: set() for i in sd["state"] if i not in torch_slots})
    assert set(sd["state"]) == set(torch_slots)
    for index, slots in sd["state"].items():
        extra = set(slots) - torch_slots[index]
        # graphc keeps one step count for every optimizer; PyTorch's SGD has none (tests/test_schedulers.py)
        assert extra <= {"step"} and (not extra or spec[0] == "SGD"), f"{index}: slots {sorted(extra)} torch lacks"
        assert torch_slots[index] <= set(slots), f"{index}: missing {sorted(torch_slots[index] - set(slots))}"
        for slot in torch_slots[index]:
            if slot == "step":
                assert isinstance(slots[slot], float) and slots[slot] == float(ref[f"opt.{index}.step"]) == 3.0
            else:
                assert isinstance(slots[slot], np.ndarray) and slots[slot].dtype == np.float32
                assert_state_close(slots[slot], ref[f"opt.{index}.{slot}"], f"{index}.{slot}")
    assert len(sd["param_groups"]) == 2
    for i, group in enumerate(sd["param_groups"]):
        assert group["params"] == ref[f"group.{i}.params"].tolist()
        torch_keys = set(ref[f"group_keys.{i}"].tolist())
        assert set(group) <= torch_keys, f"group {i}: keys torch lacks {sorted(set(group) - torch_keys)}"
        for key, value in group.items():
            if f"group.{i}.{key}" in ref and key != "params":
                np.testing.assert_allclose(np.array(value, np.float64), ref[f"group.{i}.{key}"], rtol=1e-12,
                                           err_msg=f"group {i}: {key}")
        assert "initial_lr" in group and group["lr"] == group["initial_lr"] * 0.5  # StepLR stepped 3 times
    for index, slots in sd["state"].items():  # a copy: editing it changes nothing
        for slot in (s for s in slots if s != "step"):
            slots[slot][...] = 123.0
            assert not np.any(optimizer_arrays(opt)[f"{index}.{slot}"] == 123.0), f"{index}.{slot} is not a copy"


# ---- parameters without gradients -----------------------------------------------------------------

def _sparse_run(lib, lib_optim, spec, values):
    """``a`` has a gradient every step, ``b`` from the second step on, ``c`` never."""
    a, b, c = (lib.tensor(np.array(v), requires_grad=True) for v in values)
    name, kwargs, _ = spec
    opt = getattr(lib_optim, name)([a, b, c], **kwargs)
    for i in range(3):
        opt.zero_grad()
        loss = (a * a * a).sum() if i == 0 else (a * a * a).sum() + (b.tanh() * b).sum() * 3
        loss.backward()
        opt.step()
    return a, b, c, opt


@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
def test_parameter_without_grad_is_skipped(opt_name, torch_ref):
    spec = OPTIMIZERS[opt_name]
    rng = np.random.default_rng(4)
    values = [rng.standard_normal(s).astype(np.float32) for s in [(3,), (2, 2), (2,)]]

    def compute():
        a, b, _, topt = _sparse_run(torch, torch.optim, spec, values)
        sd = topt.state_dict()["state"]
        return {"a": a, "b": b, **{f"opt.{i}.{slot}": np.asarray(v) for i, s in sd.items() for slot, v in s.items()}}

    ref = torch_ref([spec, values], compute)
    a, b, c, opt = _sparse_run(gc, optim, spec, values)
    assert c.grad is None
    np.testing.assert_array_equal(c.numpy(), values[2])  # never touched: no weight decay either, as PyTorch
    assert_state_close(a.numpy(), ref["a"], "a (a gradient every step)")
    assert_state_close(b.numpy(), ref["b"], "b (skipped in the first step)")
    state = opt.state_dict()["state"]
    for name in (n for n in ref if n.startswith("opt.")):
        _, index, slot = name.split(".")
        if slot != "step":  # the step count: test_skipped_parameter_step_count_and_state
            assert_state_close(state[int(index)][slot], ref[name], f"optimizer state {index}.{slot}")


def test_skipped_parameter_step_count_and_state():
    """PyTorch counts steps per parameter: b (skipped once) has step 2, c (never updated) no state."""
    _, _, _, opt = _sparse_run(gc, optim, OPTIMIZERS["adam"], [np.ones(3, np.float32), np.ones(2, np.float32),
                                                              np.ones(2, np.float32)])
    state = opt.state_dict()["state"]
    assert state[0]["step"] == 3.0 and state[1]["step"] == 2.0
    assert set(state) == {0, 1}


# ---- resuming, closures, compiled continuation ----------------------------------------------------------
@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
def test_load_state_dict_resumes_eager_training_exactly(opt_name):
    """3 steps, state_dict()s into a fresh model and optimizer, 3 more == 6 uninterrupted steps,
    bit for bit: the same arrays go through the same update plans."""
    builder, shape = MODELS["mlp"]
    spec, state, batches = OPTIMIZERS[opt_name], initial_state(builder), batches_for(shape)
    whole = fresh_model(builder, state)
    wopt = make_optimizer(optim, whole, spec)
    whole_losses, _ = eager_run(whole, wopt, batches)

    first = fresh_model(builder, state)
    opt = make_optimizer(optim, first, spec)
    eager_run(first, opt, batches[:3])
    weights = {k: np.array(v, copy=True) for k, v in first.state_dict().items()}
    saved = opt.state_dict()
    resumed = fresh_model(builder, weights)
    opt2 = make_optimizer(optim, resumed, spec)
    opt2.load_state_dict(saved)
    later, _ = eager_run(resumed, opt2, batches[3:])
    np.testing.assert_array_equal(later, whole_losses[3:])
    for key, value in whole.state_dict().items():
        np.testing.assert_array_equal(resumed.state_dict()[key], value, err_msg=f"{key} after resuming")
    resumed_state = optimizer_arrays(opt2)
    for key, value in optimizer_arrays(wopt).items():
        np.testing.assert_array_equal(resumed_state[key], value, err_msg=f"optimizer state {key} after resuming")
    assert all(s["step"] == float(STEPS) for s in opt2.state_dict()["state"].values())


def test_step_with_closure_returns_its_loss():
    builder, shape = MODELS["mlp"]
    state, batches = initial_state(builder), batches_for(shape, 3)
    spec = OPTIMIZERS["sgd_momentum_dampening_wd"]
    plain = fresh_model(builder, state)
    plain_losses, _ = eager_run(plain, make_optimizer(optim, plain, spec), batches)

    model = fresh_model(builder, state)
    opt = make_optimizer(optim, model, spec)
    loss_fn = nn.CrossEntropyLoss()
    for i, (x, y) in enumerate(batches):
        made = []

        def closure(x=x, y=y, made=made):
            opt.zero_grad()
            loss = loss_fn(model(gc.tensor(x)), gc.tensor(y))
            assert gc.is_grad_enabled(), "step() runs the closure with gradients on, as PyTorch"
            loss.backward()
            made.append(loss)
            return loss

        if i == 1:
            with gc.no_grad():  # PyTorch's step() enables grad for the closure
                returned = opt.step(closure)
        else:
            returned = opt.step(closure)
        assert len(made) == 1 and returned is made[0]
        assert float(returned) == plain_losses[i]
    for key, value in plain.state_dict().items():
        np.testing.assert_array_equal(model.state_dict()[key], value, err_msg=key)
    assert opt.step() is None  # without a closure: None (the gradients of the last closure are still there)


CONTINUED = ["sgd_momentum_dampening_wd", "adam", "rmsprop_centered_momentum", "adagrad_decay_init"]


@pytest.mark.parametrize("opt_name", CONTINUED)
def test_compiled_plan_continues_eager_optimizer_state(opt_name):
    """3 eager steps, then gc.compile(model, ..., optimizer=opt) for 3 more: the momentum /
    moments / accumulators (and the schedule) carry over into the plan; the reverse too."""
    builder, shape = MODELS["cnn"]
    spec, state, batches = OPTIMIZERS[opt_name], initial_state(builder), batches_for(shape)
    whole = fresh_model(builder, state)
    wopt = make_optimizer(optim, whole, spec)
    whole_losses, _ = eager_run(whole, wopt, batches, make_scheduler(optim, wopt))

    model = fresh_model(builder, state)
    opt = make_optimizer(optim, model, spec)
    sched = make_scheduler(optim, opt)
    eager_run(model, opt, batches[:3], sched)
    carried = optimizer_arrays(opt)
    later = compiled_run(model, opt, batches[3:], sched)
    np.testing.assert_allclose(later, whole_losses[3:], rtol=SAME_RTOL, atol=SAME_ATOL)
    for key, value in whole.state_dict().items():
        assert_state_close(model.state_dict()[key], value, f"{key}: eager then compiled", SAME_RTOL, SAME_ATOL)
    final = optimizer_arrays(opt)
    for key, value in optimizer_arrays(wopt).items():
        assert_state_close(final[key], value, f"optimizer state {key}: eager then compiled", SAME_RTOL, SAME_ATOL)
    assert any(not np.array_equal(final[k], v) for k, v in carried.items() if not k.endswith("step"))

    # compiled first, eager after
    back = fresh_model(builder, state)
    bopt = make_optimizer(optim, back, spec)
    bsched = make_scheduler(optim, bopt)
    compiled_run(back, bopt, batches[:3], bsched)
    eager_run(back, bopt, batches[3:], bsched)
    for key, value in whole.state_dict().items():
        assert_state_close(back.state_dict()[key], value, f"{key}: compiled then eager", SAME_RTOL, SAME_ATOL)


def test_eager_momentum_is_not_reset_by_compiling():
    """The sharpest form of the above: one eager SGD step with momentum, then one compiled step.
    A plan starting from a zero buffer would move the weights by lr * g instead of lr * (0.9 b + g)."""
    builder, shape = MODELS["mlp"]
    state, (b1, b2) = initial_state(builder), batches_for(shape, 2)
    spec = ("SGD", {"lr": 0.1, "momentum": 0.9}, {})
    ref = fresh_model(builder, state)
    eager_run(ref, make_optimizer(optim, ref, spec, grouped=False), [b1, b2])
    reset = fresh_model(builder, state)  # what forgetting the buffer would give
    eager_run(reset, make_optimizer(optim, reset, spec, grouped=False), [b1])
    eager_run(reset, make_optimizer(optim, reset, spec, grouped=False), [b2])

    model = fresh_model(builder, state)
    opt = make_optimizer(optim, model, spec, grouped=False)
    eager_run(model, opt, [b1])
    compiled_run(model, opt, [b2])
    for key, value in ref.state_dict().items():
        assert_state_close(model.state_dict()[key], value, key, SAME_RTOL, SAME_ATOL)
    assert any(not np.allclose(reset.state_dict()[k], v, rtol=1e-3) for k, v in ref.state_dict().items())


def test_hyper_parameter_edited_between_eager_steps(torch_ref):
    """param_groups edits (momentum, weight_decay) take effect at the next eager step, as in PyTorch."""
    builder, shape = MODELS["mlp"]
    state, batches = initial_state(builder), batches_for(shape, 4)
    spec = ("SGD", {"lr": 0.1, "momentum": 0.9}, {})

    def run(lib, model, opt_lib):
        opt = make_optimizer(opt_lib, model, spec, grouped=False)
        for i, (x, y) in enumerate(batches):
            if i == 2:
                opt.param_groups[0]["momentum"] = 0.5
                opt.param_groups[0]["weight_decay"] = 0.01
            opt.zero_grad()
            loss = lib.nn.functional.cross_entropy(model(lib.tensor(x)), lib.tensor(y))
            loss.backward()
            opt.step()
        return model

    def compute():
        tm = builder(torch.nn)
        tm.load_state_dict({k: torch.from_numpy(np.array(v, copy=True)) for k, v in state.items()})
        return {k: v.detach().numpy().copy() for k, v in run(torch, tm, torch.optim).state_dict().items()}

    ref = torch_ref([state, batches], compute)
    model = run(gc, fresh_model(builder, state), optim)
    for key, value in model.state_dict().items():
        assert_state_close(value, ref[key], key)


# ---- zero_grad and step() without gradients ----------------------------------------------------------------
def test_step_without_gradients_raises():
    gc.manual_seed(0)
    layer = nn.Linear(3, 2)
    opt = optim.SGD(layer.parameters(), lr=0.1, weight_decay=0.5)
    before = [p.numpy().copy() for p in layer.parameters()]
    with pytest.raises(gc.GraphcError, match="no parameter has a gradient"):
        opt.step()
    layer(gc.ones(2, 3)).sum().backward()
    opt.zero_grad()  # set_to_none=True
    assert all(p.grad is None for p in layer.parameters())
    with pytest.raises(gc.GraphcError, match="no parameter has a gradient"):
        opt.step()
    for p, b in zip(layer.parameters(), before):
        np.testing.assert_array_equal(p.numpy(), b)

    layer(gc.ones(2, 3)).sum().backward()
    arrays = [p.grad.array for p in layer.parameters()]
    opt.zero_grad(set_to_none=False)  # zeros in place, as PyTorch
    assert all(p.grad.array is a and not a.any() for p, a in zip(layer.parameters(), arrays))
    opt.step()  # zero gradients: only the weight decay moves the parameters
    for p, b in zip(layer.parameters(), before):
        np.testing.assert_allclose(p.numpy(), b * (1 - 0.1 * 0.5), rtol=1e-6)
