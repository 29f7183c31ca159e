"""Vision layers against torch.nn: InstanceNorm1d/2d/3d (with and without running stats),
LocalResponseNorm, GroupNorm/LayerNorm on images, the activations (PReLU, SELU, CELU, Mish,
Softsign, Tanhshrink, Threshold, Hardsigmoid, LogSigmoid, Softmin, Softmax2d) and the pooling
modules (ceil_mode, count_include_pad, divisor_override, dilation, return_indices, MaxUnpool2d,
adaptive max, LP and 1-D pools).

Both libraries build the module from the same constructor call and hold the same state (torch's
randomised ``state_dict`` loaded into graphc); forwards (train then eval) and eager gradients of
``sum(out * r)`` for the input and every parameter are compared, then compiled training steps
(symbolic batch) against torch's SGD steps. torch's side goes through the ``torch_ref`` fixture.
"""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc import nn, optim
from conftest import HAVE_TORCH
from test_modules_torch import (assert_close, build_gc, case_id, check_against_torch, randomize_state, torch_module,
                                torch_to_gc, unprefixed)

if HAVE_TORCH:
    import torch

F64_TOL = 1e-10
# torch's float64 CELU and Hardsigmoid backwards scale by 1 / alpha and 1 / 6 rounded to float32
F64_TOL_FOR = {"CELU": 1e-7, "Hardsigmoid": 1e-7}

