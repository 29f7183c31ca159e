"""The nn modules real PyTorch models use beyond DESIGN's list, against PyTorch: GroupNorm,
LayerNorm, Embedding, Conv1d, Dropout2d, Unflatten, ModuleDict, the activations (ReLU6,
Hardtanh, SiLU, GELU, ELU, Softplus, Hardswish), their ``F.``/``gc.``/``Tensor.`` forms, ``erf``,
``Module.apply`` and ``Module.named_modules``.

The pattern is tests/test_modules_torch.py's (its helpers are reused): both libraries build the
module from the same constructor call, hold the same randomised state (copied graphc -> torch
or torch's ``state_dict`` loaded into graphc), and run train and eval forwards. Gradients are
compared through compiled training steps: one or a few SGD steps, then the parameters against
torch's after the same steps. torch's side always goes through the ``torch_ref`` fixture
(live with torch installed, else PyTorch 2.13's recording in tests/data/).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import graphc as gc
import graphc.nn.functional as F
from graphc import nn, optim
from graphc.executor.kernels.elementwise import erf_float64
from conftest import HAVE_TORCH
from torch_refs import torch_steps
from test_modules_torch import (SEED, TOL, assert_close, build_gc, case_id, check_against_torch, max_abs_diff,
                                prefixed, snapshot, torch_module, torch_state, unprefixed)

if HAVE_TORCH:
    import torch


def make_input(rng, spec):
    """``spec``: a float shape, or ("int", high, shape) for embedding indices."""
    if spec[0] == "int":
        return rng.integers(0, spec[1], spec[2]).astype(np.int64)
    return (rng.standard_normal(spec) * 2 + 0.5).astype(np.float32)


# ---- modules with parameters: both transfer directions, train and eval ----------------------------
PARAM_CASES = [
    # (class name, args, kwargs, input spec)
    ("LayerNorm", (6,), {}, (4, 6)),
    ("LayerNorm", ((3, 5),), {}, (2, 3, 5)),
    ("LayerNorm", ([5],), {"eps": 1e-3}, (2, 4, 5)),
    ("LayerNorm", (5,), {"elementwise_affine": False}, (3, 5)),
    ("LayerNorm", (5,), {"bias": False}, (3, 2, 5)),
    ("GroupNorm", (2, 4), {}, (3, 4, 5, 5)),
    ("GroupNorm", (1, 6), {}, (2, 6, 3)),  # one group: layer norm over (C, *)
    ("GroupNorm", (4, 4), {"eps": 1e-3}, (2, 4, 3, 3)),  # a group per channel: instance norm
    ("GroupNorm", (3, 6), {"affine": False}, (2, 6, 7)),
    ("GroupNorm", (2, 4), {"bias": False}, (2, 4, 3, 3)),
    ("GroupNorm", (2, 4), {}, (5, 4)),  # (N, C)
    ("Embedding", (10, 4), {}, ("int", 10, (3, 5))),
    ("Embedding", (10, 4), {"padding_idx": 0}, ("int", 10, (3, 5))),
    ("Embedding", (7, 3), {"padding_idx": -2}, ("int", 7, (2, 3, 4))),
    ("Embedding", (6, 2), {"sparse": True}, ("int", 6, (5,))),
    ("Conv1d", (3, 4, 3), {}, (2, 3, 10)),
    ("Conv1d", (3, 4, 3), {"stride": 2, "padding": 1}, (2, 3, 11)),
    ("Conv1d", (3, 4, 5), {"padding": "same", "dilation": 2}, (2, 3, 12)),
    ("Conv1d", (3, 4, (3,)), {"padding": "valid", "stride": (2,)}, (2, 3, 9)),
    ("Conv1d", (4, 6, 3), {"groups": 2, "padding": 2}, (2, 4, 8)),
    ("Conv1d", (3, 5, 1), {"bias": False}, (2, 3, 6)),
    ("Conv1d", (3, 4, 3), {"padding": 1}, (3, 10)),  # unbatched (C, L)
]


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("direction", ["gc->torch", "torch->gc"])
@pytest.mark.parametrize("case", PARAM_CASES, ids=[case_id(c) for c in PARAM_CASES])
def test_parameterised_module_matches_torch(case, direction, mode, torch_ref):
    name, args, kwargs, spec = case
    rng = np.random.default_rng(2)
    steps = [(make_input(rng, spec), mode) for _ in range(2)]
    check_against_torch(torch_ref, build_gc(name, args, kwargs), lambda: torch_module(name, args, kwargs),
                        direction, steps, case)


def test_initial_state_layout_matches_torch(torch_ref):
    """Same keys, order, shapes and dtypes as torch before any transfer, and torch's init:
    norm weights 1 and biases 0, Embedding N(0, 1) with its padding row 0, Conv1d within
    kaiming-uniform's bound 1/sqrt(fan_in)."""
    for case in PARAM_CASES:
        name, args, kwargs, _ = case
        gsd = build_gc(name, args, kwargs).state_dict()
        tsd = torch_ref(case, lambda name=name, args=args, kwargs=kwargs: {
            k: np.zeros(v.shape, v.dtype) for k, v in torch_state(torch_module(name, args, kwargs)).items()},
            name=case_id(case))
        assert list(gsd) == list(tsd), name
        for k in tsd:
            assert gsd[k].shape == tsd[k].shape and gsd[k].dtype == tsd[k].dtype, (name, k)
        if name in ("LayerNorm", "GroupNorm"):
            assert all(np.all(gsd[k] == (1.0 if k == "weight" else 0.0)) for k in gsd), name
        if name == "Conv1d":
            bound = 1 / math.sqrt(np.prod(gsd["weight"].shape[1:]))
            assert all(np.abs(v).max() <= bound + 1e-7 for v in gsd.values())
    gc.manual_seed(SEED)
    weight = nn.Embedding(2000, 50, padding_idx=3).weight.numpy()
    assert np.all(weight[3] == 0) and np.all(np.delete(weight, 3, axis=0) != 0)
    assert abs(weight.mean()) < 0.01 and abs(weight.std() - 1) < 0.01  # N(0, 1), 100k draws


