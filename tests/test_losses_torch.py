"""Losses and functional forms against PyTorch 2.13: every loss for every reduction, forward
and gradient, the edge cases PyTorch defines (all targets ignored, zero class weights,
probabilities of exactly 0 and 1 with the -100 log clamp), and the same code traced into
compiled training steps and eval plans run at two batch sizes.

Each function case is data: the ``F`` name, its keyword arguments and seeded numpy inputs.
torch's side (``torch.nn.functional`` with the same arguments; the input gradients come from
``torch.autograd.grad`` with a seeded cotangent) goes through the ``torch_ref`` fixture:
live where torch is installed, else the recording in tests/data/torch_test_losses_torch.npz.
graphc's side runs eagerly for the forward, and for the gradient the call is traced with the
differentiated inputs as parameters, autodiff derives the backward, and a Plan runs both.

Tolerance: rtol 1e-5 / atol 1e-6, float32 everywhere; NaN and inf must sit in the same places.
"""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.nn.functional as F
from graphc import nn, optim
from graphc.tracing import trace_model
from graphc.executor import Plan
from graphc.passes.autodiff import autodiff
from conftest import HAVE_TORCH
from torch_refs import torch_steps

if HAVE_TORCH:
    import torch

RTOL, ATOL = 1e-5, 1e-6
REDUCTIONS = ("mean", "sum", "none")


