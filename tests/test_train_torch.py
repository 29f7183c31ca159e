"""Whole training runs against PyTorch: per-step losses, final parameters and BN buffers.

Every case builds the graphc model and the identical torch model (same constructor calls;
for the residual net the same ``forward`` code), copies graphc's initial ``state_dict``
into torch, then runs the same sequence of random batches (a new batch each step) through
``gc.compile(..., loss_fn, optimizer)`` and through torch's eager loop
(``zero_grad / loss.backward / step``). DESIGN section 2 promises PyTorch's update rules
exactly, "so N steps match PyTorch to float32 rounding"; the tolerance below is that promise
for 20 steps and is not to be loosened to make a failing case pass.

torch's side of every run goes through the ``torch_ref`` fixture: live where torch is
installed, else PyTorch 2.13's recorded losses and states (tests/torch_refs.py), checked
against a fingerprint of the initial state, the batches and the optimizer/loss/scheduler
specs, which are therefore data (class name, kwargs) rather than code.

Convolutions that feed a BatchNorm are built with ``bias=False`` (as torchvision does): such
a bias has a mathematically zero gradient (BN subtracts the batch mean), so its computed
gradient is float32 rounding noise of size ~1e-9, which Adam normalises to steps of size
``lr``. Any two correct implementations then disagree in that bias (and in the running mean
that follows it) by O(lr): that would test rounding noise, not graphc.
"""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc import nn, optim
from conftest import HAVE_TORCH

if HAVE_TORCH:
    import torch

RTOL = 1e-4  # relative tolerance for losses, parameters and BN buffers after up to 20 steps
ATOL = 1e-6  # absolute floor for entries that are (close to) zero, float32 everywhere
STEPS = 20
BATCH = 16
CLASSES = 5
SEED = 0


# ---- models: one builder per architecture, called with graphc's nn or torch.nn ----------------
def mlp(lib):
    return lib.Sequential(lib.Linear(12, 16), lib.ReLU(), lib.Linear(16, CLASSES))


def cnn(lib):
    return lib.Sequential(
        lib.Conv2d(2, 4, 3, padding=1, bias=False), lib.BatchNorm2d(4), lib.ReLU(),
        lib.MaxPool2d(2), lib.Flatten(), lib.Linear(4 * 4 * 4, CLASSES))


def resnet(lib):
    """A user ``Module`` subclass: conv-bn-relu-conv-bn + skip, relu, global pool, linear."""

    class ResidualNet(lib.Module):
        def __init__(self, channels=4, classes=CLASSES):
            super().__init__()
            self.conv1 = lib.Conv2d(channels, channels, 3, padding=1, bias=False)
            self.bn1 = lib.BatchNorm2d(channels)
            self.relu = lib.ReLU()
            self.conv2 = lib.Conv2d(channels, channels, 3, padding=1, bias=False)
            self.bn2 = lib.BatchNorm2d(channels)
            self.pool = lib.AdaptiveAvgPool2d(1)
            self.fc = lib.Linear(channels, classes)

        def forward(self, x):
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            out = self.relu(out + x)
            return self.fc(self.pool(out).flatten(1))

    return ResidualNet()


MODELS = {"mlp": (mlp, (12,)), "cnn": (cnn, (2, 8, 8)), "resnet": (resnet, (4, 6, 6))}

# Specs (class name, kwargs), built with graphc's module or torch's, so that torch's recorded
# results are fingerprinted by the configuration that produced them.
OPTIMIZERS = {
    "sgd_momentum_wd": ("SGD", {"lr": 0.05, "momentum": 0.9, "weight_decay": 1e-4}),
    "sgd_nesterov": ("SGD", {"lr": 0.05, "momentum": 0.9, "nesterov": True}),
    "adam": ("Adam", {"lr": 1e-3}),
    "adamw": ("AdamW", {"lr": 1e-3, "weight_decay": 1e-2}),
    "sgd_dampening": ("SGD", {"lr": 0.05, "momentum": 0.9, "dampening": 0.1}),
    "sgd_plain": ("SGD", {"lr": 0.1}),
}
CE = ("CrossEntropyLoss", {})


