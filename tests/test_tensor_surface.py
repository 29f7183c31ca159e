"""The tensor-level PyTorch surface real model files use: tril/triu, masked_fill, split/chunk/
unbind, argmax/argmin, reductions over several dims, view_as/expand_as/type_as/mT, uint8
inputs. Forward parity with PyTorch eagerly and compiled (torch's side through ``torch_ref``:
live with torch installed, else PyTorch 2.13's recorded outputs), gradients of the new
composites against finite differences in float64, and the clear errors at the symbolic batch dim.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import graphc as gc
from graphc import nn
from graphc.tracing import trace_model
from graphc.executor import Plan
from graphc.passes.autodiff import autodiff
from conftest import HAVE_TORCH

if HAVE_TORCH:
    import torch

X = np.random.default_rng(7).standard_normal((4, 5, 6)).astype(np.float32)
X[0, 1, :3] = X[0, 1, 3]  # ties for argmax/argmin: the first index wins in both libraries
IMG = np.random.default_rng(8).integers(0, 256, (4, 3, 2, 2)).astype(np.uint8)
IMG[0, 0, 0, 0] = 255  # x + 1 wraps around in uint8


def _outs(result):
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


def _attention(x, lib):
    """Causal self-attention weights with the mask built from constants inside the model."""
    t = x.shape[1]
    scores = x @ x.transpose(1, 2) / math.sqrt(x.shape[-1])
    mask = lib.ones(t, t).tril()
    return scores.masked_fill(mask == 0, float("-inf")).softmax(-1)


# (graphc/torch function of one tensor: the same code, since the names and semantics match)
CASES = {
    "tril": lambda x, lib: x.tril(),
    "tril_below": lambda x, lib: lib.tril(x, -1),
    "tril_above": lambda x, lib: lib.tril(x, diagonal=2),
    "triu": lambda x, lib: x.triu(),
    "triu_above": lambda x, lib: lib.triu(x, 1),
    "triu_below": lambda x, lib: x.triu(diagonal=-2),
    "masked_fill": lambda x, lib: x.masked_fill(x > 0.5, -1.5),
    "masked_fill_inf": lambda x, lib: x.masked_fill(x < 0, float("-inf")),
    "masked_fill_broadcast_mask": lambda x, lib: x.masked_fill(lib.ones(5, 6).tril() == 0, 0.0),
    "masked_fill_tensor_value": lambda x, lib: x.masked_fill(x > 0, lib.tensor(2.0)),
    "causal_attention": _attention,
    "split_size": lambda x, lib: x.split(2, dim=1),
    "split_sizes": lambda x, lib: lib.split(x, [1, 3, 2], dim=-1),
    "chunk_even": lambda x, lib: x.chunk(3, dim=2),
    "chunk_uneven": lambda x, lib: lib.chunk(x, 4, 1),
    "chunk_one_on_batch": lambda x, lib: x.chunk(1),
    "unbind": lambda x, lib: x.unbind(1),
    "argmax_keepdim": lambda x, lib: x.argmax(1, keepdim=True),
    "argmin_dim": lambda x, lib: x.argmin(-1),
    "argmin_all": lambda x, lib: lib.argmin(x),
    "min_dim": lambda x, lib: tuple(x.min(2)),
    "sum_dims": lambda x, lib: x.sum((1, 2)),
    "sum_dims_keepdim": lambda x, lib: lib.sum(x, [0, 2], keepdim=True),
    "mean_dims": lambda x, lib: x.mean([-1, 1]),
    "mean_dims_keepdim": lambda x, lib: x.mean((1, 2), keepdim=True),
    "view_as": lambda x, lib: x.flatten(1).view_as(x),
    "expand_as": lambda x, lib: x[:, :1].expand_as(x),
    "expand_keep": lambda x, lib: x[:, :, :1].expand(-1, -1, 3),
    "mT": lambda x, lib: x.mT,
    "type_as": lambda x, lib: (x * 3).type_as(x.argmax(1)),
    "to_dtype": lambda x, lib: x.to(lib.float64),
    "size_and_dim": lambda x, lib: x.reshape(x.size(0), x.size(1) * x.size(-1)) * x.dim(),
}


def torch_side(name, x, torch_ref, fn=None):
    fn = fn or CASES[name]
    return torch_ref({"x": x, "case": name},
                     lambda: {f"out{i}": o for i, o in enumerate(_outs(fn(torch.from_numpy(x), torch)))})


def assert_matches(got, want: dict, rtol=1e-6):
    got = _outs(got)
    assert len(got) == len(want), f"{len(got)} outputs, torch gives {len(want)}"
    for i, g in enumerate(got):
        g, w = np.asarray(g.numpy() if isinstance(g, gc.Tensor) else g), want[f"out{i}"]
        assert g.shape == w.shape and g.dtype == w.dtype, f"out{i}: {g.dtype}{g.shape} != torch {w.dtype}{w.shape}"
        np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-6)


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_matches_pytorch_eagerly_and_compiled(name, torch_ref):
    want = torch_side(name, X, torch_ref)
    assert_matches(CASES[name](gc.tensor(X), gc), want)
    plan = gc.compile(lambda x: CASES[name](x, gc), (X,))
    assert_matches(plan(X), want)
    other = _outs(CASES[name](gc.tensor(X[:3]), gc))  # another batch size, without retracing
    assert_matches(plan(X[:3]), {f"out{i}": o.numpy() for i, o in enumerate(other)})


UINT8 = {
    "to_float": lambda x, lib: x.float() / 255,
    "divide": lambda x, lib: x / 255,
    "sum": lambda x, lib: x.sum(dim=(1, 2, 3)),
    "add_wraps": lambda x, lib: x + 1,
    "argmax": lambda x, lib: x.flatten(1).argmax(1),
    "argmin": lambda x, lib: x.flatten(1).argmin(1),
    "max": lambda x, lib: x.amax((1, 2, 3)),
    "compare": lambda x, lib: x > 128,
    "long": lambda x, lib: x.long() * 300,
}


@pytest.mark.parametrize("name", sorted(UINT8))
def test_uint8_inputs_match_pytorch_eagerly_and_compiled(name, torch_ref):
    want = torch_side(f"uint8_{name}", IMG, torch_ref, UINT8[name])
    assert gc.tensor(IMG).dtype is gc.uint8 and gc.from_numpy(IMG).dtype is gc.uint8
    assert_matches(UINT8[name](gc.from_numpy(IMG), gc), want)
    plan = gc.compile(lambda x: UINT8[name](x, gc), (IMG,))
    assert str(plan.graph.inputs[0].type) == "u8[N,3,2,2]"
    assert_matches(plan(IMG), want)
    with pytest.raises(gc.ShapeError, match="uint8"):
        plan(IMG.astype(np.float32))  # plans check input dtypes exactly, uint8 too


def test_uint8_image_model_compiles_with_the_cast_inside():
    gc.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(12, 3))

    def loss(x, y):
        return ((model(x.float() / 255) - y) ** 2).mean()

    y = np.random.default_rng(9).standard_normal((4, 3)).astype(np.float32)
    plan = gc.compile(loss, (IMG, y))
    np.testing.assert_allclose(plan(IMG, y), loss(gc.tensor(IMG), gc.tensor(y)).numpy(), rtol=1e-6)


def nano_causal(lib, block=6):
    """nanoGPT's idiom: the causal mask is a buffer made by torch.tril at construction (the
    same code for both libraries)."""
    class NanoCausal(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("bias", lib.tril(lib.ones(block, block)).view(1, 1, block, block))

        def forward(self, q):
            t = q.size(-2)
            att = q @ q.transpose(-2, -1) * (1.0 / math.sqrt(q.size(-1)))
            att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
            return att.softmax(dim=-1)

    return NanoCausal()


def test_nanogpt_causal_mask_buffer(torch_ref):
    q = X.reshape(4, 1, 5, 6)
    want = torch_ref({"q": q}, lambda: {"out0": nano_causal(torch)(torch.from_numpy(q))})
    model = nano_causal(gc)
    assert_matches(model(gc.tensor(q)), want)
    assert_matches(gc.compile(model, (q,))(q), want)


# ---- gradients of the composites: autodiff against central differences in float64 ------------------
P = np.random.default_rng(3).standard_normal((3, 4, 5))
MASK = np.random.default_rng(4).random((4, 5)) > 0.5

GRAD_CASES = {
    "frac": lambda p: p.frac(),  # a composite over trunc: autodiff gives its gradient, 1
    "masked_fill": lambda p: p.masked_fill(gc.tensor(MASK), 0.5),
    "tril": lambda p: p.tril(-1),
    "triu": lambda p: gc.triu(p, 1),
    "split": lambda p: p.split([1, 3], dim=1),
    "chunk": lambda p: p.chunk(2, dim=-1),
    "unbind": lambda p: p.unbind(2),
    "expand_as": lambda p: p[:, :1].expand_as(p),
    "view_as": lambda p: p.reshape(3, 20).view_as(p),
    "sum_dims": lambda p: p.sum((0, 2)),
    "mean_dims_keepdim": lambda p: p.mean([1, 2], keepdim=True),
    "mT": lambda p: p.mT,
    "min_dim": lambda p: p.min(1)[0],
}


def _loss(fn, p, weights):
    return sum((o * w).sum() for o, w in zip(_outs(fn(p)), weights))


def autodiff_grad(fn, weights) -> np.ndarray:
    class Holder(nn.Module):
        def __init__(self):
            super().__init__()
            self.p = nn.Parameter(P.copy())

        def forward(self, x):
            return _loss(fn, self.p, weights) + x.sum()

    model = Holder()
    x = np.zeros((1,), np.float64)
    graph, _ = trace_model(model, (x,), root=model)
    graph, grads = autodiff(graph, graph.outputs[0], ["p"])
    graph.outputs = [grads["p"]]
    return Plan(graph, {"p": model.p.array}, seed=0)(x)


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_gradient_matches_finite_differences(name):
    fn, rng, eps = GRAD_CASES[name], np.random.default_rng(5), 1e-6
    weights = [gc.tensor(rng.standard_normal(o.shape)) for o in _outs(fn(gc.tensor(P)))]
    got = autodiff_grad(fn, weights)
    want = np.zeros_like(P)
    for i in np.ndindex(P.shape):
        hi, lo = P.copy(), P.copy()
        hi[i] += eps
        lo[i] -= eps
        want[i] = (_loss(fn, gc.tensor(hi), weights).item() - _loss(fn, gc.tensor(lo), weights).item()) / (2 * eps)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-8)


# ---- the symbolic batch dim -------------------------------------------------------------------
@pytest.mark.parametrize("fn", [lambda x: x.split(2), lambda x: gc.chunk(x, 2, 0), lambda x: x.unbind(),
                                lambda x: x.split([2, 2], dim=-3)],
                         ids=["split", "chunk", "unbind", "split_sizes"])
def test_cutting_the_batch_dim_pins_the_plan_to_the_example_batch(fn):
    """The pieces' sizes need the batch size: the plan is traced at the example's batch (as
    torch.compile specializes) and refuses another, naming the op and the user's line."""
    plan = gc.compile(lambda x: fn(x)[0], (X,))
    np.testing.assert_array_equal(plan(X), fn(gc.tensor(X))[0].numpy())
    with pytest.raises(gc.ShapeError, match=r"batch size 4, got 3.*along the batch dim \(N\).*test_tensor_surface.py:\d+"):
        plan(X[:3])
    assert len(fn(gc.tensor(X))) == 2 or len(fn(gc.tensor(X))) == 4  # eagerly the size is known