# ---- inputs ---------------------------------------------------------------------------------
def randn(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def uniform(rng, lo, hi, *shape):
    return rng.uniform(lo, hi, shape).astype(np.float32)


def log_probs(rng, *shape):
    x = randn(rng, *shape, scale=2.0)
    x = x - x.max(axis=1, keepdims=True)
    return (x - np.log(np.exp(x).sum(axis=1, keepdims=True))).astype(np.float32)


def probs(rng, *shape):
    e = np.exp(randn(rng, *shape))
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


def classes(rng, n_classes, *shape, ignored=()):
    t = rng.integers(0, n_classes, shape).astype(np.int64)
    t.reshape(-1)[list(ignored)] = -100
    return t


# ---- comparisons ----------------------------------------------------------------------------
def assert_close(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != torch {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != torch {want.dtype}"
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, equal_nan=True, err_msg=what)


def _torch_kwargs(kwargs):
    return {k: torch.from_numpy(v.copy()) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}


def _gc_kwargs(kwargs):
    return {k: gc.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}


def torch_call(name, kwargs, arrays, wrt, cotangent):
    """torch's output and the gradients of ``arrays[i]`` for i in ``wrt`` (cotangent ``cotangent``)."""
    ts = [torch.tensor(a, requires_grad=i in wrt) for i, a in enumerate(arrays)]
    out = getattr(torch.nn.functional, name)(*ts, **_torch_kwargs(kwargs))
    grads = torch.autograd.grad(out, [ts[i] for i in wrt], torch.from_numpy(cotangent)) if wrt else []
    return {"out": out, **{f"grad{i}": g for i, g in zip(wrt, grads)}}


class Call(nn.Module):
    """``F.<name>(*arrays, **kwargs)`` with ``arrays[i]`` for i in ``wrt`` held as parameters,
    the rest (and the cotangent) as traced inputs; returns (<out, cotangent>, out)."""

    def __init__(self, name, kwargs, arrays, wrt):
        super().__init__()
        self.fn, self.kwargs, self.wrt, self.n = getattr(F, name), _gc_kwargs(kwargs), wrt, len(arrays)
        for i in wrt:
            self.register_parameter(f"a{i}", nn.Parameter(arrays[i].copy()))

    def forward(self, cotangent, *data):
        data = iter(data)
        args = [getattr(self, f"a{i}") if i in self.wrt else next(data) for i in range(self.n)]
        out = self.fn(*args, **self.kwargs)
        return (out * cotangent).sum(), out


def gc_call(name, kwargs, arrays, wrt, cotangent):
    """graphc's output and gradients: traced, differentiated by autodiff, run as a Plan."""
    model = Call(name, kwargs, arrays, wrt)
    data = [cotangent] + [a for i, a in enumerate(arrays) if i not in wrt]
    graph, tracer = trace_model(model, tuple(data), root=model, dynamic_batch=False)
    names = [f"a{i}" for i in wrt]
    graph, grads = autodiff(graph, graph.outputs[0], names)
    graph.outputs = [graph.outputs[1]] + [grads[n] for n in names]
    outs = Plan(graph, tracer.state_arrays, seed=0)(*data)
    return {"out": outs[0], **{f"grad{i}": g for i, g in zip(wrt, outs[1:])}}


def fingerprintable(a):
    """The inputs' fingerprint sums float moments, which inf or NaN would make NaN: such arrays
    are fingerprinted as their finite part plus exact masks of where the inf and NaN are."""
    if a.dtype.kind != "f" or np.all(np.isfinite(a)):
        return a
    return [np.nan_to_num(a, nan=0.0, posinf=0.0, neginf=0.0), np.isnan(a), np.isposinf(a), np.isneginf(a)]


def check_function(torch_ref, name, kwargs, arrays, wrt=(0,), seed=0, ref_name=""):
    """Forward (eager and traced) and the gradients of ``arrays[wrt]`` against torch's."""
    eager = getattr(F, name)(*[gc.tensor(a) for a in arrays], **_gc_kwargs(kwargs)).numpy()
    cotangent = np.random.default_rng(seed).standard_normal(eager.shape).astype(np.float32)
    want = torch_ref([name, kwargs, [fingerprintable(a) for a in arrays], list(wrt), cotangent],
                     lambda: torch_call(name, kwargs, arrays, list(wrt), cotangent), ref_name)
    what = f"F.{name}({', '.join(f'{k}={v!r}' for k, v in kwargs.items() if not isinstance(v, np.ndarray))})"
    assert_close(eager, want["out"], f"{what} eager forward")
    got = gc_call(name, kwargs, arrays, list(wrt), cotangent)
    assert_close(got["out"], want["out"], f"{what} traced forward")
    for i in wrt:
        assert_close(got[f"grad{i}"], want[f"grad{i}"], f"{what} gradient of input {i}")
    return got


# ---- regression losses ----------------------------------------------------------------------
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("name", ["l1_loss", "mse_loss"])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_l1_and_mse_match_torch(name, reduction, weighted, torch_ref):
    rng = np.random.default_rng(1)
    x, y = randn(rng, 6, 5), randn(rng, 6, 5)
    x[0, :2] = y[0, :2]  # exact ties: l1's gradient is sign(0) = 0 there, as in torch
    kwargs = {"reduction": reduction, **({"weight": uniform(rng, 0, 2, 6, 5)} if weighted else {})}
    check_function(torch_ref, name, kwargs, [x, y], wrt=(0, 1))


def _kinked(rng, threshold):
    """Differences on both sides of the kink at |d| = threshold, exactly on it, and at 0."""
    y = randn(rng, 6, 5)
    d = randn(rng, 6, 5, scale=2 * max(threshold, 0.5))
    d[0] = [threshold, -threshold, 0.0, threshold * 0.5, -threshold * 2]
    return [(y + d).astype(np.float32), y] if threshold == 0 else [d, np.zeros_like(d)]


@pytest.mark.parametrize("beta", [1.0, 0.5, 0.0])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_smooth_l1_matches_torch(reduction, beta, torch_ref):
    rng = np.random.default_rng(2)
    check_function(torch_ref, "smooth_l1_loss", {"reduction": reduction, "beta": beta}, _kinked(rng, beta), wrt=(0, 1))


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("delta", [1.0, 2.5])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_huber_matches_torch(reduction, delta, weighted, torch_ref):
    rng = np.random.default_rng(3)
    kwargs = {"reduction": reduction, "delta": delta, **({"weight": uniform(rng, 0, 2, 6, 5)} if weighted else {})}
    check_function(torch_ref, "huber_loss", kwargs, _kinked(rng, delta), wrt=(0, 1))


# ---- classification losses ------------------------------------------------------------------
CLASS_WEIGHT = np.array([0.5, 1.0, 2.0, 0.25], np.float32)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_loss_matches_torch(reduction, weighted, torch_ref):
    rng = np.random.default_rng(4)
    kwargs = {"reduction": reduction, **({"weight": CLASS_WEIGHT} if weighted else {})}
    check_function(torch_ref, "nll_loss", kwargs, [log_probs(rng, 7, 4), classes(rng, 4, 7, ignored=[1, 4])])


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_loss_spatial_1d_and_custom_ignore_index(reduction, torch_ref):
    rng = np.random.default_rng(5)
    spatial = [log_probs(rng, 3, 4, 2, 5), classes(rng, 4, 3, 2, 5, ignored=[0, 7])]
    check_function(torch_ref, "nll_loss", {"reduction": reduction, "weight": CLASS_WEIGHT}, spatial)
    # ignore_index may be a real class: those targets drop out, the others count
    check_function(torch_ref, "nll_loss", {"reduction": reduction, "ignore_index": 2},
                   [log_probs(rng, 8, 4), np.array([0, 2, 1, 2, 3, 0, 2, 1])], ref_name="ignore-2")
    one = log_probs(rng, 1, 4)[0]
    check_function(torch_ref, "nll_loss", {"reduction": reduction, "weight": CLASS_WEIGHT}, [one, np.array(3)],
                   ref_name="1d")


def test_nll_loss_keeps_minus_inf_of_other_classes_out(torch_ref):
    """log(0) = -inf in a non-target class must not leak into the loss (0 * -inf = NaN)."""
    with np.errstate(divide="ignore"):
        logp = np.log(np.array([[0.0, 1.0, 0.0], [0.5, 0.5, 0.0]], np.float32))
    for reduction in REDUCTIONS:
        got = check_function(torch_ref, "nll_loss", {"reduction": reduction}, [logp, np.array([1, 0])],
                             ref_name=reduction)
        assert np.all(np.isfinite(got["out"]))


@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
def test_cross_entropy_with_masked_logits(label_smoothing, torch_ref):
    """A class masked out with a -inf logit: without smoothing PyTorch never forms the sum over
    all classes, so the loss and its gradient stay finite; with smoothing the loss is inf."""
    logits = np.array([[2.0, -np.inf, 0.5], [-np.inf, 1.0, 0.0]], np.float32)
    for reduction in REDUCTIONS:
        got = check_function(torch_ref, "cross_entropy", {"reduction": reduction, "label_smoothing": label_smoothing},
                             [logits, np.array([0, 2])], ref_name=reduction)
        assert np.all(np.isfinite(got["grad0"]))
        assert np.all(np.isfinite(got["out"])) == (label_smoothing == 0.0)


@pytest.mark.parametrize("label_smoothing", [0.0, 0.1, 1.0])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_weighted_cross_entropy_matches_torch(reduction, label_smoothing, torch_ref):
    """PyTorch's weighted mean: sum(w_y * loss) / sum(w_y) over non-ignored targets, with the
    smoothing term weighted per class and divided by the same total."""
    rng = np.random.default_rng(6)
    kwargs = {"reduction": reduction, "label_smoothing": label_smoothing, "weight": CLASS_WEIGHT}
    check_function(torch_ref, "cross_entropy", kwargs, [randn(rng, 7, 4, scale=3), classes(rng, 4, 7, ignored=[2, 5])])


@pytest.mark.parametrize("label_smoothing", [0.0, 0.2])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_weighted_cross_entropy_spatial_probabilities_and_1d(reduction, label_smoothing, torch_ref):
    rng = np.random.default_rng(7)
    kwargs = {"reduction": reduction, "label_smoothing": label_smoothing, "weight": CLASS_WEIGHT}
    check_function(torch_ref, "cross_entropy", kwargs, [randn(rng, 3, 4, 2, 5), classes(rng, 4, 3, 2, 5, ignored=[3])])
    check_function(torch_ref, "cross_entropy", kwargs, [randn(rng, 6, 4), probs(rng, 6, 4)], wrt=(0, 1),
                   ref_name="probabilities")
    check_function(torch_ref, "cross_entropy", kwargs, [randn(rng, 4), np.array(1)], ref_name="1d")
    check_function(torch_ref, "cross_entropy", {**kwargs, "ignore_index": 0},
                   [randn(rng, 6, 4), np.array([0, 1, 0, 3, 2, 0])], ref_name="ignore-0")


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("name, label_smoothing", [("nll_loss", 0.0), ("cross_entropy", 0.0),
                                                   ("cross_entropy", 0.3)])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_every_target_ignored(name, label_smoothing, reduction, weighted, torch_ref):
    """'mean' over no targets is 0 / 0 = NaN in PyTorch; 'sum' is 0; 'none' is all zeros."""
    rng = np.random.default_rng(8)
    kwargs = {"reduction": reduction, **({"weight": CLASS_WEIGHT} if weighted else {}),
              **({"label_smoothing": label_smoothing} if name == "cross_entropy" else {})}
    x = log_probs(rng, 5, 4) if name == "nll_loss" else randn(rng, 5, 4)
    got = check_function(torch_ref, name, kwargs, [x, np.full(5, -100, np.int64)])
    assert np.isnan(got["out"]).all() if reduction == "mean" else not np.isnan(got["out"]).any()


@pytest.mark.parametrize("name, label_smoothing", [("nll_loss", 0.0), ("cross_entropy", 0.0), ("cross_entropy", 0.1)])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_zero_class_weights(name, label_smoothing, reduction, torch_ref):
    """All weights zero: 'mean' is 0 / 0 = NaN; one class at weight zero just drops out."""
    rng = np.random.default_rng(9)
    x = log_probs(rng, 6, 4) if name == "nll_loss" else randn(rng, 6, 4)
    target = classes(rng, 4, 6)
    extra = {"label_smoothing": label_smoothing} if name == "cross_entropy" else {}
    for weight in (np.zeros(4, np.float32), np.array([1.0, 0.0, 1.0, 0.0], np.float32)):
        kwargs = {"reduction": reduction, "weight": weight, **extra}
        check_function(torch_ref, name, kwargs, [x, target], ref_name=f"w{int(weight.sum())}")


# ---- binary cross-entropy -------------------------------------------------------------------
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_bce_matches_torch(reduction, weighted, torch_ref):
    rng = np.random.default_rng(10)
    p, y = uniform(rng, 0.02, 0.98, 6, 5), uniform(rng, 0, 1, 6, 5)
    y[:3] = np.round(y[:3])  # hard and soft labels
    kwargs = {"reduction": reduction, **({"weight": uniform(rng, 0, 2, 5)} if weighted else {})}
    check_function(torch_ref, "binary_cross_entropy", kwargs, [p, y], wrt=(0, 1))


SATURATED_P = np.array([0.0, 1.0, 0.0, 1.0, 1e-45, 1e-13, 1.0 - 2 ** -24, 0.0, 1.0, 0.5], np.float32)
SATURATED_Y = np.array([0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.3, 0.3, 1.0], np.float32)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_bce_at_saturated_probabilities(reduction, torch_ref):
    """p = 0 and 1 (sigmoid saturates to exactly 1.0 in float32 from x ~ 17): the -100 clamp
    keeps the loss finite, and the gradient is PyTorch's (p - y) / max(p (1 - p), 1e-12):
    0 where p = y, +-1e12 where they disagree; the target's gradient -logit(p) is +-inf there."""
    got = check_function(torch_ref, "binary_cross_entropy", {"reduction": reduction}, [SATURATED_P, SATURATED_Y])
    assert np.all(np.isfinite(got["out"])) and np.all(np.isfinite(got["grad0"]))
    check_function(torch_ref, "binary_cross_entropy", {"reduction": reduction}, [SATURATED_P, SATURATED_Y], wrt=(1,),
                   ref_name="target-grad")


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_bce_with_logits_pos_weight_matches_torch(reduction, torch_ref):
    rng = np.random.default_rng(11)
    x, y = randn(rng, 6, 5, scale=4), uniform(rng, 0, 1, 6, 5)
    x[0] = [0.0, 0.0, 30.0, -30.0, 100.0]  # the gradient at exactly 0 is sigmoid(0) - y
    y[0] = [1.0, 0.0, 1.0, 1.0, 0.0]
    kwargs = {"reduction": reduction, "pos_weight": uniform(rng, 0.5, 3, 5), "weight": uniform(rng, 0, 2, 6, 5)}
    check_function(torch_ref, "binary_cross_entropy_with_logits", kwargs, [x, y], wrt=(0, 1))
    check_function(torch_ref, "binary_cross_entropy_with_logits", {"reduction": reduction}, [x, y], wrt=(0,), seed=1,
                   ref_name="no-weights")


# ---- KL divergence --------------------------------------------------------------------------
@pytest.mark.parametrize("log_target", [False, True])
@pytest.mark.parametrize("reduction", REDUCTIONS + ("batchmean",))
def test_kl_div_matches_torch(reduction, log_target, torch_ref):
    rng = np.random.default_rng(12)
    x, q = log_probs(rng, 6, 5), probs(rng, 6, 5)
    target = np.log(q) if log_target else q
    check_function(torch_ref, "kl_div", {"reduction": reduction, "log_target": log_target}, [x, target], wrt=(0, 1))


@pytest.mark.parametrize("reduction", REDUCTIONS + ("batchmean",))
def test_kl_div_zero_target_probabilities(reduction, torch_ref):
    """0 * log 0 counts as 0 (xlogy). The input's gradient is -target; torch's gradient for a
    target of exactly 0 is NaN (xlogy's 0 / 0), which no optimiser wants: not compared."""
    rng = np.random.default_rng(13)
    q = probs(rng, 4, 5)
    q[:, 1] = 0.0
    q /= q.sum(axis=1, keepdims=True)
    got = check_function(torch_ref, "kl_div", {"reduction": reduction}, [log_probs(rng, 4, 5), q])
    assert np.all(np.isfinite(got["out"]))


# ---- pad, interpolate, normalize ------------------------------------------------------------
@pytest.mark.parametrize("pad, value", [((1, 2), None), ((1, 1, 2, 0), 0.5), ((-1, 2, 0, -2), -3.0),
                                        ((0, 0, 1, 1, 1, 0), float("-inf")), ((2, 0), 1e30)])
def test_pad_matches_torch(pad, value, torch_ref):
    rng = np.random.default_rng(14)
    kwargs = {"pad": pad, **({"value": value} if value is not None else {})}
    check_function(torch_ref, "pad", kwargs, [randn(rng, 2, 3, 4, 5)])


@pytest.mark.parametrize("shape, kwargs", [
    ((2, 3, 4), {"scale_factor": 2}),
    ((2, 3, 4, 5), {"scale_factor": 2}),
    ((2, 3, 4, 5), {"scale_factor": 3.0}),
    ((2, 3, 4, 5), {"scale_factor": (2, 3)}),
    ((2, 3, 4, 5), {"size": (8, 15)}),
    ((2, 3, 4, 4), {"size": 8, "mode": "nearest"}),
    ((1, 2, 2, 3, 2), {"scale_factor": 2}),
    ((2, 3, 4, 5), {"scale_factor": 1}),
])
def test_interpolate_nearest_matches_torch(shape, kwargs, torch_ref):
    rng = np.random.default_rng(15)
    check_function(torch_ref, "interpolate", kwargs, [randn(rng, *shape)])


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, float("inf")])
@pytest.mark.parametrize("dim", [1, -1, 0])
def test_normalize_matches_torch(p, dim, torch_ref):
    """Includes an all-zero vector (the norm is clamped to eps; its gradient is g / eps) and a
    tiny one below eps."""
    rng = np.random.default_rng(16)
    x = randn(rng, 3, 4, 5)
    x[0, :, 0] = 0.0
    x[1, :, 2] = 1e-14
    x[:, 0, :] = 0.0
    check_function(torch_ref, "normalize", {"p": p, "dim": dim}, [x])
    if dim == 1:  # a large eps clamps many norms
        check_function(torch_ref, "normalize", {"p": p, "dim": dim, "eps": 0.5}, [x], seed=1, ref_name="eps")