def make(lib, spec, *args):
    name, kwargs = spec
    return getattr(lib, name)(*args, **kwargs)


# ---- helpers --------------------------------------------------------------------------------------
def make_model(builder):
    """The graphc model, seeded init (torch's twin gets a copy of its initial state)."""
    gc.manual_seed(SEED)
    return builder(nn)


def snapshot(model) -> dict:
    return {k: np.array(v, copy=True) for k, v in model.state_dict().items()}


def prefixed(prefix: str, arrays: dict) -> dict:
    return {f"{prefix}.{k}": v for k, v in arrays.items()}


def unprefixed(prefix: str, ref: dict) -> dict:
    """The ``prefix.``-named entries of a reference, in recorded order, without the prefix."""
    return {k[len(prefix) + 1:]: v for k, v in ref.items() if k.startswith(prefix + ".")}


def classification_batches(shape, steps=STEPS, sizes=None, seed=1):
    rng = np.random.default_rng(seed)
    sizes = sizes or [BATCH] * steps
    return [(rng.standard_normal((n, *shape)).astype(np.float32), rng.integers(0, CLASSES, n).astype(np.int64))
            for n in sizes]


# ---- torch's side (runs only where torch is installed; tests get it through ``torch_ref``) ------
def torch_state(tm) -> dict:
    return {k: v.detach().numpy().copy() for k, v in tm.state_dict().items()}


def torch_twin(builder, state):
    """``builder(torch.nn)`` holding graphc's ``state``."""
    tm = builder(torch.nn)
    tm.load_state_dict({k: torch.from_numpy(np.array(v, copy=True)) for k, v in state.items()})
    return tm


def torch_step(tm, topt, loss_fn, x, y):
    topt.zero_grad()
    loss = loss_fn(tm(torch.from_numpy(x)), torch.from_numpy(y))
    loss.backward()
    topt.step()
    return loss.item()


def torch_train(builder, state, make_opt, loss_spec, batches, sched_spec=None, eval_mode=False, then=None) -> dict:
    """The torch twin of a graphc model (``builder(torch.nn)`` holding ``state``) trained on
    ``batches`` with ``make_opt(model, torch.optim)``: per-step ``losses``, the final
    ``state.*``; with a scheduler the ``lrs`` every step saw (steps x groups) and its
    ``last_lr``; ``then(model, optimizer, loss_fn)`` adds more outputs."""
    tm = torch_twin(builder, state).train(not eval_mode)
    topt, loss_fn = make_opt(tm, torch.optim), make(torch.nn, loss_spec)
    sched = make(torch.optim.lr_scheduler, sched_spec, topt) if sched_spec else None
    losses, lrs = [], []
    for x, y in batches:
        lrs.append([g["lr"] for g in topt.param_groups])
        losses.append(torch_step(tm, topt, loss_fn, x, y))
        if sched:
            sched.step()
    ref = {"losses": np.array(losses), **prefixed("state", torch_state(tm))}
    if sched:
        ref.update(lrs=np.array(lrs), last_lr=np.array(sched.get_last_lr()))
    return {**ref, **(then(tm, topt, loss_fn) if then else {})}


def torch_training(torch_ref, builder, gm, opt_spec, loss_spec, batches, make_opt=None, more_inputs=None,
                   **kw) -> dict:
    """torch's results for training a twin of ``gm`` (from its current state) on ``batches``
    (``torch_train``'s outputs). ``make_opt(model, lib)`` builds optimizers that a spec cannot
    (parameter groups; ``opt_spec`` still describes them, for the fingerprint); ``more_inputs``:
    whatever else ``then`` feeds torch."""
    make_opt = make_opt or (lambda model, lib: make(lib, opt_spec, model.parameters()))
    state = snapshot(gm)
    return torch_ref([opt_spec, loss_spec, kw.get("sched_spec"), kw.get("eval_mode"), state, batches, more_inputs],
                     lambda: torch_train(builder, state, make_opt, loss_spec, batches, **kw))


