"""Training plans without PyTorch: graph structure, shared storage, BN and dropout inside the
plan, gradient accumulation (shared weights, residuals), errors, and an end-to-end run on
scikit-learn's digits.

Gradients are read off a plain-SGD plan: with ``SGD(lr=1)``, one step turns ``w`` into
``w - grad``, so ``grad = w_before - w_after``. The finite-difference checks run in float64
(parameters replaced by float64 ``nn.Parameter``s, float64 inputs), where a central
difference is accurate to ~1e-9.
"""
from __future__ import annotations

import re
import time

import numpy as np
import pytest

import graphc as gc
from graphc import nn, optim
from graphc.ir import verify

SOURCE_RE = re.compile(r"^test_training\.py:\d+$")


# ---- helpers --------------------------------------------------------------------------------------
def blobs(n=64, dim=2, seed=0):
    """Two well separated Gaussian blobs: a tiny linearly separable problem (float32, int64)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n).astype(np.int64)
    centers = np.array([[-2.0] * dim, [2.0] * dim])
    x = (centers[y] + 0.5 * rng.standard_normal((n, dim))).astype(np.float32)
    return x, y


def snapshot(model):
    return {k: np.array(v, copy=True) for k, v in model.state_dict().items()}


def linear_np(x, sd, prefix):
    return x @ sd[f"{prefix}weight"].T + sd[f"{prefix}bias"]


def mlp_np(x, sd):
    """Numpy forward of Sequential(Linear, ReLU, Linear)."""
    return linear_np(np.maximum(linear_np(x, sd, "0."), 0), sd, "2.")


def tiny_mlp(seed=0):
    gc.manual_seed(seed)
    return nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 2))


def to_float64(model):
    """Replace every parameter and floating buffer by a float64 copy (before compiling)."""
    for module in model.modules():
        for name, p in list(module._parameters.items()):
            if p is not None:
                setattr(module, name, nn.Parameter(np.asarray(p.data, np.float64)))
        for name, b in list(module._buffers.items()):
            if b is not None and np.issubdtype(b.array.dtype, np.floating):
                module.register_buffer(name, np.asarray(b.data, np.float64))
    return model


# ---- the training graph -------------------------------------------------------------------------------
def test_training_graph_has_forward_backward_and_update_nodes():
    model = tiny_mlp()
    x, y = blobs(16)
    step = gc.compile(model, example_inputs=(x, y), loss_fn=nn.CrossEntropyLoss(),
                      optimizer=optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    graph = step.graph
    verify(graph)
    phases = [node.meta.get("phase") for node in graph.nodes]
    assert set(phases) <= {None, "backward", "check", "update"}, f"unexpected phases {set(phases)}"
    for phase in (None, "backward", "update"):
        assert phase in phases, f"no {phase or 'forward'} nodes in the training graph"
    for node in graph.nodes:
        if node.meta.get("phase") == "backward":
            assert node.meta.get("grad_of"), f"backward node {node.op} has no grad_of"
            assert SOURCE_RE.match(node.meta.get("source") or ""), \
                f"backward node {node.op} source {node.meta.get('source')!r} is not test_training.py:<line>"
    # every parameter gets an update, and so does its momentum buffer and the step count
    for name in model.state_dict():
        assert name in graph.updates, f"no update for {name}"
        assert f"optim.{name}.momentum_buffer" in graph.updates
    assert "optim.step" in graph.updates
    # backward nodes of a layer carry the layer's module path
    linear_grads = [n for n in graph.nodes if n.meta.get("phase") == "backward" and n.meta.get("module") == "0"]
    assert linear_grads and all(n.meta.get("module_type") == "Linear" for n in linear_grads)


def test_printed_training_graph_mentions_gradients(capsys):
    model = tiny_mlp()
    x, y = blobs(8)
    step = gc.compile(model, example_inputs=(x, y), loss_fn=nn.CrossEntropyLoss(),
                      optimizer=optim.Adam(model.parameters()))
    print(step.graph)
    text = capsys.readouterr().out
    assert "grad of" in text
    assert re.search(r"grad of %\d+ \(linear(_relu)?\)", text), "the Linear layers' backward is not labelled"
    assert "update @0.weight <- " in text and "optimizer state:" in text
    assert re.search(r"%lr:f\d+\[\]", text), "the learning rate should be a scalar plan input"


# ---- training works ---------------------------------------------------------------------------------
def test_loss_decreases_on_a_separable_problem():
    model = tiny_mlp()
    x, y = blobs(64)
    step = gc.compile(model, example_inputs=(x, y), loss_fn=nn.CrossEntropyLoss(),
                      optimizer=optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    losses = [float(step(x, y)) for _ in range(30)]
    assert all(np.isfinite(losses))
    assert losses[-1] < 0.1 * losses[0], f"loss went {losses[0]:.4f} -> {losses[-1]:.4f}"
    assert np.mean(losses[-5:]) < np.mean(losses[:5])
    assert (mlp_np(x, model.state_dict()).argmax(1) == y).all(), "a separable problem should be fit exactly"


def test_state_dict_updates_in_place_and_is_shared_with_the_plan():
    model = tiny_mlp()
    x, y = blobs(16)
    arrays = model.state_dict()
    before = snapshot(model)
    step = gc.compile(model, example_inputs=(x, y), loss_fn=nn.CrossEntropyLoss(),
                      optimizer=optim.SGD(model.parameters(), lr=0.1))
    loss = step(x, y)
    assert isinstance(loss, np.ndarray) and loss.shape == () and loss.dtype == np.float32
    after, plan_sd = model.state_dict(), step.state_dict()
    assert list(plan_sd) == list(after), "step.state_dict() keys differ from model.state_dict()"
    for key in after:
        assert not np.array_equal(after[key], before[key]), f"{key} did not change after a step"
        assert after[key] is arrays[key], f"{key}: the model's array was replaced, not updated in place"
        assert plan_sd[key] is after[key], f"{key}: the plan and the model do not share storage"
        assert np.asarray(model.state_dict_tensors()[key].data) is after[key]
    # one step of plain SGD: w - lr * grad, with the loss the plan reported computed before the update
    logits = mlp_np(x, before)
    shifted = logits - logits.max(1, keepdims=True)
    ce = -(shifted[np.arange(len(y)), y] - np.log(np.exp(shifted).sum(1))).mean()
    np.testing.assert_allclose(float(loss), ce, rtol=1e-5)


def test_returned_loss_and_outputs_survive_the_next_step():
    """What a step returns is the caller's: the next step (arena reuse) must not overwrite it."""
    model = tiny_mlp()
    x, y = blobs(16)
    step = gc.compile(model, example_inputs=(x, y), loss_fn=nn.CrossEntropyLoss(),
                      optimizer=optim.SGD(model.parameters(), lr=0.5))
    loss1, out1 = step(x, y, return_outputs=True)
    kept_loss, kept_out = float(loss1), np.array(out1, copy=True)
    loss2, out2 = step(x, y, return_outputs=True)
    assert float(loss1) == kept_loss and np.array_equal(out1, kept_out), "a returned array was overwritten"
    assert not np.shares_memory(out1, out2) and float(loss2) != kept_loss
    for array in model.state_dict().values():
        assert not np.shares_memory(out2, array)