# ---- loss modules: signatures, buffers, forward ---------------------------------------------
MODULE_CASES = {  # module -> (constructor kwargs, input maker, target maker)
    "L1Loss": ({}, lambda r: randn(r, 6, 4), lambda r: randn(r, 6, 4)),
    "SmoothL1Loss": ({"beta": 0.5}, lambda r: randn(r, 6, 4), lambda r: randn(r, 6, 4)),
    "HuberLoss": ({"delta": 0.7}, lambda r: randn(r, 6, 4), lambda r: randn(r, 6, 4)),
    "NLLLoss": ({"weight": CLASS_WEIGHT, "ignore_index": 1}, lambda r: log_probs(r, 6, 4), lambda r: classes(r, 4, 6)),
    "CrossEntropyLoss": ({"weight": CLASS_WEIGHT, "label_smoothing": 0.1}, lambda r: randn(r, 6, 4),
                         lambda r: classes(r, 4, 6, ignored=[0])),
    "BCELoss": ({"weight": uniform(np.random.default_rng(0), 0, 2, 4)}, lambda r: uniform(r, 0.05, 0.95, 6, 4),
                lambda r: uniform(r, 0, 1, 6, 4)),
    "BCEWithLogitsLoss": ({"pos_weight": uniform(np.random.default_rng(1), 0.5, 2, 4)}, lambda r: randn(r, 6, 4),
                          lambda r: uniform(r, 0, 1, 6, 4)),
    "KLDivLoss": ({"reduction": "batchmean"}, lambda r: log_probs(r, 6, 4), lambda r: probs(r, 6, 4)),
}