def test_tril_over_the_batch_dim_pins_the_plan_to_the_example_batch():
    plan = gc.compile(lambda x: x.tril(), (X[:, :, 0],))
    np.testing.assert_array_equal(plan(X[:, :, 0]), np.tril(X[:, :, 0]))
    with pytest.raises(gc.ShapeError, match="tril over the batch dim"):
        plan(X[:3, :, 0])
    with pytest.raises(gc.ShapeError, match="at least 2 dims"):
        gc.ones(3).triu()


def test_bad_arguments_are_graphc_errors():
    x = gc.tensor(X)
    with pytest.raises(gc.GraphcError, match="add up to"):
        x.split([1, 1], dim=1)
    with pytest.raises(gc.GraphcError, match="positive"):
        x.chunk(0)
    with pytest.raises(gc.GraphcError, match="out of range"):
        x.split(1, dim=3)
    with pytest.raises(gc.GraphcError, match="mask must be a bool tensor"):
        x.masked_fill(x.long(), 0.0)
    with pytest.raises(gc.ShapeError, match="does not broadcast"):
        x[0].masked_fill(gc.tensor(X) > 0, 0.0)


def test_masked_fill_keeps_the_input_dtype_like_pytorch():
    ints = gc.tensor([1, 2, 3])
    assert ints.masked_fill(ints > 1, 7).dtype is gc.int64
    assert gc.tensor([True, False]).masked_fill(gc.tensor([True, True]), False).numpy().tolist() == [False, False]