def test_embedding_options_and_from_pretrained():
    table = np.arange(12, dtype=np.float32).reshape(4, 3)
    emb = nn.Embedding.from_pretrained(table, padding_idx=1)
    assert not emb.weight.requires_grad and emb.padding_idx == 1
    np.testing.assert_array_equal(emb(gc.tensor(np.array([1, 3]))).numpy(), table[[1, 3]])  # row 1 kept
    assert nn.Embedding.from_pretrained(table, freeze=False).weight.requires_grad
    for bad in ({"max_norm": 1.0}, {"scale_grad_by_freq": True}, {"padding_idx": 4}, {"padding_idx": -5}):
        with pytest.raises(gc.GraphcError):
            nn.Embedding(4, 3, **bad)
    with pytest.raises(gc.GraphcError, match="out of range"):
        nn.Embedding(4, 3)(gc.tensor(np.array([0, 4])))
    with pytest.raises(gc.ShapeError):
        nn.Embedding(4, 3)(gc.tensor(np.array([0.0, 1.0], np.float32)))


def test_bad_constructor_arguments_raise_graphc_errors():
    for make in (lambda: nn.GroupNorm(3, 4), lambda: nn.GroupNorm(0, 4), lambda: nn.LayerNorm(0),
                 lambda: nn.Conv1d(3, 4, 0), lambda: nn.Conv1d(3, 4, (3, 3)), lambda: nn.Conv1d(3, 4, 3, groups=2),
                 lambda: nn.GELU("exact"), lambda: nn.Hardtanh(1.0, -1.0), lambda: nn.Dropout2d(1.5),
                 lambda: nn.Unflatten(1, 6), lambda: nn.ModuleDict({1: nn.ReLU()})):
        with pytest.raises(gc.GraphcError):
            make()
    with pytest.raises(gc.ShapeError):
        nn.LayerNorm(4)(gc.zeros(2, 5))
    with pytest.raises(gc.ShapeError):
        nn.GroupNorm(2, 4)(gc.zeros(2, 6, 3))