@pytest.mark.parametrize("name", sorted(MODULE_CASES))
def test_loss_modules_match_torch(name, torch_ref):
    """Same constructor call on both sides; the same state_dict keys (weight / pos_weight are
    buffers, as in PyTorch) and the same loss for every reduction."""
    kwargs, make_input, make_target = MODULE_CASES[name]
    rng = np.random.default_rng(17)
    x, y = make_input(rng), make_target(rng)
    reductions = REDUCTIONS + (("batchmean",) if name == "KLDivLoss" else ())
    for reduction in reductions:
        kw = {**kwargs, "reduction": reduction}

        def compute(kw=kw):
            tm = getattr(torch.nn, name)(**_torch_kwargs(kw))
            return {"loss": tm(torch.from_numpy(x), torch.from_numpy(y)), "keys": np.array(list(tm.state_dict()))}

        want = torch_ref([name, kw, x, y], compute, reduction)
        gm = getattr(nn, name)(**_gc_kwargs(kw))
        assert list(gm.state_dict()) == want["keys"].tolist()
        assert_close(gm(gc.tensor(x), gc.tensor(y)).numpy(), want["loss"], f"nn.{name}({kw})")


def test_legacy_size_average_and_reduce_flags_map_like_torch():
    x, y = gc.tensor([1.0, 3.0]), gc.tensor([0.0, 0.0])
    with pytest.warns(UserWarning, match="size_average and reduce"):
        assert float(nn.L1Loss(size_average=False)(x, y)) == 4.0
    with pytest.warns(UserWarning):
        assert nn.MSELoss(reduce=False)(x, y).numpy().tolist() == [1.0, 9.0]
    with pytest.warns(UserWarning):
        assert float(F.smooth_l1_loss(x, y, True, True)) == pytest.approx(1.5)