def test_sizes_and_conversions():
    x = gc.tensor(X)
    assert x.size() == (4, 5, 6) and x.size(1) == 5 and x.dim() == 3 and x.numel() == 120 == x.nelement()
    assert x.to("cpu") is x and x.to(x) is x and x.to(gc.device("cpu"), gc.float64).dtype is gc.float64
    assert x.to(dtype=gc.int64).dtype is gc.int64 and x.to("cpu", copy=True) is not x
    assert x.float() is x and x.double().type_as(x).dtype is gc.float32 and x.byte().dtype is gc.uint8
    assert x.contiguous() is x and x.T.shape == (6, 5, 4) and x.mT.shape == (4, 6, 5)
    with pytest.raises(gc.GraphcError, match="cannot use 'gpu' as a device or a dtype"):
        x.to("gpu")


def test_sizes_inside_a_trace_keep_the_batch_dim_symbolic():
    def fn(x):
        return x.reshape(x.size(0), -1).sum(1) * x.dim()

    plan = gc.compile(fn, (X,))
    np.testing.assert_allclose(plan(X[:2]), fn(gc.tensor(X[:2])).numpy(), rtol=1e-6)


def test_a_saved_uint8_plan_loads_back(tmp_path):
    plan = gc.compile(lambda x: x.float() / 255, (IMG,))
    plan.save(tmp_path / "u8.graphc")  # must either refuse here or write a file that loads
    np.testing.assert_array_equal(gc.load(tmp_path / "u8.graphc")(IMG), plan(IMG))