def test_load_state_dict_after_compiling_reaches_the_plan():
    model = tiny_mlp()
    x, y = blobs(16)
    step = gc.compile(model, example_inputs=(x, y), loss_fn=nn.CrossEntropyLoss(),
                      optimizer=optim.SGD(model.parameters(), lr=0.0))
    zeros = {k: np.zeros_like(v) for k, v in model.state_dict().items()}
    model.load_state_dict(zeros)
    np.testing.assert_allclose(float(step(x, y)), np.log(2.0), rtol=1e-6)  # all-zero logits


def test_eval_plan_after_training_sees_updated_weights():
    model = tiny_mlp()
    x, y = blobs(32)
    initial = snapshot(model)
    step = gc.compile(model, example_inputs=(x, y), loss_fn=nn.CrossEntropyLoss(),
                      optimizer=optim.Adam(model.parameters(), lr=1e-2))
    for _ in range(5):
        step(x, y)
    infer = gc.compile(model.eval(), example_inputs=(x,))
    out = infer(x)
    np.testing.assert_allclose(out, mlp_np(x, model.state_dict()), rtol=1e-5, atol=1e-6)
    assert not np.allclose(out, mlp_np(x, initial), atol=1e-3), "the eval plan computed with the initial weights"


def test_eval_plan_compiled_before_training_follows_the_weights():
    """Plans share the model's storage, so an inference plan built first sees later updates."""
    model = tiny_mlp()
    x, y = blobs(32)
    infer = gc.compile(model.eval(), example_inputs=(x,))
    first = np.array(infer(x), copy=True)
    step = gc.compile(model.train(), example_inputs=(x, y), loss_fn=nn.CrossEntropyLoss(),
                      optimizer=optim.SGD(model.parameters(), lr=0.5))
    for _ in range(3):
        step(x, y)
    out = infer(x)
    assert not np.allclose(out, first)
    np.testing.assert_allclose(out, mlp_np(x, model.state_dict()), rtol=1e-5, atol=1e-6)