# ---- compiled: training steps and eval plans at two batch sizes -----------------------------
TRAIN_CASES = {  # loss module -> (constructor kwargs, layer after Linear(4, 3) or None, target maker)
    "L1Loss": ({}, None, lambda r, n: randn(r, n, 3)),
    "SmoothL1Loss": ({"beta": 0.5, "reduction": "sum"}, None, lambda r, n: randn(r, n, 3)),
    "HuberLoss": ({"delta": 0.5}, None, lambda r, n: randn(r, n, 3)),
    "NLLLoss": ({"weight": CLASS_WEIGHT[:3]}, "LogSoftmax", lambda r, n: classes(r, 3, n, ignored=[1])),
    "CrossEntropyLoss": ({"weight": CLASS_WEIGHT[1:], "label_smoothing": 0.1}, None,
                         lambda r, n: classes(r, 3, n, ignored=[0])),
    "BCELoss": ({"weight": CLASS_WEIGHT[:3]}, "Sigmoid", lambda r, n: np.round(uniform(r, 0, 1, n, 3))),
    "BCEWithLogitsLoss": ({"pos_weight": CLASS_WEIGHT[:3]}, None, lambda r, n: uniform(r, 0, 1, n, 3)),
    "KLDivLoss": ({"reduction": "batchmean"}, "LogSoftmax", lambda r, n: probs(r, n, 3)),
}