# ---- graphc's side and the comparison -----------------------------------------------------------------
def gc_train(gm, opt, loss_spec, batches, after_step=None, passes="default"):
    """Train ``gm`` on ``batches`` through a compiled step; return (per-step losses, step)."""
    step = gc.compile(gm, example_inputs=batches[0], loss_fn=make(nn, loss_spec), optimizer=opt, passes=passes)
    losses = []
    for i, (x, y) in enumerate(batches):
        loss = step(x, y)
        assert isinstance(loss, np.ndarray) and loss.shape == (), f"step {i}: loss is not a 0-d array"
        losses.append(float(loss))
        if after_step is not None:
            after_step(step)
    return np.array(losses), step


def assert_losses(g_losses, t_losses):
    np.testing.assert_allclose(g_losses, t_losses, rtol=RTOL, atol=ATOL, err_msg="per-step losses differ")


def assert_state_matches(gm, tsd: dict):
    """All parameters and buffers against torch's (as numpy): BN running_mean/var allclose,
    num_batches_tracked equal."""
    gsd = gm.state_dict()
    assert list(gsd) == list(tsd), "state_dict keys (and their order) differ from torch's"
    for key, t in tsd.items():
        g = np.asarray(gsd[key])
        assert g.shape == t.shape and g.dtype == t.dtype, f"{key}: {g.dtype}{g.shape} vs torch {t.dtype}{t.shape}"
        if key.endswith("num_batches_tracked"):
            assert int(g) == int(t), f"{key}: {int(g)} != torch {int(t)}"
        else:
            np.testing.assert_allclose(g, t, rtol=RTOL, atol=ATOL, err_msg=f"{key} differs from torch")


def check_training(torch_ref, builder, opt_spec, loss_spec, batches, passes="default"):
    """Train graphc's model and torch's twin the same way; compare losses and the final state."""
    gm = make_model(builder)
    ref = torch_training(torch_ref, builder, gm, opt_spec, loss_spec, batches)
    g_losses, step = gc_train(gm, make(optim, opt_spec, gm.parameters()), loss_spec, batches, passes=passes)
    assert_losses(g_losses, ref["losses"])
    assert_state_matches(gm, unprefixed("state", ref))
    return g_losses, step


# ---- every model x the four main optimizers, CrossEntropyLoss ------------------------------------------
@pytest.mark.parametrize("opt_name", ["sgd_momentum_wd", "sgd_nesterov", "adam", "adamw"])
@pytest.mark.parametrize("model_name", ["mlp", "cnn", "resnet"])
def test_classification_run_matches_torch(model_name, opt_name, torch_ref):
    builder, shape = MODELS[model_name]
    _, step = check_training(torch_ref, builder, OPTIMIZERS[opt_name], CE, classification_batches(shape))
    assert step.step_count == STEPS


@pytest.mark.parametrize("model_name,opt_name", [("cnn", "sgd_momentum_wd"), ("cnn", "adam"), ("resnet", "adamw")])
def test_unfused_pipeline_matches_torch(model_name, opt_name, torch_ref):
    """passes="none" (no linear+relu / conv+bn fusion, plain vjps) trains the same as torch."""
    builder, shape = MODELS[model_name]
    check_training(torch_ref, builder, OPTIMIZERS[opt_name], CE, classification_batches(shape), passes="none")


@pytest.mark.parametrize("model_name,opt_name", [("mlp", "sgd_dampening"), ("cnn", "sgd_dampening"),
                                                 ("mlp", "sgd_plain"), ("resnet", "sgd_plain")])
def test_sgd_variants_match_torch(model_name, opt_name, torch_ref):
    builder, shape = MODELS[model_name]
    check_training(torch_ref, builder, OPTIMIZERS[opt_name], CE, classification_batches(shape))


def test_state_is_really_trained():
    """Guard for the parity tests: 20 steps move every parameter away from its initial value."""
    gm = make_model(cnn)
    before = snapshot(gm)
    step = gc.compile(gm, example_inputs=classification_batches((2, 8, 8), 1)[0], loss_fn=nn.CrossEntropyLoss(),
                      optimizer=optim.SGD(gm.parameters(), lr=0.05, momentum=0.9))
    for x, y in classification_batches((2, 8, 8)):
        step(x, y)
    for key, value in gm.state_dict().items():
        assert not np.array_equal(before[key], value), f"{key} did not change in training"