CASES = [
    # (class name, args, kwargs, input shape)
    ("InstanceNorm1d", (3,), {}, (2, 3, 7)),
    ("InstanceNorm1d", (3,), {"affine": True}, (2, 3, 7)),
    ("InstanceNorm1d", (3,), {"track_running_stats": True, "momentum": 0.3}, (4, 3, 6)),
    ("InstanceNorm1d", (3,), {}, (3, 7)),  # unbatched
    ("InstanceNorm1d", (3,), {"track_running_stats": True, "momentum": None}, (2, 3, 7)),  # stats stay put
    ("InstanceNorm2d", (4,), {}, (2, 4, 5, 6)),
    ("InstanceNorm2d", (4,), {"affine": True, "eps": 1e-3}, (2, 4, 5, 6)),
    ("InstanceNorm2d", (4,), {"affine": True, "track_running_stats": True}, (3, 4, 5, 5)),
    ("InstanceNorm2d", (4,), {"track_running_stats": True}, (4, 5, 5)),  # unbatched
    ("InstanceNorm3d", (2,), {"affine": True, "track_running_stats": True}, (2, 2, 3, 4, 3)),
    ("GroupNorm", (2, 4), {}, (2, 4, 5, 6)),
    ("LayerNorm", ([4, 5, 6],), {}, (2, 4, 5, 6)),
    ("LayerNorm", ([5, 6],), {"elementwise_affine": False}, (2, 4, 5, 6)),
    ("LocalResponseNorm", (3,), {}, (2, 6, 4, 4)),
    ("LocalResponseNorm", (2,), {"alpha": 0.1, "beta": 0.5, "k": 2.0}, (2, 5, 7)),
    ("LocalResponseNorm", (4,), {"alpha": 0.5}, (2, 5, 3, 2, 2)),
    ("PReLU", (), {}, (2, 3, 4, 4)),
    ("PReLU", (3,), {"init": 0.1}, (2, 3, 4, 4)),
    ("PReLU", (3,), {}, (5, 3)),
    ("SELU", (), {}, (2, 3, 4)),
    ("CELU", (), {"alpha": 0.7}, (2, 3, 4)),
    ("Mish", (), {}, (2, 3, 4)),
    ("Softsign", (), {}, (2, 3, 4)),
    ("Tanhshrink", (), {}, (2, 3, 4)),
    ("Threshold", (0.3, -2.0), {}, (2, 3, 4)),
    ("Hardsigmoid", (), {}, (2, 3, 4)),
    ("LogSigmoid", (), {}, (2, 3, 4)),
    ("Softmin", (), {"dim": 1}, (2, 3, 4)),
    ("Softmax2d", (), {}, (2, 3, 4, 4)),
    ("Softmax2d", (), {}, (3, 4, 4)),
    ("ELU", (), {"alpha": 0.5}, (2, 3, 4)),
    ("MaxPool2d", (3,), {"stride": 2, "ceil_mode": True}, (2, 3, 8, 8)),
    ("MaxPool2d", (3,), {"stride": 2, "padding": 1, "ceil_mode": True, "dilation": 2}, (2, 3, 9, 10)),
    ("MaxPool2d", ((2, 3),), {"stride": 2, "ceil_mode": True}, (3, 7, 8)),  # unbatched
    ("AvgPool2d", (3,), {"stride": 2, "ceil_mode": True}, (2, 3, 8, 8)),
    ("AvgPool2d", (3,), {"stride": 2, "padding": 1, "ceil_mode": True}, (2, 3, 8, 8)),
    ("AvgPool2d", (3,), {"stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False}, (2, 3, 8, 8)),
    ("AvgPool2d", (2,), {"divisor_override": 3}, (2, 3, 6, 6)),
    ("AvgPool2d", (3,), {"stride": 2, "padding": 1, "divisor_override": 2, "ceil_mode": True}, (2, 3, 8, 8)),
    ("AvgPool2d", ((3, 2),), {"stride": (2, 1), "padding": (1, 0), "ceil_mode": True}, (3, 8, 7)),  # unbatched
    ("MaxPool1d", (3,), {"stride": 2, "padding": 1, "ceil_mode": True}, (2, 3, 10)),
    ("MaxPool1d", (2,), {"dilation": 2}, (3, 9)),  # unbatched
    ("AvgPool1d", (3,), {"stride": 2, "padding": 1, "count_include_pad": False, "ceil_mode": True}, (2, 3, 10)),
    ("AdaptiveAvgPool1d", (4,), {}, (2, 3, 10)),
    ("AdaptiveMaxPool1d", (4,), {}, (2, 3, 10)),
    ("AdaptiveMaxPool2d", ((3, 4),), {}, (2, 3, 7, 9)),
    ("AdaptiveMaxPool2d", (1,), {}, (2, 3, 5, 5)),
    ("AdaptiveMaxPool2d", ((None, 2),), {}, (3, 5, 5)),  # unbatched
    ("LPPool2d", (2, 3), {"stride": 2}, (2, 3, 7, 7)),
    ("LPPool2d", (4, (2, 3)), {"ceil_mode": True}, (2, 3, 7, 8)),
    ("LPPool1d", (2, 3), {"stride": 2}, (2, 3, 10)),
]


def _input(shape, seed=3):
    return (np.random.default_rng(seed).standard_normal(shape) * 2 + 0.3).astype(np.float32)


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_module_matches_torch_train_and_eval(case, torch_ref):
    name, args, kwargs, shape = case
    x = _input(shape)
    steps = [(x, "train"), (_input(shape, 4), "train"), (x, "eval")]
    check_against_torch(torch_ref, build_gc(name, args, kwargs), lambda: torch_module(name, args, kwargs),
                        "torch->gc", steps, case)


def _torch_grads(name, args, kwargs, x, r, mode, dtype):
    tm = torch_module(name, args, kwargs).to(dtype)
    with torch.no_grad():
        randomize_state({k: v.numpy() for k, v in tm.state_dict().items()}, np.random.default_rng(1))
    ref = {f"state.{k}": v.detach().numpy().copy() for k, v in tm.state_dict().items()}
    tm.train(mode == "train")
    xt = torch.from_numpy(x.copy()).requires_grad_(True)
    (tm(xt) * torch.from_numpy(r)).sum().backward()
    ref["grad.input"] = xt.grad.numpy()
    ref.update({f"grad.{k}": p.grad.numpy() for k, p in tm.named_parameters()})
    return ref


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_module_gradients_match_torch(case, dtype, torch_ref):
    name, args, kwargs, shape = case
    mode = "eval" if kwargs.get("track_running_stats") else "train"
    x = _input(shape).astype(dtype)
    gm = build_gc(name, args, kwargs).to(getattr(gc, dtype))
    out_shape = gm(gc.tensor(x)).shape
    r = np.random.default_rng(5).standard_normal(out_shape).astype(dtype)
    ref = torch_ref([case, dtype, x, r], lambda: _torch_grads(name, args, kwargs, x, r, mode,
                                                              getattr(torch, dtype)))
    torch_to_gc(unprefixed("state", ref), gm)
    gm.train(mode == "train")
    xg = gc.tensor(x, requires_grad=True)
    (gm(xg) * gc.tensor(r)).sum().backward()
    tol = 1e-4 if dtype == "float32" else F64_TOL_FOR.get(name, F64_TOL)
    assert_close(xg.grad, ref["grad.input"], tol=tol, what="input gradient")
    for k, p in gm.named_parameters():
        assert_close(p.grad, ref[f"grad.{k}"], tol=tol, what=f"{k} gradient")


def _torch_train(model_fn, state, xs, ys, lr):
    tm = model_fn(torch)
    tm.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in state.items()})
    opt = torch.optim.SGD(tm.parameters(), lr=lr)
    ref = {}
    for i, (x, y) in enumerate(zip(xs, ys)):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(tm(torch.from_numpy(x)), torch.from_numpy(y))
        loss.backward()
        opt.step()
        ref[f"loss{i}"] = loss.detach().numpy()
    ref.update({f"state.{k}": v.detach().numpy().copy() for k, v in tm.state_dict().items()})
    tm.eval()
    with torch.no_grad():
        ref["eval"] = tm(torch.from_numpy(xs[0])).numpy()
    return ref