def _head(lib, head):
    layers = [lib.Linear(4, 3)]
    if head is not None:
        layers.append(getattr(lib, head)(dim=1) if head == "LogSoftmax" else getattr(lib, head)())
    return lib.Sequential(*layers)


def _torch_training(name, kwargs, head, state, batches, lr):
    tm = _head(torch.nn, head)
    tm.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in state.items()})
    criterion, opt = getattr(torch.nn, name)(**_torch_kwargs(kwargs)), torch.optim.SGD(tm.parameters(), lr=lr)
    out = {}
    for i, loss in torch_steps(opt, lambda x, y: criterion(tm(x), y), batches):
        out[f"loss{i}"] = loss
        out.update({f"{k}{i}": v.detach().clone() for k, v in tm.state_dict().items()})
    return out


@pytest.mark.parametrize("name", sorted(TRAIN_CASES))
def test_loss_module_as_compiled_loss_fn(name, torch_ref):
    """``gc.compile(model, (x, y), loss_fn=<the loss module>, optimizer=SGD)``: one step at the
    traced batch size (6) and one at another (3), losses and weights against torch's. The batch
    dim stays symbolic: a plan with a baked batch size would refuse batch 3."""
    kwargs, head, make_target = TRAIN_CASES[name]
    rng = np.random.default_rng(18)
    gc.manual_seed(0)
    gm = _head(nn, head)
    state = {k: np.array(v, copy=True) for k, v in gm.state_dict().items()}
    batches = [(randn(rng, n, 4), make_target(rng, n)) for n in (6, 3)]
    lr = 0.5
    want = torch_ref([name, kwargs, head, state, batches, lr],
                     lambda: _torch_training(name, kwargs, head, state, batches, lr))
    step = gc.compile(gm, batches[0], loss_fn=getattr(nn, name)(**_gc_kwargs(kwargs)),
                      optimizer=optim.SGD(gm.parameters(), lr=lr))
    assert "fixed_batch" not in step.graph.meta
    for i, (x, y) in enumerate(batches):
        assert_close(step(x, y), want[f"loss{i}"], f"{name} loss at step {i} (batch {len(x)})")
        for key, value in gm.state_dict().items():
            assert_close(np.asarray(value), want[f"{key}{i}"], f"{name}: {key} after step {i}")