# ---- parameter-free modules, train and eval ------------------------------------------------------
STATELESS_CASES = [
    ("GELU", (), {}, (4, 5, 3)),
    ("GELU", (), {"approximate": "tanh"}, (4, 5, 3)),
    ("SiLU", (), {}, (4, 5)),
    ("SiLU", (), {"inplace": True}, (4, 5)),
    ("ReLU6", (), {}, (4, 5, 3)),
    ("ReLU6", (True,), {}, (4, 5)),
    ("Hardtanh", (), {}, (4, 5)),
    ("Hardtanh", (-2.0, 3.0), {"inplace": True}, (4, 5)),
    ("ELU", (), {}, (4, 5, 3)),
    ("ELU", (0.5,), {"inplace": True}, (4, 5)),
    ("Softplus", (), {}, (4, 5)),
    ("Softplus", (), {"beta": 2.0, "threshold": 5.0}, (4, 5, 3)),
    ("Hardswish", (), {}, (4, 5, 3)),
    ("Hardswish", (), {"inplace": True}, (4, 5)),
    ("LeakyReLU", (0.2,), {"inplace": True}, (4, 5)),
    ("ReLU", (), {"inplace": True}, (4, 5)),
    ("Unflatten", (1, (2, 6)), {}, (3, 12)),
    ("Unflatten", (-1, (2, -1)), {}, (3, 4, 6)),
    ("Unflatten", (1, [3, 1, 2]), {}, (2, 6, 5)),
]


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("case", STATELESS_CASES, ids=[case_id(c) for c in STATELESS_CASES])
def test_stateless_module_matches_torch(case, mode, torch_ref):
    name, args, kwargs, shape = case
    gm = build_gc(name, args, kwargs)
    assert gm.state_dict() == {}
    x = (np.random.default_rng(3).standard_normal(shape) * 3).astype(np.float32)
    before = x.copy()
    check_against_torch(torch_ref, gm, lambda: torch_module(name, args, kwargs), "gc->torch", [(x, mode)], case)
    np.testing.assert_array_equal(x, before)  # inplace=True or not, graphc never writes its input


def test_activations_at_extreme_inputs(torch_ref):
    x = np.array([[-100.0, -30.0, -6.0, -3.0, -1e-3, 0.0, 1e-3, 3.0, 6.0, 20.0, 30.0, 100.0]], np.float32)
    for name, kwargs in (("GELU", {}), ("GELU", {"approximate": "tanh"}), ("SiLU", {}), ("ReLU6", {}),
                         ("Hardtanh", {}), ("ELU", {}), ("Softplus", {}), ("Softplus", {"beta": 0.5}),
                         ("Hardswish", {})):
        check_against_torch(torch_ref, build_gc(name, (), kwargs),
                            lambda name=name, kwargs=kwargs: torch_module(name, (), kwargs),
                            "gc->torch", [(x, "eval")], (name, kwargs), name=f"{name}{kwargs}")


@pytest.mark.parametrize("p", [0.0, 0.3, 1.0])
def test_dropout2d_eval_is_identity_like_torch(p, torch_ref):
    gm = build_gc("Dropout2d", (p,), {})
    x = make_input(np.random.default_rng(4), (3, 4, 5, 5))
    check_against_torch(torch_ref, gm, lambda: torch_module("Dropout2d", (p,), {}), "gc->torch", [(x, "eval")], p)
    np.testing.assert_array_equal(gm(gc.tensor(x)).numpy(), x)


# ---- the functional forms: one table entry per composite -------------------------------------------
def _arrays(rng, *shapes):
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


_W = dict(zip(["ln_w", "ln_b", "gn_w", "gn_b", "conv_w", "conv_b"],
              _arrays(np.random.default_rng(6), (5,), (5,), (4,), (4,), (6, 4, 3), (6,))))