# ---- BatchNorm inside the plan ----------------------------------------------------------------------------
def test_batchnorm_running_stats_update_inside_the_plan():
    gc.manual_seed(0)
    model = nn.Sequential(nn.BatchNorm2d(3, momentum=0.2), nn.ReLU(), nn.Flatten(), nn.Linear(3 * 4 * 4, 2))
    rng = np.random.default_rng(0)
    batches = [((rng.standard_normal((8, 3, 4, 4)) * [[[[1.0]], [[2.0]], [[0.5]]]] + [[[[1.0]], [[-1.0]], [[3.0]]]])
                .astype(np.float32), rng.integers(0, 2, 8).astype(np.int64)) for _ in range(3)]
    buffers = {k: model.state_dict()[k] for k in ("0.running_mean", "0.running_var", "0.num_batches_tracked")}
    step = gc.compile(model, example_inputs=batches[0], loss_fn=nn.CrossEntropyLoss(),
                      optimizer=optim.SGD(model.parameters(), lr=0.1))
    mean, var = np.zeros(3), np.ones(3)
    for i, (x, y) in enumerate(batches, start=1):
        step(x, y)
        xd = x.astype(np.float64)
        mean = 0.8 * mean + 0.2 * xd.mean(axis=(0, 2, 3))
        var = 0.8 * var + 0.2 * xd.var(axis=(0, 2, 3), ddof=1)  # running_var uses the unbiased variance
        sd = model.state_dict()
        np.testing.assert_allclose(sd["0.running_mean"], mean, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(sd["0.running_var"], var, rtol=1e-5, atol=1e-6)
        assert sd["0.num_batches_tracked"].dtype == np.int64 and int(sd["0.num_batches_tracked"]) == i
        for key, array in buffers.items():
            assert sd[key] is array and step.state_dict()[key] is array, f"{key} was not updated in place"


def test_batchnorm_training_normalises_with_batch_statistics():
    """The forward output of BN in a training plan uses batch stats (not the running ones)."""
    gc.manual_seed(0)
    model = nn.Sequential(nn.BatchNorm1d(4), nn.Linear(4, 1))
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((32, 4)) * 3 + 5).astype(np.float32)
    t = rng.standard_normal((32, 1)).astype(np.float32)
    sd = snapshot(model)
    step = gc.compile(model, example_inputs=(x, t), loss_fn=nn.MSELoss(), optimizer=optim.SGD(model.parameters(), lr=0.0))
    _, out = step(x, t, return_outputs=True)
    xn = (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-5)  # biased variance for normalising
    np.testing.assert_allclose(out, xn @ sd["1.weight"].T + sd["1.bias"], rtol=1e-4, atol=1e-5)