def pad_up_norm(f, conv, fc, x):
    """conv -> F.pad -> F.interpolate -> F.normalize -> linear, with ``f`` graphc's F or torch's."""
    y = f.pad(conv(x), (1, 2, 0, 1), value=0.25)  # (n, 3, 3, 3) -> (n, 3, 4, 6)
    y = f.interpolate(y, scale_factor=2)
    return fc(f.normalize(y, dim=1).flatten(1))


class PadUpNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.fc = nn.Conv2d(2, 3, 3), nn.Linear(3 * 8 * 12, 2)

    def forward(self, x):
        return pad_up_norm(F, self.conv, self.fc, x)


def _torch_pad_model(state, batches, lr):
    class TorchPadUpNorm(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.fc = torch.nn.Conv2d(2, 3, 3), torch.nn.Linear(3 * 8 * 12, 2)

        def forward(self, x):
            return pad_up_norm(torch.nn.functional, self.conv, self.fc, x)

    tm = TorchPadUpNorm()
    tm.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in state.items()})
    out = {f"eval{i}": tm(torch.from_numpy(x)) for i, (x, _) in enumerate(batches)}
    opt = torch.optim.SGD(tm.parameters(), lr=lr)
    for i, loss in torch_steps(opt, lambda x, y: torch.nn.functional.mse_loss(tm(x), y), batches):
        out[f"loss{i}"] = loss
        out.update({f"{k}{i}": v.detach().clone() for k, v in tm.state_dict().items()})
    return out


def test_pad_interpolate_normalize_in_compiled_plans(torch_ref):
    """An eval plan and a training step built from one model that uses the three functional
    forms, each run at the traced batch size and a smaller one, against torch."""
    rng = np.random.default_rng(19)
    gc.manual_seed(0)
    gm = PadUpNorm()
    state = {k: np.array(v, copy=True) for k, v in gm.state_dict().items()}
    batches = [(randn(rng, n, 2, 5, 5), randn(rng, n, 2)) for n in (4, 2)]
    lr = 0.1
    want = torch_ref([state, batches, lr], lambda: _torch_pad_model(state, batches, lr))
    infer = gc.compile(gm.eval(), (batches[0][0],))
    assert "fixed_batch" not in infer.graph.meta
    for i, (x, _) in enumerate(batches):
        assert_close(infer(x), want[f"eval{i}"], f"eval plan at batch {len(x)}")
    step = gc.compile(gm.train(), batches[0], loss_fn=nn.MSELoss(), optimizer=optim.SGD(gm.parameters(), lr=lr))
    for i, (x, y) in enumerate(batches):
        assert_close(step(x, y), want[f"loss{i}"], f"training loss at batch {len(x)}")
        for key, value in gm.state_dict().items():
            assert_close(np.asarray(value), want[f"{key}{i}"], f"{key} after step {i}")