_W["conv_w"] *= 0.2  # outputs of order 1, like the other cases
FUNCTIONAL_CASES = [
    # (surface, name, kwargs (numpy arrays become tensors), input shape)
    ("F", "gelu", {}, (3, 7)),
    ("F", "gelu", {"approximate": "tanh"}, (3, 7)),
    ("F", "silu", {}, (3, 7)),
    ("F", "relu6", {}, (3, 7)),
    ("F", "hardtanh", {}, (3, 7)),
    ("F", "hardtanh", {"min_val": -0.5, "max_val": 2.0}, (3, 7)),
    ("F", "elu", {}, (3, 7)),
    ("F", "elu", {"alpha": 0.3}, (3, 7)),
    ("F", "softplus", {}, (3, 7)),
    ("F", "softplus", {"beta": 3.0, "threshold": 2.0}, (3, 7)),
    ("F", "hardswish", {}, (3, 7)),
    ("F", "layer_norm", {"normalized_shape": (5,), "weight": _W["ln_w"], "bias": _W["ln_b"]}, (3, 4, 5)),
    ("F", "layer_norm", {"normalized_shape": (4, 5), "eps": 1e-2}, (3, 4, 5)),
    ("F", "group_norm", {"num_groups": 2, "weight": _W["gn_w"], "bias": _W["gn_b"]}, (3, 4, 6)),
    ("F", "conv1d", {"weight": _W["conv_w"], "bias": _W["conv_b"], "stride": 2, "padding": 1}, (3, 4, 9)),
    ("F", "dropout2d", {"training": False}, (3, 4, 2, 2)),
    ("top", "erf", {}, (3, 7)),
    ("method", "erf", {}, (3, 7)),
    ("top", "layer_norm", {"normalized_shape": [5], "weight": _W["ln_w"], "eps": 1e-3}, (3, 5)),
    ("top", "group_norm", {"num_groups": 4, "bias": _W["gn_b"]}, (3, 4, 2, 3)),
    ("top", "conv1d", {"weight": _W["conv_w"], "dilation": 2, "groups": 1}, (3, 4, 9)),
]


def functional_id(case):
    surface, name, kwargs, shape = case
    kw = ",".join(f"{k}={'<array>' if isinstance(v, np.ndarray) else v}" for k, v in kwargs.items())
    return f"{surface}.{name}({kw})-in{list(shape)}"