def _vision_net(lib):
    n = lib.nn
    return n.Sequential(n.Conv2d(2, 4, 3, padding=1), n.InstanceNorm2d(4, affine=True, track_running_stats=True),
                        n.PReLU(4), n.MaxPool2d(2, ceil_mode=True), n.LocalResponseNorm(2), n.Mish(),
                        n.AvgPool2d(2, stride=1, padding=1, ceil_mode=True, count_include_pad=False),
                        n.AdaptiveMaxPool2d(2), n.Flatten(), n.Linear(4 * 2 * 2, 3))


def test_compiled_training_through_instance_norm_with_running_stats(torch_ref):
    """A compiled plan (symbolic batch: batch 5 then 3) trains like torch, running stats included."""
    gc.manual_seed(0)
    gm = _vision_net(gc)
    state = {k: np.array(v, copy=True) for k, v in gm.state_dict().items()}
    rng = np.random.default_rng(7)
    xs = [rng.standard_normal((b, 2, 5, 5)).astype(np.float32) for b in (5, 5, 3)]
    ys = [rng.integers(0, 3, b).astype(np.int64) for b in (5, 5, 3)]
    ref = torch_ref([state, xs, ys], lambda: _torch_train(_vision_net, state, xs, ys, 0.1))
    opt = optim.SGD(gm.parameters(), lr=0.1)
    step = gc.compile(gm, example_inputs=(xs[0], ys[0]), loss_fn=nn.CrossEntropyLoss(), optimizer=opt)
    for i, (x, y) in enumerate(zip(xs, ys)):
        assert abs(float(step(x, y)) - float(ref[f"loss{i}"])) < 1e-5
    for k, v in unprefixed("state", ref).items():
        assert_close(np.asarray(gm.state_dict()[k]), v, tol=1e-5, what=k)
    infer = gc.compile(gm.eval(), example_inputs=(xs[0],))
    assert_close(infer(xs[0]), ref["eval"], tol=1e-5, what="compiled eval")


INDEX_CASES = [
    # (pool class, args, kwargs, input shape, unpool class or None)
    ("MaxPool2d", (2,), {}, (2, 3, 6, 6), "MaxUnpool2d"),
    ("MaxPool2d", (3,), {"stride": 2, "padding": 1}, (2, 3, 7, 7), "MaxUnpool2d"),
    ("MaxPool2d", (3,), {"stride": 2, "ceil_mode": True, "dilation": (1, 2)}, (2, 3, 8, 11), None),
    ("MaxPool2d", (2,), {}, (3, 6, 6), "MaxUnpool2d"),  # unbatched
    ("MaxPool1d", (3,), {"stride": 2, "padding": 1}, (2, 3, 9), "MaxUnpool1d"),
    ("AdaptiveMaxPool2d", ((3, 4),), {}, (2, 3, 7, 9), None),
    ("AdaptiveMaxPool1d", (3,), {}, (2, 3, 8), None),
]


def _spatial(pool, x):
    return x.shape[-2:] if pool.endswith("2d") else x.shape[-1:]


def _torch_indices(pool, args, kwargs, unpool, x, r):
    xt = torch.from_numpy(x.copy()).requires_grad_(True)
    y, idx = getattr(torch.nn, pool)(*args, return_indices=True, **kwargs)(xt)
    ref = {"y": y.detach().numpy().copy(), "idx": idx.numpy()}
    if unpool is not None:
        stride = kwargs.get("stride", args[0])
        up = getattr(torch.nn, unpool)(args[0], stride, kwargs.get("padding", 0))(y, idx, output_size=_spatial(pool, x))
        ref["unpooled"] = up.detach().numpy()
        out = up
    else:
        out = y
    (out * torch.from_numpy(r)).sum().backward()
    ref["grad"] = xt.grad.numpy()
    return ref