# ---- clear errors ---------------------------------------------------------------------------
def _x(*shape):
    return gc.tensor(np.zeros(shape, np.float32))


@pytest.mark.parametrize("call, match", [
    (lambda: F.pad(_x(1, 2, 3), (3, 3), mode="reflect"), "Padding size should be less than"),
    (lambda: F.pad(_x(1, 2, 3), (1, 1), mode="wrap"), "Unrecognised padding mode wrap"),
    (lambda: F.pad(_x(1, 2, 3), (1,)), "divisible by 2"),
    (lambda: F.pad(_x(1, 2, 3), (-2, -2)), "negative size"),
    (lambda: F.interpolate(_x(1, 2, 3, 3), scale_factor=2, mode="foo"), "unknown mode 'foo'"),
    (lambda: F.interpolate(_x(1, 2, 3, 3), scale_factor=2, mode="nearest", antialias=True), "Anti-alias"),
    (lambda: F.interpolate(_x(1, 2, 3, 3)), "either size or scale_factor should be defined"),
    (lambda: F.interpolate(_x(1, 2, 3, 3), scale_factor=2, align_corners=True), "align_corners"),
    (lambda: F.normalize(_x(2, 3), p=0), "p > 0"),
    (lambda: F.binary_cross_entropy(gc.tensor([1.5]), gc.tensor([1.0])), "between 0 and 1"),
    (lambda: F.binary_cross_entropy(gc.tensor([np.nan]), gc.tensor([1.0])), "between 0 and 1"),
    (lambda: F.binary_cross_entropy(_x(2, 3), _x(3)), "same size"),
    (lambda: F.cross_entropy(_x(2, 3), gc.tensor([0, 1]), weight=gc.tensor([1.0, 2.0])), "all 3 classes"),
    (lambda: F.nll_loss(_x(2, 3), gc.tensor([0, 1, 2])), "do not match"),
    (lambda: F.l1_loss(_x(2), _x(2), reduction="avg"), "not a valid value for reduction"),
    (lambda: F.kl_div(_x(2), _x(2), reduction="batch"), "not a valid value for reduction"),
    (lambda: F.smooth_l1_loss(_x(2), _x(2), beta=-1.0), "negative values for beta"),
    (lambda: F.huber_loss(_x(2), _x(2), delta=0.0), "non-positive values for delta"),
    (lambda: F.mse_loss(_x(2), _x(2), weight=_x(3)), "same size"),
])
def test_unsupported_or_invalid_calls_raise_clearly(call, match):
    with pytest.raises(gc.GraphcError, match=match):
        call()


def test_pad_of_the_batch_dim_specializes_the_plan():
    """Padding the batch dim needs its size: the plan runs at the example's batch only."""
    class PadBatch(nn.Module):
        def forward(self, x):
            return F.pad(x, (0, 0, 1, 0))

    plan = gc.compile(PadBatch(), (np.ones((3, 2), np.float32),))
    assert plan(np.ones((3, 2), np.float32)).shape == (4, 2)
    with pytest.raises(gc.ShapeError, match="only runs at batch size 3.*pad.*batch dim"):
        plan(np.ones((5, 2), np.float32))


def test_mismatched_shapes_broadcast_with_torchs_warning():
    with pytest.warns(UserWarning, match="different to the input size"):
        out = F.mse_loss(_x(3, 1), _x(3), reduction="none")
    assert out.shape == (3, 3)



def test_losses_take_numpy_inputs_and_targets_eagerly():
    """As modules do (an eager loop over numpy batches): int64 targets stay class indices."""
    logits = np.array([[2.0, 0.0, -1.0], [0.0, 1.0, 3.0]], np.float32)
    labels = np.array([0, 2], np.int64)
    want = float(nn.CrossEntropyLoss()(gc.tensor(logits), gc.tensor(labels)))
    assert float(nn.CrossEntropyLoss()(logits, labels)) == want
    assert float(F.cross_entropy(gc.tensor(logits), labels)) == want
    assert float(F.nll_loss(gc.tensor(logits).log_softmax(1), labels)) == want
    assert float(nn.MSELoss()(logits, np.zeros_like(logits))) == float((logits ** 2).mean())