# ---- other losses ----------------------------------------------------------------------------------------
def regression_mlp(lib):
    return lib.Sequential(lib.Linear(6, 16), lib.Tanh(), lib.Linear(16, 3))


def test_mse_regression_matches_torch(torch_ref):
    rng = np.random.default_rng(2)
    w_true = rng.standard_normal((6, 3)).astype(np.float32)
    batches = []
    for _ in range(STEPS):
        x = rng.standard_normal((BATCH, 6)).astype(np.float32)
        batches.append((x, (x @ w_true + 0.1 * rng.standard_normal((BATCH, 3))).astype(np.float32)))
    g, _ = check_training(torch_ref, regression_mlp, ("SGD", {"lr": 0.05, "momentum": 0.9}), ("MSELoss", {}),
                          batches)
    assert g[-1] < g[0], "regression loss should go down"


def multilabel_mlp(lib):
    return lib.Sequential(lib.Linear(8, 16), lib.ReLU(), lib.Linear(16, 4))


def test_bce_with_logits_matches_torch(torch_ref):
    rng = np.random.default_rng(3)
    batches = [(rng.standard_normal((BATCH, 8)).astype(np.float32),
                rng.integers(0, 2, (BATCH, 4)).astype(np.float32)) for _ in range(STEPS)]
    check_training(torch_ref, multilabel_mlp, ("Adam", {"lr": 1e-2}), ("BCEWithLogitsLoss", {}), batches)


@pytest.mark.parametrize("model_name", ["mlp", "cnn"])
def test_label_smoothing_matches_torch(model_name, torch_ref):
    builder, shape = MODELS[model_name]
    check_training(torch_ref, builder, OPTIMIZERS["sgd_momentum_wd"], ("CrossEntropyLoss", {"label_smoothing": 0.1}),
                   classification_batches(shape))


# ---- learning-rate schedulers: every training step, no recompiling ------------------------------------------
SCHEDULERS = {
    "StepLR": ("StepLR", {"step_size": 3, "gamma": 0.5}),
    "ExponentialLR": ("ExponentialLR", {"gamma": 0.8}),
    # T_max smaller than the run: the schedule goes down to eta_min and back up (PyTorch's recursion)
    "CosineAnnealingLR": ("CosineAnnealingLR", {"T_max": 5, "eta_min": 0.01}),
}


@pytest.mark.parametrize("sched_name", list(SCHEDULERS))
def test_lr_scheduler_matches_torch_without_recompiling(sched_name, torch_ref):
    steps = 12
    gm = make_model(cnn)
    opt_spec = ("SGD", {"lr": 0.1, "momentum": 0.9})
    batches = classification_batches((2, 8, 8), steps)
    ref = torch_training(torch_ref, cnn, gm, opt_spec, CE, batches, sched_spec=SCHEDULERS[sched_name])
    gopt = make(optim, opt_spec, gm.parameters())
    gsched = make(optim.lr_scheduler, SCHEDULERS[sched_name], gopt)
    step = gc.compile(gm, example_inputs=batches[0], loss_fn=nn.CrossEntropyLoss(), optimizer=gopt)
    graph = step.graph
    g_losses, g_lrs = [], []
    for x, y in batches:
        g_lrs.append(gopt.param_groups[0]["lr"])
        g_losses.append(float(step(x, y)))
        gsched.step()
        assert step.graph is graph, "changing the lr recompiled the plan (new graph)"
        assert len(step._programs) == 1, "changing the lr rebuilt the program"
    np.testing.assert_allclose(g_lrs, ref["lrs"][:, 0], rtol=1e-12, err_msg="learning-rate schedule differs from torch")
    assert len(set(np.round(g_lrs, 12))) > 2, "the schedule should actually change the lr"
    np.testing.assert_allclose(gsched.get_last_lr(), ref["last_lr"], rtol=1e-12)
    assert_losses(np.array(g_losses), ref["losses"])
    assert_state_matches(gm, unprefixed("state", ref))


