"""Every nn module and loss of DESIGN section 2, forward against PyTorch with identical weights.

Each case builds the graphc module and the torch module from the *same* constructor call
(the signatures are meant to match) and makes both hold the same randomised state: graphc's
copied into torch ("gc->torch") or torch's ``state_dict``, converted with ``.numpy()``, loaded
into graphc ("torch->gc"). Both run in train or eval mode; outputs and, for BatchNorm, the
buffers after every forward are compared.

torch's side of each comparison is a function from numpy inputs to numpy outputs run through
the ``torch_ref`` fixture: live where torch is installed, else PyTorch 2.13's recorded
outputs (tests/torch_refs.py). Facts that need torch objects (state_dict keys and shapes,
submodule types, parameter names) are recorded the same way.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import graphc as gc
from graphc import nn
from conftest import HAVE_TORCH

if HAVE_TORCH:
    import torch

TOL = 1e-5  # max abs difference allowed between graphc and PyTorch, float32 everywhere
SEED = 0
STATE_SEED = 1  # randomize_state's generator, on whichever side the state starts


# ---- helpers ------------------------------------------------------------------------------
def max_abs_diff(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b))) if a.size else 0.0


def assert_close(gc_out, want, tol=TOL, what="output"):
    """Same shape, float32, and max |gc - torch| <= tol (``want``: torch's output as numpy)."""
    got = gc_out.numpy() if isinstance(gc_out, gc.Tensor) else np.asarray(gc_out)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != torch {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != torch {want.dtype}"
    assert np.all(np.isfinite(got) == np.isfinite(want)), f"{what}: non-finite values differ"
    diff = max_abs_diff(np.nan_to_num(got), np.nan_to_num(want))
    assert diff <= tol, f"{what}: max abs diff {diff:.3g} > {tol}"


def assert_same_state(gm, tsd: dict, tol=TOL):
    """graphc's state_dict against torch's (as numpy): keys in order, shapes, dtypes, values."""
    gsd = gm.state_dict()
    assert list(gsd) == list(tsd), "state_dict keys (and their order) differ from torch's"
    for key, t in tsd.items():
        g = np.asarray(gsd[key])
        assert g.shape == t.shape, f"{key}: shape {g.shape} != torch {t.shape}"
        assert g.dtype == t.dtype, f"{key}: dtype {g.dtype} != torch {t.dtype}"
        if key.endswith("num_batches_tracked"):
            assert int(g) == int(t), f"{key}: {int(g)} != torch {int(t)}"
        else:
            assert max_abs_diff(g, t) <= tol, f"{key}: max abs diff {max_abs_diff(g, t):.3g}"


def randomize_state(arrays: dict, rng) -> None:
    """Overwrite a numpy view of a state_dict in place with non-default values, so that a
    transfer that silently skipped a key would be noticed."""
    for key, a in arrays.items():
        if key.endswith("num_batches_tracked"):
            a[...] = 7
        elif key.endswith("running_var"):
            a[...] = rng.uniform(0.5, 2.0, a.shape)
        else:
            a[...] = rng.standard_normal(a.shape) * 0.5


def torch_to_gc(tsd: dict, gm):
    """Load torch's state_dict (as numpy) into the graphc module; no key may be left over."""
    result = gm.load_state_dict({k: np.array(v, copy=True) for k, v in tsd.items()})
    assert list(result.missing_keys) == [] and list(result.unexpected_keys) == []


def snapshot(gm) -> dict:
    return {k: np.array(v, copy=True) for k, v in gm.state_dict().items()}


def prefixed(prefix: str, arrays: dict) -> dict:
    return {f"{prefix}.{k}": v for k, v in arrays.items()}


def unprefixed(prefix: str, ref: dict) -> dict:
    """The ``prefix.``-named entries of a reference, in recorded order, without the prefix."""
    return {k[len(prefix) + 1:]: v for k, v in ref.items() if k.startswith(prefix + ".")}


def build_gc(name, args, kwargs):
    gc.manual_seed(SEED)
    return getattr(nn, name)(*args, **kwargs)


def torch_module(name, args, kwargs):
    torch.manual_seed(SEED)
    return getattr(torch.nn, name)(*args, **kwargs)


def randn(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


# ---- torch's side (runs only where torch is installed) ---------------------------------------
def torch_state(tm) -> dict:
    """Copies (the module keeps updating its buffers in place)."""
    return {k: v.detach().numpy().copy() for k, v in tm.state_dict().items()}


def gc_to_torch(state: dict, tm):
    """Load graphc's state (numpy arrays) into the torch module (torch.from_numpy on copies)."""
    tm.load_state_dict({k: torch.from_numpy(np.array(v, copy=True)) for k, v in state.items()})


def torch_forward(tm, x, mode):
    tm.train(mode == "train")
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns about implicit softmax dims
        return tm(torch.from_numpy(x.copy()))


def torch_run(make_torch, gc_state, steps, facts=None) -> dict:
    """torch's side of a parity run: the state after the transfer (``state0.*``: graphc's
    ``gc_state`` loaded, or torch's own randomised when it is None), then for every
    ``(x, mode)`` step the output ``out<i>`` and the state ``state<i+1>.*``."""
    tm = make_torch()
    if gc_state is None:
        with torch.no_grad():
            randomize_state({k: v.numpy() for k, v in tm.state_dict().items()}, np.random.default_rng(STATE_SEED))
    else:
        gc_to_torch(gc_state, tm)
    ref = {**(facts(tm) if facts else {}), **prefixed("state0", torch_state(tm))}
    for i, (x, mode) in enumerate(steps):
        ref[f"out{i}"] = torch_forward(tm, x, mode)
        ref.update(prefixed(f"state{i + 1}", torch_state(tm)))
    return ref


# ---- the comparison ------------------------------------------------------------------------------
def check_against_torch(torch_ref, gm, make_torch, direction, steps, spec, facts=None, name="") -> dict:
    """Give ``gm`` and torch the same randomised state (copied in ``direction``), run ``steps``
    (a list of ``(x, mode)``) through both and compare every output and state; returns torch's
    reference (for ``facts``). ``spec`` names the case in the reference's input fingerprint."""
    gc_state = None
    if direction == "gc->torch":
        randomize_state(gm.state_dict(), np.random.default_rng(STATE_SEED))  # shares storage
        gc_state = snapshot(gm)
    ref = torch_ref([spec, direction, gc_state, steps], lambda: torch_run(make_torch, gc_state, steps, facts), name)
    if direction == "torch->gc":
        torch_to_gc(unprefixed("state0", ref), gm)
    assert_same_state(gm, unprefixed("state0", ref), tol=0.0)
    for i, (x, mode) in enumerate(steps):
        got = gm.train(mode == "train")(gc.tensor(x))
        assert_close(got, ref[f"out{i}"], what=f"{name} forward {i}")
        assert_same_state(gm, unprefixed(f"state{i + 1}", ref))  # BN buffers updated as torch does
    return ref


# ---- modules with parameters: both transfer directions, train and eval ----------------------
PARAM_CASES = [
    # (class name, args, kwargs, input shape)
    ("Linear", (6, 4), {}, (5, 6)),
    ("Linear", (6, 4), {"bias": False}, (5, 6)),
    ("Linear", (6, 3), {}, (2, 7, 6)),  # leading dims broadcast, as in torch
    ("Conv2d", (3, 8, 3), {}, (2, 3, 9, 9)),
    ("Conv2d", (3, 4, 3), {"stride": 2, "padding": 1}, (2, 3, 9, 10)),
    ("Conv2d", (3, 4, (3, 5)), {"stride": (2, 1), "padding": (1, 2)}, (2, 3, 8, 9)),
    ("Conv2d", (3, 4, 3), {"padding": "same"}, (2, 3, 7, 8)),
    ("Conv2d", (3, 4, (3, 5)), {"padding": "same", "dilation": 2}, (2, 3, 11, 12)),
    ("Conv2d", (3, 4, 3), {"padding": "valid"}, (2, 3, 7, 8)),
    ("Conv2d", (3, 4, 3), {"dilation": 2, "padding": 1}, (2, 3, 9, 9)),
    ("Conv2d", (3, 4, 3), {"dilation": (2, 1), "stride": (1, 2)}, (2, 3, 9, 9)),
    ("Conv2d", (4, 6, 3), {"groups": 2, "padding": 1}, (2, 4, 6, 6)),
    ("Conv2d", (4, 8, 3), {"groups": 4, "stride": 2}, (2, 4, 7, 7)),  # depthwise-multiplier
    ("Conv2d", (3, 5, 3), {"bias": False}, (2, 3, 6, 6)),
    ("Conv2d", (3, 5, 1), {}, (2, 3, 4, 4)),
    ("BatchNorm1d", (5,), {}, (8, 5)),
    ("BatchNorm1d", (5,), {"momentum": 0.3, "eps": 1e-3}, (8, 5, 7)),
    ("BatchNorm2d", (4,), {}, (6, 4, 5, 5)),
    ("BatchNorm2d", (4,), {"momentum": 0.5}, (3, 4, 2, 3)),
    ("BatchNorm2d", (4,), {"affine": False}, (6, 4, 5, 5)),
    ("BatchNorm2d", (4,), {"track_running_stats": False}, (6, 4, 5, 5)),
]


def case_id(case):
    name, args, kwargs, shape = case
    kw = ",".join(f"{k}={v}" for k, v in kwargs.items())
    return f"{name}{args}{'[' + kw + ']' if kw else ''}-in{list(shape)}"


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("direction", ["gc->torch", "torch->gc"])
@pytest.mark.parametrize("case", PARAM_CASES, ids=[case_id(c) for c in PARAM_CASES])
def test_parameterised_module_matches_torch(case, direction, mode, torch_ref):
    name, args, kwargs, shape = case
    rng = np.random.default_rng(2)
    steps = [(randn(rng, *shape) * 2 + 0.5, mode) for _ in range(2)]  # BN's running stats compound
    check_against_torch(torch_ref, build_gc(name, args, kwargs), lambda: torch_module(name, args, kwargs),
                        direction, steps, case)


def test_initial_state_layout_matches_torch(torch_ref):
    """Same keys, order, shapes and dtypes as torch before any transfer; init bounds are torch's."""
    for case in PARAM_CASES:
        name, args, kwargs, _ = case
        gsd = build_gc(name, args, kwargs).state_dict()
        # the layout only: zeros of torch's shapes and dtypes, in torch's order
        tsd = torch_ref(case, lambda: {k: np.zeros(v.shape, v.dtype)
                                       for k, v in torch_state(torch_module(name, args, kwargs)).items()},
                        name=case_id(case))
        assert list(gsd) == list(tsd), name
        for k in tsd:
            assert gsd[k].shape == tsd[k].shape and gsd[k].dtype == tsd[k].dtype, (name, k)
            if k.endswith(("weight", "bias")) and name in ("Linear", "Conv2d"):
                fan_in = int(np.prod(tsd["weight"].shape[1:]))
                assert np.abs(gsd[k]).max() <= 1 / np.sqrt(fan_in) + 1e-7, (name, k)
        if name.startswith("BatchNorm") and "running_mean" in gsd:
            np.testing.assert_array_equal(gsd["running_mean"], 0)
            np.testing.assert_array_equal(gsd["running_var"], 1)
            assert gsd["num_batches_tracked"].shape == () and int(gsd["num_batches_tracked"]) == 0


def test_init_is_seeded_by_manual_seed():
    gc.manual_seed(3)
    a = nn.Conv2d(3, 4, 3).state_dict()
    gc.manual_seed(3)
    b = nn.Conv2d(3, 4, 3).state_dict()
    gc.manual_seed(4)
    c = nn.Conv2d(3, 4, 3).state_dict()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    assert not np.array_equal(a["weight"], c["weight"])


def test_batchnorm_num_batches_tracked_round_trips_both_ways(torch_ref):
    x = randn(np.random.default_rng(2), 4, 3, 2, 2)

    def torch_counter_run():  # torch's counter at 41, then one training forward
        tm = torch.nn.BatchNorm2d(3)
        tm.num_batches_tracked.fill_(41)
        before = prefixed("state0", torch_state(tm))
        torch_forward(tm, x, "train")
        return {**before, **prefixed("state1", torch_state(tm))}

    def torch_reload(state):  # a fresh torch BatchNorm2d loading graphc's state
        tm = torch.nn.BatchNorm2d(3)
        gc_to_torch(state, tm)
        return torch_state(tm)

    ref = torch_ref([x], torch_counter_run)
    gm = build_gc("BatchNorm2d", (3,), {})
    torch_to_gc(unprefixed("state0", ref), gm)
    assert gm.num_batches_tracked.numpy().dtype == np.int64
    assert int(gm.state_dict()["num_batches_tracked"]) == 41
    gm.train()(gc.tensor(x))
    assert int(gm.state_dict()["num_batches_tracked"]) == int(ref["state1.num_batches_tracked"]) == 42
    # and back: a fresh torch BatchNorm2d takes graphc's int64 counter
    state = snapshot(gm)
    back = torch_ref([state], lambda: torch_reload(state), "back")
    assert back["num_batches_tracked"].dtype == np.int64 and int(back["num_batches_tracked"]) == 42
    assert_same_state(gm, back, tol=0.0)


def test_batchnorm_eval_after_train_uses_updated_running_stats(torch_ref):
    rng = np.random.default_rng(5)
    steps = [(randn(rng, 8, 4, 3, 3) * 3 + 1, "train") for _ in range(3)] + [(randn(rng, 2, 4, 3, 3), "eval")]
    gm = build_gc("BatchNorm2d", (4,), {})
    check_against_torch(torch_ref, gm, lambda: torch_module("BatchNorm2d", (4,), {}), "gc->torch", steps,
                        "BatchNorm2d(4)")
    assert int(gm.num_batches_tracked.numpy()) == 10  # 7 (randomised) + 3 train calls


def test_batchnorm_eval_does_not_touch_buffers():
    gm = build_gc("BatchNorm1d", (3,), {})
    before = {k: v.copy() for k, v in gm.state_dict().items()}
    gm.eval()(gc.tensor(randn(np.random.default_rng(0), 6, 3)))
    for k, v in gm.state_dict().items():
        np.testing.assert_array_equal(v, before[k])


# ---- parameter-free modules: train and eval ------------------------------------------------
STATELESS_CASES = [
    ("ReLU", (), {}, (4, 5, 3)),
    ("LeakyReLU", (), {}, (4, 5, 3)),
    ("LeakyReLU", (0.2,), {}, (4, 5)),
    ("Sigmoid", (), {}, (4, 5, 3)),
    ("Tanh", (), {}, (4, 5, 3)),
    ("Softmax", (), {"dim": 1}, (4, 5)),
    ("Softmax", (), {"dim": -1}, (2, 4, 5)),
    ("Softmax", (), {"dim": 0}, (4, 5)),
    ("Softmax", (), {}, (2, 4, 5)),  # dim=None: torch's implicit choice (0 for 3-D)
    ("Softmax", (), {}, (2, 3, 4, 5)),  # dim=None: 1 for 4-D
    ("LogSoftmax", (), {"dim": 1}, (4, 5)),
    ("LogSoftmax", (), {"dim": -1}, (2, 4, 5)),
    ("LogSoftmax", (), {}, (4, 5)),
    ("Flatten", (), {}, (2, 3, 4, 5)),
    ("Flatten", (), {"start_dim": 0}, (2, 3, 4, 5)),
    ("Flatten", (), {"start_dim": 1, "end_dim": 2}, (2, 3, 4, 5)),
    ("Flatten", (), {"start_dim": 2}, (2, 3, 4, 5)),
    ("Flatten", (), {"start_dim": -3, "end_dim": -2}, (2, 3, 4, 5)),
    ("Identity", (), {}, (3, 4)),
    ("Identity", (54,), {"unused_argument": 0.1}, (3, 4)),  # torch ignores its arguments
    ("MaxPool2d", (2,), {}, (2, 3, 8, 8)),
    ("MaxPool2d", (3,), {"stride": 2}, (2, 3, 9, 8)),
    ("MaxPool2d", (3,), {"stride": 2, "padding": 1}, (2, 3, 9, 8)),
    ("MaxPool2d", ((2, 3),), {"stride": (1, 2), "padding": (1, 1)}, (2, 2, 5, 7)),
    ("MaxPool2d", (3,), {"stride": 1, "padding": 1, "dilation": 2}, (1, 2, 7, 7)),
    ("AvgPool2d", (2,), {}, (2, 3, 8, 8)),
    ("AvgPool2d", (3,), {"stride": 2}, (2, 3, 9, 8)),
    ("AvgPool2d", (3,), {"stride": 2, "padding": 1}, (2, 3, 9, 8)),
    ("AvgPool2d", (3,), {"stride": 2, "padding": 1, "count_include_pad": False}, (2, 3, 9, 8)),
    ("AvgPool2d", (3,), {"stride": 1, "padding": 1, "count_include_pad": True}, (2, 3, 5, 5)),
    ("AvgPool2d", (3,), {"stride": 1, "padding": 1, "count_include_pad": False}, (2, 3, 5, 5)),
    ("AvgPool2d", ((2, 4),), {"stride": (2, 1), "padding": (1, 2), "count_include_pad": False}, (1, 2, 6, 7)),
    ("AdaptiveAvgPool2d", (4,), {}, (2, 3, 8, 8)),  # divisible
    ("AdaptiveAvgPool2d", (3,), {}, (2, 3, 7, 7)),  # non-divisible, overlapping windows
    ("AdaptiveAvgPool2d", ((2, 3),), {}, (2, 3, 5, 7)),
    ("AdaptiveAvgPool2d", (1,), {}, (2, 3, 5, 7)),  # global average pool
    ("AdaptiveAvgPool2d", ((None, 3),), {}, (2, 3, 5, 7)),
    ("AdaptiveAvgPool2d", ((5, 9),), {}, (1, 2, 3, 4)),  # upsampling
]


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("case", STATELESS_CASES, ids=[case_id(c) for c in STATELESS_CASES])
def test_stateless_module_matches_torch(case, mode, torch_ref):
    name, args, kwargs, shape = case
    gm = build_gc(name, args, kwargs)
    assert gm.state_dict() == {}  # and torch's is empty too: compared after the transfer
    x = randn(np.random.default_rng(3), *shape) * 3
    check_against_torch(torch_ref, gm, lambda: torch_module(name, args, kwargs), "gc->torch", [(x, mode)], case)


def test_activations_at_extreme_inputs(torch_ref):
    x = np.array([[-100.0, -30.0, -1e-3, 0.0, 1e-3, 30.0, 100.0]], np.float32)
    for name in ("Sigmoid", "Tanh", "Softmax", "LogSoftmax", "LeakyReLU"):
        kwargs = {"dim": 1} if "Softmax" in name else {}
        check_against_torch(torch_ref, build_gc(name, (), kwargs), lambda: torch_module(name, (), kwargs),
                            "gc->torch", [(x, "eval")], (name, kwargs), name=name)


def test_max_pool_padding_is_negative_infinity(torch_ref):
    """Padded border cells must never win the max (torch pads with -inf, not 0)."""
    x = -np.random.default_rng(4).uniform(1, 2, (1, 2, 5, 5)).astype(np.float32)
    case = ("MaxPool2d", (3,), {"stride": 2, "padding": 1})
    gm = build_gc(*case)
    check_against_torch(torch_ref, gm, lambda: torch_module(*case), "gc->torch", [(x, "eval")], case)
    assert gm(gc.tensor(x)).numpy().max() < 0


def test_load_state_dict_strictness_and_shape_check():
    gm = nn.Linear(3, 2)
    with pytest.raises(gc.GraphcError, match="bias"):
        gm.load_state_dict({"weight": np.zeros((2, 3), np.float32)})
    result = gm.load_state_dict({"weight": np.zeros((2, 3), np.float32), "extra": np.zeros(1)}, strict=False)
    assert list(result.missing_keys) == ["bias"] and list(result.unexpected_keys) == ["extra"]
    np.testing.assert_array_equal(gm.weight.numpy(), 0)
    with pytest.raises(gc.ShapeError):
        gm.load_state_dict({"weight": np.zeros((3, 2), np.float32), "bias": np.zeros(2, np.float32)})


# ---- Dropout ---------------------------------------------------------------------------------
@pytest.mark.parametrize("p", [0.0, 0.2, 0.5, 1.0])
def test_dropout_eval_is_identity_like_torch(p, torch_ref):
    gm = build_gc("Dropout", (p,), {})
    x = randn(np.random.default_rng(4), 6, 7)
    check_against_torch(torch_ref, gm, lambda: torch_module("Dropout", (p,), {}), "gc->torch", [(x, "eval")], p)
    np.testing.assert_array_equal(gm(gc.tensor(x)).numpy(), x)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_dropout_train_statistics(p):
    """RNGs differ from torch's, so check the law: zeros with rate p, survivors scaled 1/(1-p)."""
    gc.manual_seed(SEED)
    x = np.random.default_rng(5).uniform(1.0, 2.0, (200, 500)).astype(np.float32)
    out = nn.Dropout(p).train()(gc.tensor(x)).numpy()
    assert out.shape == x.shape and out.dtype == np.float32
    dropped = out == 0
    assert abs(dropped.mean() - p) < 0.01  # 100k draws: std of the rate is < 0.0016
    np.testing.assert_allclose(out[~dropped], x[~dropped] / (1 - p), rtol=1e-6)
    # the expectation is preserved (torch's scaling), up to sampling noise
    assert abs(out.mean() / x.mean() - 1) < 0.02
    # a second call draws a different mask; reseeding reproduces the first
    again = nn.Dropout(p).train()(gc.tensor(x)).numpy()
    assert not np.array_equal(again == 0, dropped)
    gc.manual_seed(SEED)
    np.testing.assert_array_equal(nn.Dropout(p).train()(gc.tensor(x)).numpy(), out)


def test_dropout_train_edge_probabilities():
    x = randn(np.random.default_rng(6), 10, 10)
    np.testing.assert_array_equal(nn.Dropout(0.0).train()(gc.tensor(x)).numpy(), x)
    np.testing.assert_array_equal(nn.Dropout(1.0).train()(gc.tensor(x)).numpy(), np.zeros_like(x))
    with pytest.raises(gc.GraphcError):
        nn.Dropout(1.5)


# ---- containers ----------------------------------------------------------------------------
def _sequential(lib):
    return lib.Sequential(lib.Conv2d(2, 4, 3, padding=1), lib.BatchNorm2d(4), lib.ReLU(), lib.MaxPool2d(2),
                          lib.Conv2d(4, 4, 3, padding="same", groups=2, bias=False), lib.BatchNorm2d(4),
                          lib.LeakyReLU(0.1), lib.AdaptiveAvgPool2d((3, 2)), lib.Flatten(), lib.Dropout(0.0),
                          lib.Linear(24, 5), lib.Identity(), lib.LogSoftmax(dim=1))


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("direction", ["gc->torch", "torch->gc"])
def test_sequential_matches_torch(direction, mode, torch_ref):
    gc.manual_seed(SEED)
    gm = _sequential(nn)
    rng = np.random.default_rng(7)
    steps = [(randn(rng, 6, 2, 8, 10), mode) for _ in range(2)]
    ref = check_against_torch(torch_ref, gm, lambda: _sequential(torch.nn), direction, steps, "sequential",
                              facts=lambda tm: {"types": np.array([type(m).__name__ for m in tm])})
    assert [type(m).__name__ for m in gm] == ref["types"].tolist()


def _make_stack(lib):
    """A user module holding a ModuleList; the same class body works for both libraries."""

    class Stack(lib.Module):
        def __init__(self):
            super().__init__()
            self.layers = lib.ModuleList([lib.Linear(5, 8), lib.Linear(8, 8)])
            self.layers.append(lib.Linear(8, 3))
            self.norms = lib.ModuleList([lib.BatchNorm1d(8), lib.BatchNorm1d(8)])
            self.act = lib.Tanh()

        def forward(self, x):
            for layer, norm in zip(self.layers, self.norms):
                x = self.act(norm(layer(x)))
            return self.layers[-1](x)

    return Stack()


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("direction", ["gc->torch", "torch->gc"])
def test_modulelist_in_user_module_matches_torch(direction, mode, torch_ref):
    gc.manual_seed(SEED)
    gm = _make_stack(nn)
    assert len(gm.layers) == 3 and len(list(gm.layers)) == 3
    rng = np.random.default_rng(8)
    steps = [(randn(rng, 7, 5), mode) for _ in range(2)]

    def names(tm):
        return {"parameters": np.array([n for n, _ in tm.named_parameters()]),
                "buffers": np.array([n for n, _ in tm.named_buffers()])}

    ref = check_against_torch(torch_ref, gm, lambda: _make_stack(torch.nn), direction, steps, "stack", facts=names)
    assert [n for n, _ in gm.named_parameters()] == ref["parameters"].tolist()
    assert [n for n, _ in gm.named_buffers()] == ref["buffers"].tolist()


def test_modulelist_is_not_callable():
    with pytest.raises(gc.GraphcError):
        nn.ModuleList([nn.ReLU()])(gc.tensor(np.zeros((2, 2), np.float32)))


# ---- losses ----------------------------------------------------------------------------------
def check_loss(torch_ref, name, kwargs, logits, target, ref_name=""):
    """graphc's loss against torch's for the same (logits, target); returns graphc's."""
    def torch_loss():
        tm = torch_module(name, (), kwargs)
        return {"loss": tm(torch.from_numpy(logits.copy()), torch.from_numpy(target.copy()))}

    want = torch_ref([name, kwargs, logits, target], torch_loss, ref_name)["loss"]
    got = build_gc(name, (), kwargs)(gc.tensor(logits), gc.tensor(target))
    assert_close(got, want, what=f"{name}{kwargs}")
    return got


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_matches_torch(reduction, torch_ref):
    rng = np.random.default_rng(9)
    a, b = randn(rng, 6, 4, 3), randn(rng, 6, 4, 3)
    check_loss(torch_ref, "MSELoss", {"reduction": reduction}, a, b)


@pytest.mark.parametrize("label_smoothing", [0.0, 0.1, 1.0])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_class_targets_matches_torch(reduction, label_smoothing, torch_ref):
    rng = np.random.default_rng(10)
    logits = randn(rng, 8, 5) * 4
    target = rng.integers(0, 5, 8).astype(np.int64)
    check_loss(torch_ref, "CrossEntropyLoss", {"reduction": reduction, "label_smoothing": label_smoothing},
               logits, target)


@pytest.mark.parametrize("label_smoothing", [0.0, 0.2])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_probability_targets_matches_torch(reduction, label_smoothing, torch_ref):
    rng = np.random.default_rng(11)
    logits = randn(rng, 8, 5) * 4
    p = np.exp(randn(rng, 8, 5))
    target = (p / p.sum(1, keepdims=True)).astype(np.float32)
    check_loss(torch_ref, "CrossEntropyLoss", {"reduction": reduction, "label_smoothing": label_smoothing},
               logits, target)


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_cross_entropy_spatial_class_targets_matches_torch(reduction, torch_ref):
    """(N, C, d1, d2) logits with (N, d1, d2) class targets, as for segmentation."""
    rng = np.random.default_rng(12)
    logits = randn(rng, 3, 4, 2, 5)
    target = rng.integers(0, 4, (3, 2, 5)).astype(np.int64)
    check_loss(torch_ref, "CrossEntropyLoss", {"reduction": reduction, "label_smoothing": 0.1}, logits, target)


def test_cross_entropy_large_logits_stay_finite(torch_ref):
    logits = np.array([[1000.0, -1000.0, 0.0], [-500.0, 500.0, 20.0]], np.float32)
    target = np.array([1, 1], np.int64)
    check_loss(torch_ref, "CrossEntropyLoss", {"reduction": "none"}, logits, target)


def test_cross_entropy_ignore_index_matches_torch(torch_ref):
    """Targets equal to ignore_index (-100 by default) contribute nothing, and 'mean'
    divides by the number of non-ignored targets (torch's semantics)."""
    rng = np.random.default_rng(13)
    logits = randn(rng, 6, 4)
    target = np.array([0, -100, 3, 2, -100, 1], np.int64)
    check_loss(torch_ref, "CrossEntropyLoss", {}, logits, target)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_bce_with_logits_matches_torch(reduction, torch_ref):
    rng = np.random.default_rng(14)
    logits = randn(rng, 6, 5) * 3
    target = rng.uniform(0, 1, (6, 5)).astype(np.float32)
    target[:3] = np.round(target[:3])  # hard and soft labels
    check_loss(torch_ref, "BCEWithLogitsLoss", {"reduction": reduction}, logits, target)


def test_bce_with_logits_large_logits(torch_ref):
    logits = np.array([-50.0, -50.0, 50.0, 50.0, -100.0, 100.0, -30.0, 30.0, 0.0], np.float32)
    target = np.array([0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.5, 0.5, 1.0], np.float32)
    got = check_loss(torch_ref, "BCEWithLogitsLoss", {"reduction": "none"}, logits, target, "none")
    assert np.all(np.isfinite(got.numpy()))
    check_loss(torch_ref, "BCEWithLogitsLoss", {"reduction": "mean"}, logits, target, "mean")
