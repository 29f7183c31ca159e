"""Whole training runs against PyTorch: per-step losses, final parameters and BN buffers.

Every case builds the graphc model and the identical torch model (same constructor calls;
for the residual net the same ``forward`` code), copies graphc's initial ``state_dict``
into torch, then runs the same sequence of random batches (a new batch each step) through
``gc.compile(..., loss_fn, optimizer)`` and through torch's eager loop
(``zero_grad / loss.backward / step``). DESIGN section 2 promises PyTorch's update rules
exactly, "so N steps match PyTorch to float32 rounding"; the tolerance below is that promise
for 20 steps and is not to be loosened to make a failing case pass.

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
from conftest import HAVE_TORCH, requires_torch

if HAVE_TORCH:
    import torch

pytestmark = requires_torch

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

OPTIMIZERS = {
    "sgd_momentum_wd": lambda params, lib: lib.SGD(params, lr=0.05, momentum=0.9, weight_decay=1e-4),
    "sgd_nesterov": lambda params, lib: lib.SGD(params, lr=0.05, momentum=0.9, nesterov=True),
    "adam": lambda params, lib: lib.Adam(params, lr=1e-3),
    "adamw": lambda params, lib: lib.AdamW(params, lr=1e-3, weight_decay=1e-2),
    "sgd_dampening": lambda params, lib: lib.SGD(params, lr=0.05, momentum=0.9, dampening=0.1),
    "sgd_plain": lambda params, lib: lib.SGD(params, lr=0.1),
}


# ---- helpers --------------------------------------------------------------------------------------
def make_pair(builder):
    """The graphc model (seeded init) and the torch model holding the same initial state."""
    gc.manual_seed(SEED)
    gm = builder(nn)
    tm = builder(torch.nn)
    gsd = gm.state_dict()
    assert list(gsd) == list(tm.state_dict()), "state_dict keys differ from torch's"
    tm.load_state_dict({k: torch.from_numpy(np.array(v, copy=True)) for k, v in gsd.items()})
    return gm, tm


def classification_batches(shape, steps=STEPS, sizes=None, seed=1):
    rng = np.random.default_rng(seed)
    sizes = sizes or [BATCH] * steps
    return [(rng.standard_normal((n, *shape)).astype(np.float32), rng.integers(0, CLASSES, n).astype(np.int64))
            for n in sizes]


def torch_step(tm, topt, loss_fn, x, y):
    topt.zero_grad()
    loss = loss_fn(tm(torch.from_numpy(x)), torch.from_numpy(y))
    loss.backward()
    topt.step()
    return loss.item()


def run_both(gm, tm, gopt, topt, gloss, tloss, batches, after_step=None, passes="default"):
    """Train both models on ``batches``; return (graphc losses, torch losses, graphc plan)."""
    step = gc.compile(gm, example_inputs=batches[0], loss_fn=gloss, optimizer=gopt, passes=passes)
    g_losses, t_losses = [], []
    for i, (x, y) in enumerate(batches):
        loss = step(x, y)
        assert isinstance(loss, np.ndarray) and loss.shape == (), f"step {i}: loss is not a 0-d array"
        g_losses.append(float(loss))
        t_losses.append(torch_step(tm, topt, tloss, x, y))
        if after_step is not None:
            after_step(step)
    return np.array(g_losses), np.array(t_losses), step


def assert_losses(g_losses, t_losses):
    np.testing.assert_allclose(g_losses, t_losses, rtol=RTOL, atol=ATOL, err_msg="per-step losses differ")


def assert_state_matches(gm, tm):
    """All parameters and buffers (BN running_mean/var allclose, num_batches_tracked equal)."""
    gsd, tsd = gm.state_dict(), tm.state_dict()
    assert list(gsd) == list(tsd)
    for key, tv in tsd.items():
        g, t = np.asarray(gsd[key]), tv.detach().numpy()
        assert g.shape == t.shape and g.dtype == t.dtype, f"{key}: {g.dtype}{g.shape} vs torch {t.dtype}{t.shape}"
        if key.endswith("num_batches_tracked"):
            assert int(g) == int(t), f"{key}: {int(g)} != torch {int(t)}"
        else:
            np.testing.assert_allclose(g, t, rtol=RTOL, atol=ATOL, err_msg=f"{key} differs from torch")


# ---- every model x the four main optimizers, CrossEntropyLoss ------------------------------------------
@pytest.mark.parametrize("opt_name", ["sgd_momentum_wd", "sgd_nesterov", "adam", "adamw"])
@pytest.mark.parametrize("model_name", ["mlp", "cnn", "resnet"])
def test_classification_run_matches_torch(model_name, opt_name):
    builder, shape = MODELS[model_name]
    gm, tm = make_pair(builder)
    gopt, topt = OPTIMIZERS[opt_name](gm.parameters(), optim), OPTIMIZERS[opt_name](tm.parameters(), torch.optim)
    g, t, step = run_both(gm, tm, gopt, topt, nn.CrossEntropyLoss(), torch.nn.CrossEntropyLoss(),
                          classification_batches(shape))
    assert_losses(g, t)
    assert_state_matches(gm, tm)
    assert step.step_count == STEPS


@pytest.mark.parametrize("model_name,opt_name", [("cnn", "sgd_momentum_wd"), ("cnn", "adam"), ("resnet", "adamw")])
def test_unfused_pipeline_matches_torch(model_name, opt_name):
    """passes="none" (no linear+relu / conv+bn fusion, plain vjps) trains the same as torch."""
    builder, shape = MODELS[model_name]
    gm, tm = make_pair(builder)
    gopt, topt = OPTIMIZERS[opt_name](gm.parameters(), optim), OPTIMIZERS[opt_name](tm.parameters(), torch.optim)
    g, t, _ = run_both(gm, tm, gopt, topt, nn.CrossEntropyLoss(), torch.nn.CrossEntropyLoss(),
                       classification_batches(shape), passes="none")
    assert_losses(g, t)
    assert_state_matches(gm, tm)


@pytest.mark.parametrize("model_name,opt_name", [("mlp", "sgd_dampening"), ("cnn", "sgd_dampening"),
                                                 ("mlp", "sgd_plain"), ("resnet", "sgd_plain")])
def test_sgd_variants_match_torch(model_name, opt_name):
    builder, shape = MODELS[model_name]
    gm, tm = make_pair(builder)
    gopt, topt = OPTIMIZERS[opt_name](gm.parameters(), optim), OPTIMIZERS[opt_name](tm.parameters(), torch.optim)
    g, t, _ = run_both(gm, tm, gopt, topt, nn.CrossEntropyLoss(), torch.nn.CrossEntropyLoss(),
                       classification_batches(shape))
    assert_losses(g, t)
    assert_state_matches(gm, tm)


def test_state_is_really_trained():
    """Guard for the parity tests: 20 steps move every parameter away from its initial value."""
    gm, _ = make_pair(cnn)
    before = {k: np.array(v, copy=True) for k, v in gm.state_dict().items()}
    step = gc.compile(gm, example_inputs=classification_batches((2, 8, 8), 1)[0], loss_fn=nn.CrossEntropyLoss(),
                      optimizer=optim.SGD(gm.parameters(), lr=0.05, momentum=0.9))
    for x, y in classification_batches((2, 8, 8)):
        step(x, y)
    for key, value in gm.state_dict().items():
        assert not np.array_equal(before[key], value), f"{key} did not change in training"


# ---- other losses ----------------------------------------------------------------------------------------
def test_mse_regression_matches_torch():
    gm, tm = make_pair(lambda lib: lib.Sequential(lib.Linear(6, 16), lib.Tanh(), lib.Linear(16, 3)))
    rng = np.random.default_rng(2)
    w_true = rng.standard_normal((6, 3)).astype(np.float32)
    batches = []
    for _ in range(STEPS):
        x = rng.standard_normal((BATCH, 6)).astype(np.float32)
        batches.append((x, (x @ w_true + 0.1 * rng.standard_normal((BATCH, 3))).astype(np.float32)))
    g, t, _ = run_both(gm, tm, optim.SGD(gm.parameters(), lr=0.05, momentum=0.9),
                       torch.optim.SGD(tm.parameters(), lr=0.05, momentum=0.9),
                       nn.MSELoss(), torch.nn.MSELoss(), batches)
    assert_losses(g, t)
    assert_state_matches(gm, tm)
    assert g[-1] < g[0], "regression loss should go down"


def test_bce_with_logits_matches_torch():
    gm, tm = make_pair(lambda lib: lib.Sequential(lib.Linear(8, 16), lib.ReLU(), lib.Linear(16, 4)))
    rng = np.random.default_rng(3)
    batches = [(rng.standard_normal((BATCH, 8)).astype(np.float32),
                rng.integers(0, 2, (BATCH, 4)).astype(np.float32)) for _ in range(STEPS)]
    g, t, _ = run_both(gm, tm, optim.Adam(gm.parameters(), lr=1e-2), torch.optim.Adam(tm.parameters(), lr=1e-2),
                       nn.BCEWithLogitsLoss(), torch.nn.BCEWithLogitsLoss(), batches)
    assert_losses(g, t)
    assert_state_matches(gm, tm)


@pytest.mark.parametrize("model_name", ["mlp", "cnn"])
def test_label_smoothing_matches_torch(model_name):
    builder, shape = MODELS[model_name]
    gm, tm = make_pair(builder)
    g, t, _ = run_both(gm, tm, optim.SGD(gm.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4),
                       torch.optim.SGD(tm.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4),
                       nn.CrossEntropyLoss(label_smoothing=0.1), torch.nn.CrossEntropyLoss(label_smoothing=0.1),
                       classification_batches(shape))
    assert_losses(g, t)
    assert_state_matches(gm, tm)


# ---- learning-rate schedulers: every training step, no recompiling ------------------------------------------
SCHEDULERS = {
    "StepLR": lambda opt, lib: lib.StepLR(opt, step_size=3, gamma=0.5),
    "ExponentialLR": lambda opt, lib: lib.ExponentialLR(opt, gamma=0.8),
    # T_max smaller than the run: the schedule goes down to eta_min and back up (PyTorch's recursion)
    "CosineAnnealingLR": lambda opt, lib: lib.CosineAnnealingLR(opt, T_max=5, eta_min=0.01),
}


@pytest.mark.parametrize("sched_name", list(SCHEDULERS))
def test_lr_scheduler_matches_torch_without_recompiling(sched_name):
    steps = 12
    gm, tm = make_pair(cnn)
    gopt = optim.SGD(gm.parameters(), lr=0.1, momentum=0.9)
    topt = torch.optim.SGD(tm.parameters(), lr=0.1, momentum=0.9)
    gsched = SCHEDULERS[sched_name](gopt, optim.lr_scheduler)
    tsched = SCHEDULERS[sched_name](topt, torch.optim.lr_scheduler)
    batches = classification_batches((2, 8, 8), steps)
    step = gc.compile(gm, example_inputs=batches[0], loss_fn=nn.CrossEntropyLoss(), optimizer=gopt)
    graph = step.graph
    tloss = torch.nn.CrossEntropyLoss()
    g_losses, t_losses, g_lrs, t_lrs = [], [], [], []
    for x, y in batches:
        g_lrs.append(gopt.param_groups[0]["lr"])
        t_lrs.append(topt.param_groups[0]["lr"])
        g_losses.append(float(step(x, y)))
        t_losses.append(torch_step(tm, topt, tloss, x, y))
        gsched.step()
        tsched.step()
        assert step.graph is graph, "changing the lr recompiled the plan (new graph)"
        assert len(step._programs) == 1, "changing the lr rebuilt the program"
    np.testing.assert_allclose(g_lrs, t_lrs, rtol=1e-12, err_msg="learning-rate schedule differs from torch")
    assert len(set(np.round(g_lrs, 12))) > 2, "the schedule should actually change the lr"
    np.testing.assert_allclose(gsched.get_last_lr(), tsched.get_last_lr(), rtol=1e-12)
    assert_losses(np.array(g_losses), np.array(t_losses))
    assert_state_matches(gm, tm)


def test_lr_change_takes_effect_on_next_step():
    """Setting lr to 0 by hand freezes the parameters on the next step (lr is read every step)."""
    gm, _ = make_pair(mlp)
    opt = optim.SGD(gm.parameters(), lr=0.1)
    batches = classification_batches((12,), 3)
    step = gc.compile(gm, example_inputs=batches[0], loss_fn=nn.CrossEntropyLoss(), optimizer=opt)
    step(*batches[0])
    opt.param_groups[0]["lr"] = 0.0
    frozen = {k: np.array(v, copy=True) for k, v in gm.state_dict().items()}
    step(*batches[1])
    for key, value in gm.state_dict().items():
        np.testing.assert_array_equal(value, frozen[key], err_msg=f"{key} moved with lr=0")


# ---- a smaller last batch (symbolic batch dim), with and without BatchNorm ----------------------------------
@pytest.mark.parametrize("model_name,opt_name", [("mlp", "sgd_momentum_wd"), ("cnn", "sgd_momentum_wd"),
                                                 ("cnn", "adam"), ("resnet", "adamw")])
def test_smaller_last_batch_matches_torch(model_name, opt_name):
    builder, shape = MODELS[model_name]
    gm, tm = make_pair(builder)
    gopt, topt = OPTIMIZERS[opt_name](gm.parameters(), optim), OPTIMIZERS[opt_name](tm.parameters(), torch.optim)
    sizes = [BATCH] * 6 + [5]  # an epoch of 101 samples in batches of 16
    batches = classification_batches(shape, sizes=sizes)
    g, t, step = run_both(gm, tm, gopt, topt, nn.CrossEntropyLoss(), torch.nn.CrossEntropyLoss(), batches)
    assert_losses(g, t)
    assert_state_matches(gm, tm)
    assert sorted(step._programs) == [5, BATCH], "expected one program per batch size"
    # and a second epoch reuses both programs, still matching
    g2, t2, _ = [], [], None
    for x, y in classification_batches(shape, sizes=sizes, seed=7):
        g2.append(float(step(x, y)))
        t2.append(torch_step(tm, topt, torch.nn.CrossEntropyLoss(), x, y))
    assert_losses(np.array(g2), np.array(t2))
    assert_state_matches(gm, tm)
    assert sorted(step._programs) == [5, BATCH]


def test_return_outputs_match_torch_forward():
    """``return_outputs=True`` gives the forward outputs computed with the pre-update weights."""
    gm, tm = make_pair(cnn)
    batches = classification_batches((2, 8, 8), 3)
    step = gc.compile(gm, example_inputs=batches[0], loss_fn=nn.CrossEntropyLoss(),
                      optimizer=optim.SGD(gm.parameters(), lr=0.05, momentum=0.9))
    topt = torch.optim.SGD(tm.parameters(), lr=0.05, momentum=0.9)
    tloss = torch.nn.CrossEntropyLoss()
    for x, y in batches:
        loss, out = step(x, y, return_outputs=True)
        topt.zero_grad()
        tout = tm(torch.from_numpy(x))
        tl = tloss(tout, torch.from_numpy(y))
        tl.backward()
        topt.step()
        np.testing.assert_allclose(float(loss), tl.item(), rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(out, tout.detach().numpy(), rtol=RTOL, atol=ATOL)


# ---- more parity: parameter groups, eval after training, frozen BN, pooling ties ------------------------
def test_param_groups_with_scheduler_match_torch():
    """Two groups (own lr and momentum): one lr input per group, all scaled by the scheduler."""
    gm, tm = make_pair(cnn)

    def groups(model, lib):
        convs = list(model[0].parameters()) + list(model[1].parameters())
        return lib.SGD([{"params": convs, "lr": 0.1}, {"params": model[5].parameters(), "momentum": 0.5}],
                       lr=0.05, momentum=0.9, weight_decay=1e-4)

    gopt, topt = groups(gm, optim), groups(tm, torch.optim)
    gsched, tsched = optim.lr_scheduler.StepLR(gopt, 3, 0.5), torch.optim.lr_scheduler.StepLR(topt, 3, 0.5)
    g, t, step = run_both(gm, tm, gopt, topt, nn.CrossEntropyLoss(), torch.nn.CrossEntropyLoss(),
                          classification_batches((2, 8, 8), 12), after_step=lambda _: (gsched.step(), tsched.step()))
    assert [g_["lr"] for g_ in gopt.param_groups] == [t_["lr"] for t_ in topt.param_groups]
    assert len(step._programs) == 1
    assert_losses(g, t)
    assert_state_matches(gm, tm)


@pytest.mark.parametrize("model_name", ["cnn", "resnet"])
def test_eval_plan_after_training_matches_torch_eval(model_name):
    """After training, an inference plan (BN on the trained running stats) matches torch's eval()."""
    builder, shape = MODELS[model_name]
    gm, tm = make_pair(builder)
    g, t, _ = run_both(gm, tm, optim.Adam(gm.parameters(), lr=1e-2), torch.optim.Adam(tm.parameters(), lr=1e-2),
                       nn.CrossEntropyLoss(), torch.nn.CrossEntropyLoss(), classification_batches(shape))
    assert_losses(g, t)
    x = classification_batches(shape, 1, sizes=[7], seed=9)[0][0]
    infer = gc.compile(gm.eval(), example_inputs=(x,))
    with torch.no_grad():
        want = tm.eval()(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(infer(x), want, rtol=RTOL, atol=ATOL)


def test_training_in_eval_mode_keeps_bn_frozen_like_torch():
    """Fine-tuning with model.eval(): BN normalises with (and never updates) its running stats."""
    gm, tm = make_pair(cnn)
    bn = gm[1]
    bn.running_mean.data[...] = np.linspace(-0.5, 0.5, 4, dtype=np.float32)
    bn.running_var.data[...] = np.linspace(0.5, 2.0, 4, dtype=np.float32)
    tm.load_state_dict({k: torch.from_numpy(np.array(v, copy=True)) for k, v in gm.state_dict().items()})
    frozen = {k: np.array(v, copy=True) for k, v in gm.state_dict().items() if k.startswith("1.running")}
    gm.eval()
    tm.eval()
    g, t, _ = run_both(gm, tm, optim.SGD(gm.parameters(), lr=0.05, momentum=0.9),
                       torch.optim.SGD(tm.parameters(), lr=0.05, momentum=0.9),
                       nn.CrossEntropyLoss(), torch.nn.CrossEntropyLoss(), classification_batches((2, 8, 8)))
    assert_losses(g, t)
    assert_state_matches(gm, tm)
    for key, value in frozen.items():
        np.testing.assert_array_equal(gm.state_dict()[key], value, err_msg=f"{key} moved in eval mode")
    assert int(gm.state_dict()["1.num_batches_tracked"]) == 0


def test_maxpool_ties_route_gradient_like_torch():
    """Piecewise-constant images through a 1x1 conv make every 2x2 max-pool window an exact
    4-way tie; PyTorch sends the gradient to one element per window, not to all four."""
    gm, tm = make_pair(lambda lib: lib.Sequential(lib.Conv2d(2, 3, 1), lib.MaxPool2d(2), lib.Flatten(),
                                                  lib.Linear(3 * 4 * 4, CLASSES)))
    rng = np.random.default_rng(4)
    batches = [(np.kron(rng.standard_normal((BATCH, 2, 4, 4)), np.ones((2, 2))).astype(np.float32),
                rng.integers(0, CLASSES, BATCH).astype(np.int64)) for _ in range(5)]
    g, t, _ = run_both(gm, tm, optim.SGD(gm.parameters(), lr=0.05), torch.optim.SGD(tm.parameters(), lr=0.05),
                       nn.CrossEntropyLoss(), torch.nn.CrossEntropyLoss(), batches)
    assert_losses(g, t)
    assert_state_matches(gm, tm)