def test_lr_change_takes_effect_on_next_step():
    """Setting lr to 0 by hand freezes the parameters on the next step (lr is read every step)."""
    gm = make_model(mlp)
    opt = optim.SGD(gm.parameters(), lr=0.1)
    batches = classification_batches((12,), 3)
    step = gc.compile(gm, example_inputs=batches[0], loss_fn=nn.CrossEntropyLoss(), optimizer=opt)
    step(*batches[0])
    opt.param_groups[0]["lr"] = 0.0
    frozen = snapshot(gm)
    step(*batches[1])
    for key, value in gm.state_dict().items():
        np.testing.assert_array_equal(value, frozen[key], err_msg=f"{key} moved with lr=0")


# ---- a smaller last batch (symbolic batch dim), with and without BatchNorm ----------------------------------
@pytest.mark.parametrize("model_name,opt_name", [("mlp", "sgd_momentum_wd"), ("cnn", "sgd_momentum_wd"),
                                                 ("cnn", "adam"), ("resnet", "adamw")])
def test_smaller_last_batch_matches_torch(model_name, opt_name, torch_ref):
    builder, shape = MODELS[model_name]
    sizes = [BATCH] * 6 + [5]  # an epoch of 101 samples in batches of 16
    batches, epoch2 = classification_batches(shape, sizes=sizes), classification_batches(shape, sizes=sizes, seed=7)

    def second_epoch(tm, topt, loss_fn):
        losses = [torch_step(tm, topt, loss_fn, x, y) for x, y in epoch2]
        return {"losses2": np.array(losses), **prefixed("state2", torch_state(tm))}

    gm = make_model(builder)
    ref = torch_training(torch_ref, builder, gm, OPTIMIZERS[opt_name], CE, batches, then=second_epoch,
                         more_inputs=epoch2)
    g, step = gc_train(gm, make(optim, OPTIMIZERS[opt_name], gm.parameters()), CE, batches)
    assert_losses(g, ref["losses"])
    assert_state_matches(gm, unprefixed("state", ref))
    assert sorted(step._programs) == [5, BATCH], "expected one program per batch size"
    # and a second epoch reuses both programs, still matching
    assert_losses(np.array([float(step(x, y)) for x, y in epoch2]), ref["losses2"])
    assert_state_matches(gm, unprefixed("state2", ref))
    assert sorted(step._programs) == [5, BATCH]