@pytest.mark.parametrize("case", INDEX_CASES, ids=[case_id(c[:4]) for c in INDEX_CASES])
def test_return_indices_and_unpool_match_torch(case, torch_ref):
    """Indices as PyTorch's (flat h * W + w per plane), MaxUnpool's scatter, and the gradient
    through pool (+ unpool) in float64."""
    pool, args, kwargs, shape, unpool = case
    x = _input(shape).astype(np.float64)
    xg = gc.tensor(x, requires_grad=True)
    y, idx = getattr(nn, pool)(*args, return_indices=True, **kwargs)(xg)
    out = y
    if unpool is not None:
        out = getattr(nn, unpool)(args[0], kwargs.get("stride", args[0]), kwargs.get("padding", 0))(
            y, idx, output_size=_spatial(pool, x))
    r = np.random.default_rng(5).standard_normal(out.shape)
    ref = torch_ref([case, x, r], lambda: _torch_indices(pool, args, kwargs, unpool, x, r))
    assert np.array_equal(idx.numpy(), ref["idx"]) and idx.numpy().dtype == np.int64
    assert_close(y, ref["y"], tol=0.0, what="pooled")
    if unpool is not None:
        assert_close(out, ref["unpooled"], tol=0.0, what="unpooled")
    (out * gc.tensor(r)).sum().backward()
    assert_close(xg.grad, ref["grad"], tol=F64_TOL, what="input gradient")


FUNCTIONAL = [
    # (F name, extra args, kwargs, input shape)
    ("selu", (), {}, (2, 3, 4)),
    ("celu", (), {"alpha": 2.0}, (2, 3, 4)),
    ("mish", (), {}, (2, 3, 4)),
    ("softsign", (), {}, (2, 3, 4)),
    ("tanhshrink", (), {}, (2, 3, 4)),
    ("threshold", (0.5, 7.0), {}, (2, 3, 4)),
    ("hardsigmoid", (), {"inplace": True}, (2, 3, 4)),
    ("logsigmoid", (), {}, (2, 3, 4)),
    ("softmin", (), {"dim": 1, "dtype": "float64"}, (2, 3, 4)),
    ("instance_norm", (), {"eps": 1e-3}, (2, 3, 5, 4)),
    ("local_response_norm", (3,), {"alpha": 0.2, "beta": 0.6, "k": 1.5}, (2, 5, 4)),
    ("max_pool1d", (3,), {"stride": 2, "padding": 1, "ceil_mode": True}, (2, 3, 10)),
    ("avg_pool1d", (4,), {"stride": 3, "ceil_mode": True, "count_include_pad": False, "padding": 2}, (2, 3, 11)),
    ("avg_pool2d", (3,), {"stride": 2, "ceil_mode": True, "divisor_override": 5}, (2, 3, 8, 9)),
    ("adaptive_avg_pool1d", (3,), {}, (2, 3, 10)),
    ("adaptive_max_pool1d", (4,), {}, (2, 3, 9)),
    ("lp_pool1d", (2, 3), {"stride": 2, "ceil_mode": True}, (2, 3, 10)),
    ("lp_pool2d", (3, (2, 2)), {}, (2, 3, 6, 6)),
]


def _torch_functional(name, args, kwargs, x):
    import torch.nn.functional as tF

    kwargs = {k: getattr(torch, v) if k == "dtype" else v for k, v in kwargs.items()}
    return {"out": getattr(tF, name)(torch.from_numpy(x.copy()), *args, **kwargs).numpy()}


@pytest.mark.parametrize("case", FUNCTIONAL, ids=[case_id(c) for c in FUNCTIONAL])
def test_functional_forms_match_torch(case, torch_ref):
    import graphc.nn.functional as F

    name, args, kwargs, shape = case
    x = _input(shape).astype(np.float64)
    ref = torch_ref([case, x], lambda: _torch_functional(name, args, kwargs, x))
    got = getattr(F, name)(gc.tensor(x), *args, **{k: getattr(gc, v) if k == "dtype" else v for k, v in kwargs.items()})
    assert_close(got, ref["out"], tol=F64_TOL, what=name)


def test_pool_padding_over_half_the_kernel_is_refused_as_in_torch():
    with pytest.raises(gc.ShapeError, match="at most half"):
        nn.MaxPool2d(2, padding=2)(gc.zeros(1, 1, 6, 6))
    with pytest.raises(gc.ShapeError, match="at most half"):
        nn.AvgPool1d(3, padding=2)(gc.zeros(1, 1, 6))


def test_max_unpool_refuses_an_index_outside_the_output():
    with pytest.raises(gc.ShapeError, match="outside the output plane"):
        nn.MaxUnpool2d(2)(gc.ones(1, 1, 1, 1), gc.tensor(np.array([[[[9]]]], np.int64)))