# ---- Dropout ----------------------------------------------------------------------------------------------
def dropout_model(p=0.3, seed=0):
    gc.manual_seed(seed)
    return nn.Sequential(nn.Linear(20, 50), nn.Dropout(p))


def test_dropout_training_uses_the_plans_seeded_rng():
    def losses(plan_seed, steps=5):
        model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, 3))
        model.load_state_dict(initial)
        gc.manual_seed(plan_seed)
        step = gc.compile(model, example_inputs=(x, y), loss_fn=nn.CrossEntropyLoss(),
                          optimizer=optim.SGD(model.parameters(), lr=0.1))
        return np.array([float(step(x, y)) for _ in range(steps)])

    gc.manual_seed(123)
    initial = snapshot(nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, 3)))
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((16, 20)).astype(np.float32), rng.integers(0, 3, 16).astype(np.int64)
    a, b = losses(0), losses(0)
    np.testing.assert_array_equal(a, b, err_msg="two plans compiled after gc.manual_seed(0) differ")
    assert not np.array_equal(a, losses(1)), "another seed should draw other dropout masks"


def test_dropout_mask_scaling_and_fresh_masks_each_step():
    p = 0.3
    model = dropout_model(p)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 20)).astype(np.float32)
    t = np.zeros((64, 50), np.float32)
    sd = snapshot(model)
    pre = linear_np(x.astype(np.float64), sd, "0.")
    step = gc.compile(model, example_inputs=(x, t), loss_fn=nn.MSELoss(), optimizer=optim.SGD(model.parameters(), lr=0.0))
    masks = []
    for _ in range(2):
        loss, out = step(x, t, return_outputs=True)
        kept = out != 0
        np.testing.assert_allclose(out[kept], pre[kept] / (1 - p), rtol=1e-5, atol=1e-6,
                                   err_msg="kept activations are not scaled by 1/(1-p)")
        dropped = 1 - kept.mean()
        assert abs(dropped - p) < 0.05, f"dropped fraction {dropped:.3f}, expected about {p}"
        np.testing.assert_allclose(float(loss), np.mean(np.asarray(out, np.float64) ** 2), rtol=1e-5)
        masks.append(kept)
    assert not np.array_equal(masks[0], masks[1]), "the same dropout mask was drawn twice"


def test_dropout_gradient_uses_the_same_mask():
    """d loss / d bias through dropout is mask * upstream / (1-p), with the forward's mask."""
    p = 0.5
    model = dropout_model(p)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 20)).astype(np.float32)
    t = rng.standard_normal((64, 50)).astype(np.float32)
    before = snapshot(model)
    step = gc.compile(model, example_inputs=(x, t), loss_fn=nn.MSELoss(reduction="sum"),
                      optimizer=optim.SGD(model.parameters(), lr=1.0))
    _, out = step(x, t, return_outputs=True)
    mask = (out != 0) / (1 - p)
    grad_bias = (2 * (np.asarray(out, np.float64) - t) * mask).sum(0)
    np.testing.assert_allclose(before["0.bias"] - model.state_dict()["0.bias"], grad_bias, rtol=1e-4, atol=1e-4)