def call(lib, case, x, dtype):
    """``case``'s function of graphc (lib "gc") or torch on ``x``, a tensor of that library;
    the case's arrays become tensors of ``dtype``."""
    surface, name, kwargs, _ = case
    if lib == "gc":
        convert, functional, top = gc.tensor, F, gc
    else:
        convert, functional, top = torch.from_numpy, torch.nn.functional, torch
    kwargs = {k: convert(v.astype(dtype)) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    if surface == "method":
        return getattr(x, name)(**kwargs)
    return getattr(functional if surface == "F" else top, name)(x, **kwargs)


def probe(lib, case, features, dtype="float32"):
    """A module whose only parameter shifts the input: ``fn(x + shift)``. An SGD step from
    shift = 0 moves ``shift`` by ``-lr * d loss / d x`` summed over the batch."""
    base = nn if lib == "gc" else torch.nn
    zeros = np.zeros(features, dtype)

    class Probe(base.Module):
        def __init__(self):
            super().__init__()
            self.shift = nn.Parameter(zeros) if lib == "gc" else torch.nn.Parameter(torch.from_numpy(zeros))

        def forward(self, x):
            return call(lib, case, x + self.shift, dtype)

    return Probe()


def torch_probe_steps(case, batches, dtype):
    model = probe("torch", case, batches[0][0].shape[1:], dtype)
    opt, loss_fn = torch.optim.SGD(model.parameters(), lr=1.0), torch.nn.MSELoss()
    out = {}
    for i, loss in torch_steps(opt, lambda x, y: loss_fn(model(x), y), batches):
        out[f"loss{i}"], out[f"shift{i}"] = loss.detach(), model.shift.detach().clone()
    return out


def check_gradients(torch_ref, case, inputs, dtype, name):
    """A compiled SGD step (lr=1, mean squared error: gradients of order 1, so float32 rounding
    stays well below TOL) per batch of ``inputs`` through a probe, against torch's."""
    rng = np.random.default_rng(8)
    batches = [(x, rng.standard_normal(call("gc", case, gc.tensor(x), dtype).shape).astype(dtype)) for x in inputs]
    ref = torch_ref([case, dtype, batches], lambda: torch_probe_steps(case, batches, dtype), name)
    model = probe("gc", case, inputs[0].shape[1:], dtype)
    step = gc.compile(model, example_inputs=batches[0], loss_fn=nn.MSELoss(),
                      optimizer=optim.SGD(model.parameters(), lr=1.0))
    for i, (x, y) in enumerate(batches):
        loss = step(x, y)
        np.testing.assert_allclose(loss, ref[f"loss{i}"], rtol=TOL, atol=TOL, err_msg=f"{name} loss {i}")
        assert_close(model.shift, ref[f"shift{i}"], what=f"{name} gradient step {i}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", FUNCTIONAL_CASES, ids=[functional_id(c) for c in FUNCTIONAL_CASES])
def test_functional_matches_torch_forward_and_gradient(case, dtype, torch_ref):
    x = (np.random.default_rng(7).standard_normal(case[3]) * 3).astype(dtype)
    ref = torch_ref([case, x], lambda: {"out": call("torch", case, torch.from_numpy(x.copy()), dtype)}, "forward")
    assert_close(call("gc", case, gc.tensor(x), dtype), ref["out"], what="forward")
    check_gradients(torch_ref, case, [x, x[:2] * 0.5], dtype, "gradient")  # and a smaller batch


TIES = np.array([[-25.0, -6.0, -3.0, -1.0, -0.5, 0.0, 1.0, 2.0 / 3.0, 2.0, 3.0, 6.0, 20.0]], np.float32)


@pytest.mark.parametrize("case", [c for c in FUNCTIONAL_CASES if c[0] == "F" and c[1] not in (
    "layer_norm", "group_norm", "conv1d", "dropout2d")], ids=functional_id)
def test_activation_gradients_at_kinks_match_torch(case, torch_ref):
    """At the bounds and switch points (hardtanh's -1 and 1, relu6's 0 and 6, hardswish's -3
    and 3, elu's 0, softplus's threshold: x = 20, or 2/3 for beta 3 and threshold 2) each
    gradient is PyTorch's choice of one-sided derivative (hardtanh, relu6 and hardswish: the
    flat side at their bounds)."""
    check_gradients(torch_ref, case, [TIES], "float32", "kinks")


# ---- erf ---------------------------------------------------------------------------------------------
def test_erf_kernel_matches_math_erf():
    """Cody's approximations in float64 against Python's erf at 200k points (across every range
    boundary) and at the edges: relative error within a few ulps, +-1 beyond 6, NaN stays NaN."""
    x = np.concatenate([np.linspace(-7.0, 7.0, 200_001), np.geomspace(1e-300, 30.0, 2000),
                        -np.geomspace(1e-300, 30.0, 2000), [0.46875, -0.46875, 4.0, -4.0, 6.0, -6.0]])
    want = np.array([math.erf(v) for v in x])
    got = erf_float64(np, x)
    assert np.max(np.abs(got - want) / np.maximum(np.abs(want), 1e-300)) < 2e-15
    special = erf_float64(np, np.array([np.inf, -np.inf, np.nan, 1e300, -0.0]))
    assert special[:2].tolist() == [1.0, -1.0] and np.isnan(special[2]) and special[3] == 1.0
    assert str(special[4]) == "-0.0"  # erf is odd
    assert erf_float64(np, np.array(0.5)).shape == ()
    # the CPU evaluates it in cache-sized blocks: each element's value is the whole-array one, bit for bit
    from graphc.executor.kernels.elementwise import _erf_block

    assert x.size > 5 * 32768 and np.array_equal(got.view(np.int64), _erf_block(np, x).view(np.int64))


def test_erf_float32_matches_torch(torch_ref):
    x = np.linspace(-8.0, 8.0, 4001, dtype=np.float32)
    ref = torch_ref([x], lambda: {"erf": torch.erf(torch.from_numpy(x))})
    got = gc.erf(gc.tensor(x)).numpy()
    assert got.dtype == np.float32 and max_abs_diff(got, ref["erf"]) <= 1.2e-7  # one float32 ulp near 1


# ---- Dropout2d in training -----------------------------------------------------------------------------
@pytest.mark.parametrize("p", [0.2, 0.5, 0.8])
def test_dropout2d_train_drops_whole_channels(p):
    """RNGs differ from torch's, so check the law: each (sample, channel) is zeroed with rate p,
    whole, and the survivors are scaled by 1/(1-p), as torch's feature dropout does."""
    gc.manual_seed(SEED)
    x = np.random.default_rng(5).uniform(1.0, 2.0, (400, 50, 3, 2)).astype(np.float32)
    out = nn.Dropout2d(p).train()(gc.tensor(x)).numpy()
    dropped = (out == 0).reshape(400, 50, 6)
    assert np.all(dropped.all(axis=2) == dropped.any(axis=2)), "channels must be dropped whole"
    rate = dropped[:, :, 0].mean()
    assert abs(rate - p) < 0.02  # 20k channels: std of the rate < 0.0036
    np.testing.assert_allclose(out[out != 0], x[out != 0] / (1 - p), rtol=1e-6)
    three_d = nn.Dropout2d(p).train()(gc.tensor(x[:, :, :, 0])).numpy()  # (N, C, L): channel-wise too
    assert np.all((three_d == 0).all(axis=2) == (three_d == 0).any(axis=2))


def test_dropout2d_edge_probabilities_and_nan():
    x = make_input(np.random.default_rng(6), (4, 3, 2, 2))
    np.testing.assert_array_equal(F.dropout2d(gc.tensor(x), 0.0).numpy(), x)
    np.testing.assert_array_equal(F.dropout2d(gc.tensor(x), 1.0).numpy(), np.zeros_like(x))
    x[0, 0, 0, 0] = np.nan  # the mask does not depend on the values, NaN included
    out = F.dropout2d(gc.tensor(x), 0.5).numpy()
    assert np.isnan(out[0, 0, 0, 0]) and np.isfinite(np.delete(out.ravel(), 0)).all()


def test_dropout2d_in_a_compiled_training_step():
    """A fresh channel mask every step; the gradient flows through the kept channels only
    (scaled by 1/(1-p)); other batch sizes reuse the plan (the mask's batch dim is symbolic)."""
    gc.manual_seed(SEED)
    p = 0.5
    model = probe("gc", ("F", "dropout2d", {"p": p}, None), (6, 2, 2))
    rng = np.random.default_rng(9)
    batches = [(rng.uniform(1, 2, (n, 6, 2, 2)).astype(np.float32), rng.standard_normal((n, 6, 2, 2)).astype(
        np.float32)) for n in (8, 8, 3)]
    lr = 0.01  # small steps: x + shift stays away from 0, so out / (x + shift) reads the mask back
    step = gc.compile(model, example_inputs=batches[0], loss_fn=nn.MSELoss(reduction="sum"),
                      optimizer=optim.SGD(model.parameters(), lr=lr))
    masks = []
    for x, y in batches:
        before = model.shift.numpy().copy()
        _, out = step(x, y, return_outputs=True)
        mask = out / (x + before)
        assert set(np.round(np.unique(mask), 5).tolist()) <= {0.0, 2.0}
        assert np.all(mask.reshape(len(x), 6, 4).std(axis=2) < 1e-6), "whole channels"
        expected = before - lr * (mask * 2 * (out - y)).sum(axis=0)  # d loss / d shift, summed over the batch
        np.testing.assert_allclose(model.shift.numpy(), expected, rtol=1e-5, atol=1e-5)
        masks.append(mask)
    assert not np.array_equal(masks[0], masks[1]), "each step draws a new mask"


# ---- training steps through the modules with parameters --------------------------------------------------
def _train_model(lib, name):
    """Small models with the new layers, built by graphc's nn or torch.nn alike."""
    if name == "tokens":
        return lib.Sequential(lib.Embedding(12, 6, padding_idx=0), lib.LayerNorm(6), lib.GELU(),
                              lib.Flatten(), lib.Linear(24, 3))
    if name == "conv1d":
        return lib.Sequential(lib.Conv1d(3, 8, 3, padding=1), lib.GroupNorm(2, 8), lib.SiLU(),
                              lib.Conv1d(8, 4, 3, stride=2), lib.Hardswish(), lib.Flatten(), lib.Linear(24, 3))
    return lib.Sequential(lib.Linear(5, 8), lib.ELU(), lib.Linear(8, 8), lib.Softplus(beta=2.0),
                          lib.Unflatten(1, (2, 4)), lib.LayerNorm((2, 4), bias=False), lib.Flatten(),
                          lib.ReLU6(), lib.Linear(8, 6), lib.Hardtanh(-0.5, 0.5), lib.Linear(6, 3))


TRAIN_INPUTS = {"tokens": ("int", 12, (8, 4)), "conv1d": (8, 3, 13), "mlp": (8, 5)}


def torch_train(name, state, batches):
    tm = _train_model(torch.nn, name)
    tm.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in state.items()})
    opt, loss_fn = torch.optim.SGD(tm.parameters(), lr=0.1, momentum=0.9), torch.nn.MSELoss()
    losses = [loss.item() for _, loss in torch_steps(opt, lambda x, y: loss_fn(tm(x), y), batches)]
    return {"losses": np.array(losses), **prefixed("state", torch_state(tm))}