def test_return_outputs_match_torch_forward(torch_ref):
    """``return_outputs=True`` gives the forward outputs computed with the pre-update weights."""
    gm = make_model(cnn)
    batches = classification_batches((2, 8, 8), 3)
    opt_spec = ("SGD", {"lr": 0.05, "momentum": 0.9})

    def torch_forward_outputs():
        tm, loss_fn = torch_twin(cnn, state), torch.nn.CrossEntropyLoss()
        topt = make(torch.optim, opt_spec, tm.parameters())
        ref = {}
        for i, (x, y) in enumerate(batches):
            topt.zero_grad()
            ref[f"out{i}"] = tm(torch.from_numpy(x))
            loss = loss_fn(ref[f"out{i}"], torch.from_numpy(y))
            loss.backward()
            topt.step()
            ref[f"loss{i}"] = loss.item()
        return ref

    state = snapshot(gm)
    ref = torch_ref([opt_spec, state, batches], torch_forward_outputs)
    step = gc.compile(gm, example_inputs=batches[0], loss_fn=nn.CrossEntropyLoss(),
                      optimizer=make(optim, opt_spec, gm.parameters()))
    for i, (x, y) in enumerate(batches):
        loss, out = step(x, y, return_outputs=True)
        np.testing.assert_allclose(float(loss), ref[f"loss{i}"], rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(out, ref[f"out{i}"], rtol=RTOL, atol=ATOL)


# ---- more parity: parameter groups, eval after training, frozen BN, pooling ties ------------------------
def test_param_groups_with_scheduler_match_torch(torch_ref):
    """Two groups (own lr and momentum): one lr input per group, all scaled by the scheduler."""
    gm = make_model(cnn)

    def groups(model, lib):
        convs = list(model[0].parameters()) + list(model[1].parameters())
        return lib.SGD([{"params": convs, "lr": 0.1}, {"params": model[5].parameters(), "momentum": 0.5}],
                       lr=0.05, momentum=0.9, weight_decay=1e-4)

    groups_spec = ("SGD", {"groups": [{"modules": [0, 1], "lr": 0.1}, {"modules": [5], "momentum": 0.5}],
                           "lr": 0.05, "momentum": 0.9, "weight_decay": 1e-4})
    sched_spec = ("StepLR", {"step_size": 3, "gamma": 0.5})
    batches = classification_batches((2, 8, 8), 12)
    ref = torch_training(torch_ref, cnn, gm, groups_spec, CE, batches, make_opt=groups, sched_spec=sched_spec)
    gopt = groups(gm, optim)
    gsched = make(optim.lr_scheduler, sched_spec, gopt)
    g, step = gc_train(gm, gopt, CE, batches, after_step=lambda _: gsched.step())
    # the lr each group has after the last scheduler step: torch's last_lr
    assert [g_["lr"] for g_ in gopt.param_groups] == ref["last_lr"].tolist()
    assert len(step._programs) == 1
    assert_losses(g, ref["losses"])
    assert_state_matches(gm, unprefixed("state", ref))


@pytest.mark.parametrize("model_name", ["cnn", "resnet"])
def test_eval_plan_after_training_matches_torch_eval(model_name, torch_ref):
    """After training, an inference plan (BN on the trained running stats) matches torch's eval()."""
    builder, shape = MODELS[model_name]
    x = classification_batches(shape, 1, sizes=[7], seed=9)[0][0]

    def eval_output(tm, topt, loss_fn):
        with torch.no_grad():
            return {"eval_out": tm.eval()(torch.from_numpy(x))}

    gm = make_model(builder)
    adam, batches = ("Adam", {"lr": 1e-2}), classification_batches(shape)
    ref = torch_training(torch_ref, builder, gm, adam, CE, batches, then=eval_output, more_inputs=x)
    g, _ = gc_train(gm, make(optim, adam, gm.parameters()), CE, batches)
    assert_losses(g, ref["losses"])
    infer = gc.compile(gm.eval(), example_inputs=(x,))
    np.testing.assert_allclose(infer(x), ref["eval_out"], rtol=RTOL, atol=ATOL)


def test_training_in_eval_mode_keeps_bn_frozen_like_torch(torch_ref):
    """Fine-tuning with model.eval(): BN normalises with (and never updates) its running stats."""
    gm = make_model(cnn)
    bn = gm[1]
    bn.running_mean.data[...] = np.linspace(-0.5, 0.5, 4, dtype=np.float32)
    bn.running_var.data[...] = np.linspace(0.5, 2.0, 4, dtype=np.float32)
    frozen = {k: np.array(v, copy=True) for k, v in gm.state_dict().items() if k.startswith("1.running")}
    opt_spec, batches = ("SGD", {"lr": 0.05, "momentum": 0.9}), classification_batches((2, 8, 8))
    ref = torch_training(torch_ref, cnn, gm, opt_spec, CE, batches, eval_mode=True)  # from the edited state
    gm.eval()
    g, _ = gc_train(gm, make(optim, opt_spec, gm.parameters()), CE, batches)
    assert_losses(g, ref["losses"])
    assert_state_matches(gm, unprefixed("state", ref))
    for key, value in frozen.items():
        np.testing.assert_array_equal(gm.state_dict()[key], value, err_msg=f"{key} moved in eval mode")
    assert int(gm.state_dict()["1.num_batches_tracked"]) == 0


def tie_net(lib):
    return lib.Sequential(lib.Conv2d(2, 3, 1), lib.MaxPool2d(2), lib.Flatten(), lib.Linear(3 * 4 * 4, CLASSES))


def test_maxpool_ties_route_gradient_like_torch(torch_ref):
    """Piecewise-constant images through a 1x1 conv make every 2x2 max-pool window an exact
    4-way tie; PyTorch sends the gradient to one element per window, not to all four."""
    rng = np.random.default_rng(4)
    batches = [(np.kron(rng.standard_normal((BATCH, 2, 4, 4)), np.ones((2, 2))).astype(np.float32),
                rng.integers(0, CLASSES, BATCH).astype(np.int64)) for _ in range(5)]
    check_training(torch_ref, tie_net, ("SGD", {"lr": 0.05}), CE, batches)