def test_dropout_is_identity_in_eval():
    model = dropout_model(0.5)
    x = np.random.default_rng(0).standard_normal((16, 20)).astype(np.float32)
    infer = gc.compile(model.eval(), example_inputs=(x,))
    expected = linear_np(x.astype(np.float64), model.state_dict(), "0.")
    np.testing.assert_allclose(infer(x), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(infer(x), infer(x))
    assert all(node.op != "dropout" for node in infer.graph.nodes)


# ---- gradient accumulation: shared weights and residual connections ---------------------------------------
class SharedResidual(nn.Module):
    """The same Linear applied twice, plus two residual (skip) connections."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.head = nn.Linear(4, 3)

    def forward(self, x):
        h = self.fc(x).tanh() + x
        h = self.fc(h).tanh() + h
        return self.head(h)


class ResidualBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 4)
        self.bn = nn.BatchNorm1d(4)
        self.fc2 = nn.Linear(4, 4)
        self.head = nn.Linear(4, 3)

    def forward(self, x):
        a = self.fc1(x)
        b = self.fc2(self.bn(a).relu()) + a
        return self.head(b.relu() + x)


def sgd_gradients(model, x, y, loss_fn):
    """All parameter gradients from one plain-SGD(lr=1) step (restores the weights after)."""
    before = snapshot(model)
    step = gc.compile(model, example_inputs=(x, y), loss_fn=loss_fn, optimizer=optim.SGD(model.parameters(), lr=1.0))
    step(x, y)
    grads = {k: before[k] - v for k, v in model.state_dict().items() if k in dict(model.named_parameters())}
    model.load_state_dict(before)
    return grads


@pytest.mark.parametrize("make,param", [(SharedResidual, "fc.weight"), (SharedResidual, "fc.bias"),
                                        (ResidualBN, "fc1.weight"), (ResidualBN, "fc1.bias")])
def test_accumulated_gradients_match_finite_differences_float64(make, param):
    gc.manual_seed(0)
    model = to_float64(make())
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 4))
    y = rng.integers(0, 3, 8).astype(np.int64)
    loss_fn = nn.CrossEntropyLoss()
    grads = sgd_gradients(model, x, y, loss_fn)
    assert grads[param].dtype == np.float64
    # the loss as a function of the weights: a plan with lr=0 (weights never move), fed perturbed weights
    probe = gc.compile(model, example_inputs=(x, y), loss_fn=loss_fn, optimizer=optim.SGD(model.parameters(), lr=0.0))
    weights = model.state_dict()[param]
    eps = 1e-6
    numeric = np.zeros_like(weights)
    for idx in np.ndindex(weights.shape):
        orig = weights[idx]
        weights[idx] = orig + eps
        plus = float(probe(x, y))
        weights[idx] = orig - eps
        minus = float(probe(x, y))
        weights[idx] = orig
        numeric[idx] = (plus - minus) / (2 * eps)
    # BN's num_batches_tracked moves with each probe call; the weights must not
    np.testing.assert_allclose(grads[param], numeric, rtol=1e-5, atol=1e-8,
                               err_msg=f"gradient of {param} differs from central differences")
    assert np.abs(numeric).max() > 1e-3, "degenerate check: the gradient is ~0"


def test_shared_linear_gradient_matches_manual_numpy():
    """y = fc(fc(x)) + x with MSE: the shared weight's gradient is the sum of both uses."""

    class TwiceResidual(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 3)

        def forward(self, x):
            return self.fc(self.fc(x)) + x

    gc.manual_seed(0)
    model = TwiceResidual()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    t = rng.standard_normal((5, 3)).astype(np.float32)
    sd = {k: v.astype(np.float64) for k, v in snapshot(model).items()}
    grads = sgd_gradients(model, x, t, nn.MSELoss())
    W, b, xd = sd["fc.weight"], sd["fc.bias"], x.astype(np.float64)
    h1 = xd @ W.T + b
    out = h1 @ W.T + b + xd
    g2 = 2 * (out - t) / out.size          # dL/d out = dL/d h2
    g1 = g2 @ W                            # dL/d h1
    grad_w = g2.T @ h1 + g1.T @ xd         # both uses of fc.weight
    grad_b = g2.sum(0) + g1.sum(0)
    np.testing.assert_allclose(grads["fc.weight"], grad_w, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(grads["fc.bias"], grad_b, rtol=1e-4, atol=1e-6)
    # and it is not just one of the uses
    assert not np.allclose(grads["fc.weight"], g2.T @ h1, rtol=1e-2)


def _torch_gradients(kind, sd, wanted, x, y) -> dict:
    """The same forward written in torch (functional, on ``sd``); autograd's gradients of
    the ``wanted`` entries."""
    import torch

    params = {k: torch.tensor(v, requires_grad=k in wanted) for k, v in sd.items()}

    def lin(name, v):
        return v @ params[f"{name}.weight"].T + params[f"{name}.bias"]

    xt = torch.from_numpy(x)
    if kind == "SharedResidual":
        h = torch.tanh(lin("fc", xt)) + xt
        h = torch.tanh(lin("fc", h)) + h
        logits = lin("head", h)
    else:
        a = lin("fc1", xt)
        bn = torch.nn.functional.batch_norm(a, params["bn.running_mean"].clone(), params["bn.running_var"].clone(),
                                            params["bn.weight"], params["bn.bias"], training=True)
        b = lin("fc2", bn.relu()) + a
        logits = lin("head", b.relu() + xt)
    torch.nn.functional.cross_entropy(logits, torch.from_numpy(y)).backward()
    return {key: params[key].grad for key in wanted}


def test_shared_and_residual_gradients_match_torch(torch_ref):
    for make in (SharedResidual, ResidualBN):
        gc.manual_seed(0)
        model = make()
        rng = np.random.default_rng(3)
        x = rng.standard_normal((8, 4)).astype(np.float32)
        y = rng.integers(0, 3, 8).astype(np.int64)
        sd = snapshot(model)
        grads = sgd_gradients(model, x, y, nn.CrossEntropyLoss())
        want = torch_ref([sd, sorted(grads), x, y], lambda: _torch_gradients(make.__name__, sd, sorted(grads), x, y),
                         name=make.__name__)
        assert sorted(want) == sorted(grads)
        for key in grads:
            np.testing.assert_allclose(grads[key], want[key], rtol=1e-4, atol=2e-6,
                                       err_msg=f"{make.__name__}: gradient of {key}")


# ---- errors ----------------------------------------------------------------------------------------------
def test_loss_fn_without_optimizer_raises():
    model = tiny_mlp()
    x, y = blobs(8)
    with pytest.raises(gc.GraphcError, match="optimizer"):
        gc.compile(model, example_inputs=(x, y), loss_fn=nn.CrossEntropyLoss())
    with pytest.raises(gc.GraphcError, match="loss_fn"):
        gc.compile(model, example_inputs=(x, y), optimizer=optim.SGD(model.parameters(), lr=0.1))


def test_non_scalar_loss_raises():
    model = tiny_mlp()
    x, y = blobs(8)
    with pytest.raises(gc.GraphcError, match="scalar"):
        gc.compile(model, example_inputs=(x, y), loss_fn=nn.CrossEntropyLoss(reduction="none"),
                   optimizer=optim.SGD(model.parameters(), lr=0.1))


def test_optimizer_with_foreign_parameter_raises():
    model = tiny_mlp()
    other = nn.Linear(2, 2)
    x, y = blobs(8)
    opt = optim.SGD(list(model.parameters()) + [other.weight], lr=0.1)
    with pytest.raises(gc.GraphcError, match="not in the model"):
        gc.compile(model, example_inputs=(x, y), loss_fn=nn.CrossEntropyLoss(), optimizer=opt)


def test_forward_arguments_named_like_plan_inputs_keep_the_graph_valid():
    """Regression (found at 62c50e6, fixed in 6264d45): the training graph appended inputs
    named ``target`` and ``lr`` without checking the model's own input names, so
    ``forward(self, target)`` or ``forward(self, lr)`` gave two graph inputs with one name and
    ``ir.verify`` rejected the graph (save/load and verified passes work by name)."""

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)

    class TargetArg(Net):
        def forward(self, target):
            return self.fc(target)

    class LrArg(Net):
        def forward(self, lr):
            return self.fc(lr)

    x, y = blobs(8)
    for make in (TargetArg, LrArg):
        gc.manual_seed(0)
        model = make()
        step = gc.compile(model, example_inputs=(x, y), loss_fn=nn.CrossEntropyLoss(),
                          optimizer=optim.SGD(model.parameters(), lr=0.1))
        names = [v.name for v in step.graph.inputs]
        assert len(set(names)) == len(names), f"{make.__name__}: duplicate graph input names {names}"
        verify(step.graph)


def test_parameter_with_requires_grad_false_is_not_updated():
    """Regression (found at 62c50e6, fixed in 6264d45): ``Parameter.requires_grad`` was stored
    but ignored. PyTorch never updates a parameter with ``requires_grad=False`` handed to an
    optimizer (its ``.grad`` stays None, so SGD/Adam skip it, weight decay included)."""
    model = tiny_mlp()
    model[0].weight.requires_grad = False
    model[0].bias.requires_grad = False
    x, y = blobs(16)
    before = snapshot(model)
    step = gc.compile(model, example_inputs=(x, y), loss_fn=nn.CrossEntropyLoss(),
                      optimizer=optim.SGD(model.parameters(), lr=0.5, momentum=0.9, weight_decay=1e-2))
    for _ in range(2):
        step(x, y)
    after = model.state_dict()
    assert not np.array_equal(after["2.weight"], before["2.weight"]), "the trainable layer should move"
    for key in ("0.weight", "0.bias"):
        np.testing.assert_array_equal(after[key], before[key], err_msg=f"frozen {key} (requires_grad=False) was updated")


def test_training_plan_needs_a_target():
    model = tiny_mlp()
    x, _ = blobs(8)
    with pytest.raises(gc.GraphcError):
        gc.compile(model, example_inputs=(x,), loss_fn=nn.CrossEntropyLoss(),
                   optimizer=optim.SGD(model.parameters(), lr=0.1))


def test_optimizer_over_a_subset_trains_only_that_subset():
    model = tiny_mlp()
    x, y = blobs(16)
    before = snapshot(model)
    step = gc.compile(model, example_inputs=(x, y), loss_fn=nn.CrossEntropyLoss(),
                      optimizer=optim.SGD(model[2].parameters(), lr=0.5))
    step(x, y)
    after = model.state_dict()
    np.testing.assert_array_equal(after["0.weight"], before["0.weight"])
    np.testing.assert_array_equal(after["0.bias"], before["0.bias"])
    assert not np.array_equal(after["2.weight"], before["2.weight"])


# ---- digits: an end-to-end run (DESIGN's "digits" data, read from scikit-learn directly) --------------------
@pytest.mark.slow
def test_digits_mlp_reaches_96_percent():
    datasets = pytest.importorskip("sklearn.datasets")
    data = datasets.load_digits()
    X = (data.data / 16.0).astype(np.float32)
    y = data.target.astype(np.int64)
    perm = np.random.default_rng(0).permutation(len(X))
    split = int(0.8 * len(X))
    train, test = perm[:split], perm[split:]
    gc.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = optim.Adam(model.parameters(), lr=1e-3)
    batch = 32
    start = time.perf_counter()
    step = gc.compile(model, example_inputs=(X[train[:batch]], y[train[:batch]]), loss_fn=nn.CrossEntropyLoss(),
                      optimizer=opt)
    shuffle = np.random.default_rng(1)
    for _ in range(20):
        order = train[shuffle.permutation(len(train))]
        for i in range(0, len(order), batch):  # the last batch of each epoch is smaller (1437 = 44*32 + 29)
            idx = order[i:i + batch]
            step(X[idx], y[idx])
    infer = gc.compile(model.eval(), example_inputs=(X[test],))
    accuracy = float((infer(X[test]).argmax(1) == y[test]).mean())
    elapsed = time.perf_counter() - start
    print(f"\ndigits MLP 64-128-10, Adam(1e-3), batch 32, 20 epochs: test accuracy {accuracy:.4f} "
          f"({len(test)} samples), {step.step_count} steps in {elapsed:.2f} s")
    assert step.step_count == 20 * int(np.ceil(len(train) / batch))
    assert accuracy >= 0.96, f"test accuracy {accuracy:.4f} < 0.96"