@pytest.mark.parametrize("name", list(TRAIN_INPUTS))
def test_training_steps_match_torch(name, torch_ref):
    gc.manual_seed(SEED)
    gm = _train_model(nn, name)
    rng = np.random.default_rng(10)
    batches = [(make_input(rng, TRAIN_INPUTS[name]), rng.standard_normal((8, 3)).astype(np.float32))
               for _ in range(4)]
    state = snapshot(gm)
    ref = torch_ref([name, state, batches], lambda: torch_train(name, state, batches))
    step = gc.compile(gm, example_inputs=batches[0], loss_fn=nn.MSELoss(),
                      optimizer=optim.SGD(gm.parameters(), lr=0.1, momentum=0.9))
    losses = [float(step(x, y)) for x, y in batches]
    np.testing.assert_allclose(losses, ref["losses"], rtol=TOL, atol=TOL)
    for key, want in unprefixed("state", ref).items():
        assert_close(gm.state_dict()[key], want, what=key)
        assert not np.array_equal(state[key], want), f"{key} did not train"
    if name == "tokens":  # padding_idx's row gets no gradient
        np.testing.assert_array_equal(gm.state_dict()["0.weight"][0], state["0.weight"][0])


# ---- ModuleDict, apply, named_modules --------------------------------------------------------------------
def _make_heads(lib):
    """A user module with a ModuleDict and a module registered twice (shared weights)."""

    class Heads(lib.Module):
        def __init__(self):
            super().__init__()
            self.trunk = lib.Sequential(lib.Linear(5, 6), lib.LayerNorm(6), lib.GELU())
            self.heads = lib.ModuleDict({"cls": lib.Linear(6, 3), "reg": lib.Sequential(lib.Linear(6, 2))})
            self.heads["extra"] = lib.Linear(6, 3)
            self.shared = self.heads["cls"]

        def forward(self, x):
            h = self.trunk(x)
            return self.heads["cls"](h) + self.heads["extra"](h) + self.shared(h) + self.heads["reg"](h).sum(1, True)

    return Heads()


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("direction", ["gc->torch", "torch->gc"])
def test_moduledict_in_user_module_matches_torch(direction, mode, torch_ref):
    gc.manual_seed(SEED)
    gm = _make_heads(nn)
    rng = np.random.default_rng(11)
    steps = [(make_input(rng, (4, 5)), mode) for _ in range(2)]

    def facts(tm):
        return {"modules": np.array([n for n, _ in tm.named_modules()]),
                "all_modules": np.array([n for n, _ in tm.named_modules(remove_duplicate=False)]),
                "prefixed": np.array([n for n, _ in tm.named_modules(prefix="net")]),
                "parameters": np.array([n for n, _ in tm.named_parameters()]),
                "keys": np.array(list(tm.heads.keys())), "applied": _applied(tm)}

    ref = check_against_torch(torch_ref, gm, lambda: _make_heads(torch.nn), direction, steps, "heads", facts=facts)
    for fact, value in facts(gm).items():
        assert value.tolist() == ref[fact].tolist(), fact


def _applied(module) -> np.ndarray:
    seen = []
    module.apply(lambda m: seen.append(type(m).__name__))
    return np.array(seen)


def test_moduledict_behaves_like_a_dict():
    d = nn.ModuleDict([("a", nn.ReLU()), ("b", nn.Linear(2, 2))])
    d.update({"c": nn.Tanh()})
    assert list(d) == ["a", "b", "c"] and len(d) == 3 and "b" in d
    assert isinstance(d.pop("a"), nn.ReLU) and list(d.keys()) == ["b", "c"]
    assert [type(m).__name__ for m in d.values()] == ["Linear", "Tanh"]
    assert list(d.state_dict()) == ["b.weight", "b.bias"]
    del d["b"]
    assert next(iter(d.items()))[0] == "c"
    d.clear()
    assert len(d) == 0
    with pytest.raises(gc.GraphcError):
        d(gc.zeros(1))


def test_apply_initialises_weights_in_place():
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Sequential(nn.Linear(4, 2)))

    def init(m):
        if isinstance(m, nn.Linear):
            m.weight.numpy()[...] = 0.5

    assert model.apply(init) is model
    assert all(np.all(m.weight.numpy() == 0.5) for m in model.modules() if isinstance(m, nn.Linear))