# ---- devices, factories, no_grad ----------------------------------------------------------------
def test_device_objects():
    cuda = gc.device("cuda:1")
    assert (cuda.type, cuda.index, str(cuda), repr(cuda)) == ("cuda", 1, "cuda:1", "device(type='cuda', index=1)")
    assert gc.device("cuda", 0) == "cuda:0" == gc.device("CUDA:0") and gc.device("cuda") != gc.device("cuda:0")
    assert gc.device(gc.device("cpu")) == "cpu" and gc.device("cpu").index is None
    assert len({gc.device("cpu"), gc.device("cpu")}) == 1
    x = gc.zeros(2)
    assert x.device == gc.device("cpu") and x.device.type == "cpu" and x.to(x.device) is x
    for bad in ("gpu", "cuda:x", "cpu:1", 3):
        with pytest.raises(gc.DeviceError):
            gc.device(bad)
    with pytest.raises(gc.DeviceError, match="already has an index"):
        gc.device("cuda:0", 1)


def test_modules_and_factories_take_devices():
    model = nn.Linear(3, 2)
    assert model.to(gc.device("cpu")) is model and model.weight.device == "cpu"
    dev = gc.zeros(1).device
    for t in (gc.zeros(2, device=dev), gc.ones(2, device="cpu"), gc.arange(3, device=dev), gc.rand(2, device=dev),
              gc.randn(2, device=dev), gc.full((2,), 1.0, device=dev), gc.empty(2, device=dev),
              gc.tensor([1.0], device=dev), gc.zeros_like(gc.ones(2), device=dev)):
        assert t.device == "cpu" and isinstance(t.numpy(), np.ndarray)
    assert gc.full((2,), 3).dtype is gc.int64 and gc.full((1,), True).dtype is gc.bool_
    array = np.zeros(3, np.float32)
    assert gc.as_tensor(array).numpy() is array and gc.as_tensor(array, dtype=gc.float64).dtype is gc.float64


def test_arange_with_the_device_of_a_traced_input():
    def fn(x):  # the GPT idiom: positions built from the input's device inside the model
        return x + gc.arange(x.size(1), device=x.device).float()

    plan = gc.compile(fn, (X[:, :, 0],))
    np.testing.assert_array_equal(plan(X[:, :, 0]), X[:, :, 0] + np.arange(5, dtype=np.float32))


def test_no_grad_as_context_manager_and_decorator():
    with gc.no_grad() as ctx:
        assert isinstance(ctx, gc.no_grad)

    @gc.no_grad()
    def called(x):
        """Doubles."""
        return x * 2

    @gc.no_grad
    def bare(x):
        return x * 3

    @gc.inference_mode()
    def inference(x):
        return x + 1

    assert called(gc.ones(1)).item() == 2.0 and bare(gc.ones(1)).item() == 3.0 and inference(gc.ones(1)).item() == 2
    assert called.__name__ == "called" and called.__doc__ == "Doubles."
    with gc.enable_grad(), gc.inference_mode(False):
        pass
    with pytest.raises(gc.GraphcError, match="decorates functions"):
        gc.no_grad()(3)
