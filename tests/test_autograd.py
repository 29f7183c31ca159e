"""Eager autograd (graphc/core/tape.py) and gradient clipping (graphc/nn/utils.py).

- Every ``grad=True`` sample of the op table: eager ``backward()`` of ``sum(out * w)`` on
  leaves made with ``requires_grad`` against the gradient the compiled path computes for the
  same function (the autodiff pass on the op's graph, run by a Plan, as tests/test_grads.py
  builds it). Both come from the same vjp rules and kernels.
- ``detach()`` / ``no_grad()`` stop gradients, eagerly and inside a compiled step function,
  and the gradients are PyTorch's for the same construction.
- The rules of ``backward()``: accumulation, ``retain_graph``, the non-scalar seed, in-place
  changes of saved values, ``create_graph``, unused parameters, per-thread grad mode, the
  decorator forms, int tensors, where ``.grad`` lives.
- An MLP and a CNN with BatchNorm: eager gradients against PyTorch's.
- ``clip_grad_norm_`` / ``clip_grad_value_`` against PyTorch's.

PyTorch's side comes through the ``torch_ref`` fixture (live with torch installed, else
PyTorch 2.13's recording in tests/data/torch_test_autograd.npz).
"""
from __future__ import annotations

import inspect
import math
import threading

import numpy as np
import pytest

import graphc as gc
from graphc import nn, optim
from graphc.core.dispatch import apply
from graphc.executor import Plan
from graphc.ir import REGISTRY, Builder, DType, Graph, TensorType, Value
from graphc.passes.autodiff import autodiff
from graphc.random import generator
from conftest import HAVE_TORCH
from op_table import OP_INFO

if HAVE_TORCH:
    import torch

# Eager and compiled gradients run the same vjp rules through the same kernels; a plan may
# still accumulate a value's cotangents in another order or write them into planned buffers,
# which changes nothing but the last bits: a few ulps (float32 eps is 1.2e-7), relative to
# the gradient's largest magnitude for elements far below it.
SAME_RULES_RTOL = {np.dtype(np.float32): 1e-6, np.dtype(np.float64): 1e-13,
                   np.dtype(np.complex64): 1e-6, np.dtype(np.complex128): 1e-13}  # complex: their float parts

# Against PyTorch (another BLAS/oneDNN summation order), one forward and backward in float32:
# products summed over a batch and spatial positions differ by ~1e-7 of the tensor's scale.
TORCH_RTOL, TORCH_ATOL = 1e-5, 1e-6


@pytest.fixture(autouse=True)
def _grad_mode_restored():
    """Every test starts with gradients on and must leave them on (grad mode is global per thread)."""
    gc.set_grad_enabled(True)
    yield
    leaked = not gc.is_grad_enabled()
    gc.set_grad_enabled(True)
    assert not leaked, "the test left gradient recording off"


def assert_close_scaled(actual, want, rtol, atol, err_msg=""):
    """rtol elementwise, atol times the tensor's largest magnitude (at least 1)."""
    want = np.asarray(want)
    scale = max(1.0, float(np.abs(want).max(initial=0.0)))
    np.testing.assert_allclose(np.asarray(actual), want, rtol=rtol, atol=atol * scale, err_msg=err_msg)


def grad_of(t) -> np.ndarray:
    assert isinstance(t.grad, gc.Tensor), f"expected a gradient Tensor, got {t.grad!r}"
    return t.grad.numpy()


# ---- every differentiable op: eager backward == the compiled vjp ---------------------------------
CASES = [(op, i, s) for op, info in sorted(OP_INFO.items()) if REGISTRY[op].vjp is not None
         for i, s in enumerate(info.samples) if s.grad]


def _chosen_outputs(op, attrs, types) -> list:
    """Indices of the outputs the loss reads: float ones the op differentiates (BN's statistics never)."""
    wanted = REGISTRY[op].outputs_with_gradients(attrs)
    return [i for i, dt in enumerate(types) if (dt.is_float or dt.is_complex) and (wanted is None or i in wanted)]


def _compiled_gradients(op, sample, cotangents: dict, rng_state) -> dict:
    """``{input index: gradient}`` of ``sum_k <out_k, w_k>`` from the autodiff pass run by a Plan
    (inputs in their own dtypes; int/bool inputs are constants)."""
    g = Graph(op)
    b = Builder(g)
    values, params = [], {}
    for i, a in enumerate(sample.inputs):
        if a.dtype.kind in "fc":  # complex inputs are differentiated too (PyTorch's conjugate convention)
            values.append(g.add_state(Value(f"p{i}", TensorType(a.shape, DType.from_any(a.dtype))), "param"))
            params[f"p{i}"] = np.array(a)
        else:
            values.append(b.constant(np.array(a), DType.from_any(a.dtype)))
    outputs = b.emit(op, values, dict(sample.attrs))
    loss = None
    for i, w in cotangents.items():
        term = b.emit1("mul", [outputs[i], b.constant(w, outputs[i].type.dtype)])
        term = b.emit1("sum", [b.emit1("real", [term]) if outputs[i].type.dtype.is_complex else term])  # a real loss
        loss = term if loss is None else b.emit1("add", [loss, term])
    g.outputs = [loss]
    names = list(params)
    grad_graph, grads = autodiff(g, loss, names)
    grad_graph = grad_graph.copy()
    reached = [n for n in names if grads[n] is not None]
    grad_graph.outputs = [grads[n] for n in reached]
    plan = Plan(grad_graph, params, seed=0)
    plan.rng.bit_generator.state = rng_state  # a random op (dropout) draws the mask eager mode drew
    return {int(n[1:]): np.asarray(a) for n, a in zip(reached, plan.run([]))}


def _cotangent(rng, out):
    w = rng.standard_normal(out.shape)
    if out.dtype.is_complex:
        w = w + 1j * rng.standard_normal(out.shape)
    return w.astype(out.numpy().dtype)


@pytest.mark.parametrize("op,index,sample", CASES, ids=[f"{op}-{s.desc}" for op, _, s in CASES])
def test_eager_backward_matches_compiled_vjp(op, index, sample):
    rng = np.random.default_rng(index)
    leaves = [gc.Tensor(a).requires_grad_() if a.dtype.kind in "fc" else gc.Tensor(a) for a in sample.inputs]
    rng_state = generator().bit_generator.state  # dropout's eager mask, replayed by the plan
    out = apply(op, leaves, dict(sample.attrs))
    outs = out if isinstance(out, tuple) else (out,)
    chosen = _chosen_outputs(op, sample.attrs, [o.dtype for o in outs])
    assert chosen, f"{op}: no differentiable output"
    cotangents = {i: _cotangent(rng, outs[i]) for i in chosen}
    loss = None
    for i, w in cotangents.items():
        assert outs[i].requires_grad and outs[i].grad_fn is not None and not outs[i].is_leaf
        term = outs[i] * gc.Tensor(w)
        term = (term.real if term.dtype.is_complex else term).sum()  # a real loss of complex outputs
        loss = term if loss is None else loss + term
    loss.backward()

    want = _compiled_gradients(op, sample, cotangents, rng_state)
    for i, (leaf, a) in enumerate(zip(leaves, sample.inputs)):
        if a.dtype.kind not in "fc":
            assert not leaf.requires_grad and leaf.grad is None, f"input {i} ({a.dtype}) got a gradient"
            continue
        if i not in want:
            assert leaf.grad is None, f"input {i}: eager gradient where the compiled graph has none"
            continue
        got = grad_of(leaf)  # (its array type: test_grad_lives_where_the_parameter_does)
        assert got.shape == a.shape and got.dtype == a.dtype, f"input {i}: gradient {got.dtype}{got.shape}"
        tol = SAME_RULES_RTOL[got.dtype]
        assert_close_scaled(got, want[i], tol, tol, err_msg=f"{op}: eager vs compiled gradient of input {i}")


def test_dropout_gradient_is_the_eager_mask():
    """The random op's gradient is ``w * mask`` for the mask its eager forward drew."""
    x = gc.tensor(np.random.default_rng(0).standard_normal((8, 16)), requires_grad=True)
    y, mask = apply("dropout", [x], {"p": 0.25})
    w = np.random.default_rng(1).standard_normal((8, 16))
    (y * gc.tensor(w)).sum().backward()
    assert 0 < np.count_nonzero(mask.numpy()) < mask.numpy().size
    np.testing.assert_array_equal(grad_of(x), w * mask.numpy())


# ---- detach() and no_grad() --------------------------------------------------------------------------
def _detach_objective(no_grad, model, x):
    """One construction for both libraries: a detached copy of the output and a value computed
    under no_grad are constants for the gradient."""
    out = model(x)
    target = out.detach()
    with no_grad():
        scale = (out * out).mean()
    return ((out - 0.5 * target) ** 2).sum() * scale + (out * target).mean(), target, scale


def _small_mlp(lib):
    return lib.Sequential(lib.Linear(3, 4), lib.Tanh(), lib.Linear(4, 2))


def snapshot(model) -> dict:
    return {k: np.array(v, copy=True) for k, v in model.state_dict().items()}


def torch_twin(builder, state):
    tm = builder(torch.nn)
    tm.load_state_dict({k: torch.from_numpy(np.array(v, copy=True)) for k, v in state.items()})
    return tm


def torch_grads(tm) -> dict:
    return {f"grad.{n}": p.grad for n, p in tm.named_parameters() if p.grad is not None}


def test_detach_and_no_grad_stop_gradients(torch_ref):
    gc.manual_seed(0)
    model = _small_mlp(nn)
    state = snapshot(model)
    x = np.random.default_rng(3).standard_normal((5, 3)).astype(np.float32)

    def compute():
        tm = torch_twin(_small_mlp, state)
        loss, _, _ = _detach_objective(torch.no_grad, tm, torch.from_numpy(x))
        loss.backward()
        return {"loss": loss, **torch_grads(tm)}

    ref = torch_ref([state, x], compute)
    names = [n for n, _ in model.named_parameters()]
    assert sorted(f"grad.{n}" for n in names) == sorted(k for k in ref if k.startswith("grad."))

    # eager
    loss, target, scale = _detach_objective(gc.no_grad, model, gc.tensor(x))
    assert not target.requires_grad and target.is_leaf and target.grad_fn is None
    assert not scale.requires_grad and scale.grad_fn is None
    loss.backward()
    assert_close_scaled(float(loss), ref["loss"], TORCH_RTOL, TORCH_ATOL, "eager loss")
    for n, p in model.named_parameters():
        assert_close_scaled(grad_of(p), ref[f"grad.{n}"], TORCH_RTOL, TORCH_ATOL, f"eager gradient of {n}")

    # inside a compiled step function (the gradients are its outputs)
    params = list(model.parameters())

    def step_fn(x):
        loss, _, _ = _detach_objective(gc.no_grad, model, x)
        loss.backward()
        return (loss, *[p.grad for p in params])

    eager_grads = [grad_of(p).copy() for p in params]
    plan = gc.compile(step_fn, example_inputs=(x,))
    for p, g in zip(params, eager_grads):  # tracing the step changed no eager gradient
        np.testing.assert_array_equal(grad_of(p), g)
    assert sum(n.op == "stop_gradient" for n in plan.graph.nodes) >= 2, "detach and no_grad each cut a path"
    c_loss, *c_grads = plan(x)
    assert_close_scaled(c_loss, ref["loss"], TORCH_RTOL, TORCH_ATOL, "compiled loss")
    for n, g in zip(names, c_grads):
        assert g is not None, f"compiled step returned no gradient for {n}"
        assert_close_scaled(g, ref[f"grad.{n}"], TORCH_RTOL, TORCH_ATOL, f"compiled gradient of {n}")
    for p, g, c in zip(params, eager_grads, c_grads):  # as a second eager call, the call's backward() accumulates
        np.testing.assert_allclose(grad_of(p), g + c, rtol=1e-6, atol=1e-7)


def test_stop_gradient_op_passes_no_gradient_eagerly():
    """The op ``detach()`` records while tracing, applied eagerly: its path contributes nothing."""
    x = gc.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = apply("stop_gradient", [x])
    np.testing.assert_array_equal(y.numpy(), x.numpy())
    (y * y * x + x).sum().backward()  # d/dx = y*y + 1 with y constant
    np.testing.assert_array_equal(grad_of(x), x.numpy() ** 2 + 1)


def test_detach_shares_storage_and_no_grad_results_do_not_record():
    x = gc.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    d = y.detach()
    assert np.shares_memory(d.numpy(), y.numpy()) and not d.requires_grad
    with gc.no_grad():
        z = x * 2
        assert not gc.is_grad_enabled()
    assert gc.is_grad_enabled() and not z.requires_grad and z.grad_fn is None
    with pytest.raises(gc.GraphcError, match="does not require grad"):
        z.sum().backward()
    with pytest.raises(gc.GraphcError, match="does not require grad"):
        d.sum().backward()


def test_compiled_loss_computed_entirely_under_no_grad_is_refused():
    gc.manual_seed(0)
    model = _small_mlp(nn)
    x = np.ones((2, 3), np.float32)

    def step_fn(x):
        with gc.no_grad():
            loss = model(x).sum()
        loss.backward()
        return loss

    with pytest.raises(gc.GraphcError, match="does not require grad"):
        gc.compile(step_fn, example_inputs=(x,))


def test_compiled_step_reads_grad_through_module_attribute():
    gc.manual_seed(0)
    model = nn.Linear(3, 2)
    x = np.ones((4, 3), np.float32)

    def step_fn(x):
        loss = (model(x) ** 2).sum()
        loss.backward()
        return loss, model.weight.grad

    _, grad = gc.compile(step_fn, example_inputs=(x,))(x)
    np.testing.assert_array_equal(grad_of(model.weight), grad)  # the call's backward() filled .grad, as eagerly
    model.zero_grad()
    (model(gc.tensor(x)) ** 2).sum().backward()
    np.testing.assert_allclose(grad, grad_of(model.weight), rtol=1e-6)


# ---- backward(): accumulation, retain_graph, seeds ----------------------------------------------------
def _accumulating(lib, a, b):
    wa, wb = (lib.tensor(np.array(v), requires_grad=True) for v in (a, b))
    (wa * wb).sum().backward()
    (wa.exp() * 2 - wb * wb * wa).sum().backward()
    return wa, wb


def test_gradients_accumulate_across_backward_calls(torch_ref):
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32)

    def compute():
        wa, wb = _accumulating(torch, a, b)
        return {"a": wa.grad, "b": wb.grad}

    ref = torch_ref([a, b], compute)
    wa, wb = _accumulating(gc, a, b)
    assert_close_scaled(grad_of(wa), ref["a"], TORCH_RTOL, TORCH_ATOL, "a")
    assert_close_scaled(grad_of(wb), ref["b"], TORCH_RTOL, TORCH_ATOL, "b")
    # the sum, not the last one: b's first gradient (a) is part of it
    np.testing.assert_allclose(grad_of(wb), a - 2 * b * a, rtol=1e-6)


def test_retain_graph_allows_a_second_backward():
    x = gc.tensor([1.0, -2.0, 0.5], requires_grad=True)
    loss = (x * x * x).sum()
    loss.backward(retain_graph=True)
    once = grad_of(x).copy()
    np.testing.assert_allclose(once, 3 * x.numpy() ** 2, rtol=1e-6)
    loss.backward()  # allowed, and frees the graph
    np.testing.assert_allclose(grad_of(x), 2 * once, rtol=1e-6)
    with pytest.raises(gc.GraphcError, match="backward through the graph a second time"):
        loss.backward()
    np.testing.assert_allclose(grad_of(x), 2 * once, rtol=1e-6)  # the refused call added nothing


def test_second_backward_without_retain_graph_is_refused():
    x = gc.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    loss = (y * 2).sum()
    loss.backward()
    first = grad_of(x).copy()
    np.testing.assert_allclose(first, 2 * np.exp(x.numpy()), rtol=1e-6)
    with pytest.raises(gc.GraphcError, match="retain_graph=True"):
        loss.backward()
    with pytest.raises(gc.GraphcError, match="second time"):  # a new loss through the freed part too
        (y * 3).sum().backward()
    np.testing.assert_array_equal(grad_of(x), first)  # the refused calls added nothing
    x2 = x * 1  # the leaf itself is still usable
    (x2 * x2).sum().backward()
    np.testing.assert_allclose(grad_of(x), first + 2 * x.numpy(), rtol=1e-6)


def test_backward_on_a_non_scalar_names_the_users_line():
    x = gc.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    here = inspect.currentframe().f_lineno
    with pytest.raises(gc.GraphcError, match="scalar outputs") as info:
        y.backward()
    assert f"test_autograd.py:{here + 2}" in str(info.value), str(info.value)
    assert x.grad is None


def _seeded(lib, a, g):
    x = lib.tensor(np.array(a), requires_grad=True)
    y = (x * x).sum(1, keepdim=True) * x.tanh()  # (3, 4), not a scalar
    y.backward(lib.tensor(np.array(g)))
    return x


def test_backward_with_gradient_argument_matches_torch(torch_ref):
    rng = np.random.default_rng(9)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    g = rng.standard_normal((3, 4)).astype(np.float32)
    ref = torch_ref([a, g], lambda: {"x": _seeded(torch, a, g).grad})
    assert_close_scaled(grad_of(_seeded(gc, a, g)), ref["x"], TORCH_RTOL, TORCH_ATOL, "vjp with a given gradient")
    # a numpy gradient does the same
    x = gc.tensor(a, requires_grad=True)
    ((x * x).sum(1, keepdim=True) * x.tanh()).backward(g)
    assert_close_scaled(grad_of(x), ref["x"], TORCH_RTOL, TORCH_ATOL, "numpy gradient argument")
    with pytest.raises(gc.GraphcError, match="gradient of shape"):
        (gc.tensor(a, requires_grad=True) * 2).backward(gc.tensor(g[:2]))


def test_create_graph_and_inputs_are_refused():
    x = gc.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(gc.GraphcError, match="create_graph"):
        (x * x).sum().backward(create_graph=True)
    assert x.grad is None
    with pytest.raises(gc.GraphcError, match="inputs"):
        (x * x).sum().backward(inputs=[x])


# ---- in-place changes of values saved for backward ---------------------------------------------------
def test_optimizer_step_before_backward_is_refused():
    """The update writes the parameters in place: a graph recorded before it would use stale values."""
    gc.manual_seed(0)
    layer = nn.Linear(2, 1)
    opt = optim.SGD(layer.parameters(), lr=0.1)
    loss = layer(gc.ones(3, 2)).sum()
    loss.backward(retain_graph=True)
    opt.step()
    with pytest.raises(gc.GraphcError, match="changed in place before backward"):
        loss.backward()


INPLACE = {  # a way to change a tensor in place (eagerly, with gradients on)
    "mul_": lambda t: t.mul_(2.0),
    "add_": lambda t: t.add_(1.0),
    "setitem": lambda t: t.__setitem__(0, 5.0),
    "copy_": lambda t: t.copy_(gc.tensor([7.0, 8.0, 9.0])),
    "fill_": lambda t: t.fill_(0.5),
}


@pytest.mark.parametrize("change", list(INPLACE))
def test_inplace_change_of_a_saved_tensor_is_refused(change):
    x = gc.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    z = y * y  # saves y for its gradient
    with pytest.raises(gc.GraphcError):  # at the change or at backward, as long as no wrong gradient comes out
        INPLACE[change](y)
        z.sum().backward()


@pytest.mark.parametrize("change", list(INPLACE))
def test_inplace_change_of_a_saved_leaf_under_no_grad_is_refused_at_backward(change):
    """A leaf may be changed under no_grad (a manual update), but a graph that saved its old value refuses."""
    x = gc.tensor([1.0, 2.0, 3.0], requires_grad=True)
    z = x * x
    with gc.no_grad():
        INPLACE[change](x)
    with pytest.raises(gc.GraphcError, match="changed in place before backward"):
        z.sum().backward()
    assert x.grad is None


def test_manual_update_under_no_grad_is_in_place():
    w = gc.tensor([1.0, 2.0], requires_grad=True)
    original = w
    for _ in range(2):
        (w * w).sum().backward()
        with gc.no_grad():
            w -= 0.1 * w.grad
        assert w is original and w.requires_grad, "w -= ... made a new tensor"
        w.grad = None
    np.testing.assert_allclose(w.numpy(), [0.64, 1.28], rtol=1e-6)


def test_augmented_assignment_is_in_place_where_no_gradient_flows():
    a = gc.tensor([1.0, 2.0])
    alias = a
    a += 1
    a *= 3
    a -= gc.tensor([1.0, 1.0])
    a /= 2
    assert a is alias
    np.testing.assert_array_equal(alias.numpy(), [2.5, 4.0])


def test_manual_update_with_sub_under_no_grad():
    w = gc.tensor([1.0, 2.0], requires_grad=True)
    for _ in range(2):
        (w * w).sum().backward()
        with gc.no_grad():
            w.sub_(0.1 * w.grad)
        w.grad = None
    assert w.requires_grad and w.is_leaf
    np.testing.assert_allclose(w.numpy(), [0.64, 1.28], rtol=1e-6)


# ---- leaves, .grad, int tensors ----------------------------------------------------------------------
def test_grad_stays_none_for_unused_parameters():
    gc.manual_seed(0)
    used, unused = nn.Linear(3, 2), nn.Linear(3, 2)
    frozen = gc.tensor([1.0, 2.0])  # does not require grad
    (used(gc.ones(4, 3)) * frozen).sum().backward()
    assert all(p.grad is not None for p in used.parameters())
    assert all(p.grad is None for p in unused.parameters())
    assert frozen.grad is None and frozen.is_leaf


@pytest.mark.parametrize("dtype, shape", [
    (np.float32, (2, 2)), (np.float64, (2, 2)), (np.float32, (3,)),
    (np.float32, ()),  # numpy makes 0-d results scalars: the gradient must still be an array
], ids=["f32", "f64", "1d", "0d"])
def test_grad_lives_where_the_parameter_does(dtype, shape):
    w = gc.tensor(np.linspace(-2.0, 3.0, int(np.prod(shape))).reshape(shape).astype(dtype), requires_grad=True)
    (w.tanh() * w).sum().backward()
    assert isinstance(w.grad, gc.Tensor)
    assert type(w.grad.array) is type(w.array) is np.ndarray, f"{type(w.grad.array)} for a {type(w.array)} leaf"
    assert w.grad.device == w.device and w.grad.dtype == w.dtype and w.grad.shape == w.shape
    assert not w.grad.requires_grad and w.grad.is_leaf
    assert not np.shares_memory(w.grad.numpy(), w.numpy())


@pytest.mark.parametrize("use", ["clip_grad_norm_", "zero_grad-set_to_none-False"])
def test_in_place_uses_of_a_0d_gradient(use):
    w = gc.tensor(np.array(2.0, np.float32), requires_grad=True)
    (w * w).backward()  # grad 4
    if use == "clip_grad_norm_":
        gc.nn.utils.clip_grad_norm_([w], 1.0)
        np.testing.assert_allclose(grad_of(w), 1.0, rtol=1e-6)
    else:
        optim.SGD([w], lr=0.1).zero_grad(set_to_none=False)
        np.testing.assert_array_equal(grad_of(w), 0.0)


def test_leaf_and_grad_fn():
    x = gc.tensor([1.0], requires_grad=True)
    y = x * 2
    assert x.is_leaf and x.grad_fn is None and x.requires_grad
    assert not y.is_leaf and y.grad_fn is not None and y.grad_fn.op == "mul" and y.requires_grad
    plain = gc.tensor([1.0]) * 2
    assert plain.is_leaf and not plain.requires_grad
    y.backward()
    assert y.grad is None  # gradients accumulate into leaves only, as PyTorch (without retain_grad)
    with pytest.raises(gc.GraphcError, match="detach"):
        (x * 3).requires_grad_(False)


@pytest.mark.parametrize("make", [
    lambda: gc.tensor([1.0, 2.0], requires_grad=True),
    lambda: gc.zeros(2, requires_grad=True),
    lambda: gc.ones(2, requires_grad=True),
    lambda: gc.full((2,), 1.5, requires_grad=True),
    lambda: gc.rand(2, requires_grad=True),
    lambda: gc.randn(2, requires_grad=True),
    lambda: gc.empty(2, requires_grad=True),
    lambda: gc.zeros(2, dtype=gc.float64, requires_grad=True),
], ids=["tensor", "zeros", "ones", "full", "rand", "randn", "empty", "zeros-f64"])
def test_factories_make_leaves_that_require_grad(make):
    t = make()
    assert t.requires_grad and t.is_leaf and t.grad is None
    (t * 3).sum().backward()
    np.testing.assert_array_equal(grad_of(t), np.full(2, 3.0, t.numpy().dtype))


@pytest.mark.parametrize("make", [
    lambda: gc.tensor([1, 2], requires_grad=True),
    lambda: gc.zeros(2, dtype=gc.int64, requires_grad=True),
    lambda: gc.full((2,), 3, requires_grad=True),  # an int value makes an int64 tensor
    lambda: gc.tensor([1, 2]).requires_grad_(),
    lambda: gc.tensor([True, False]).requires_grad_(),
], ids=["tensor", "zeros-int64", "full-int", "requires_grad_-int", "requires_grad_-bool"])
def test_requires_grad_on_non_float_tensors_is_refused(make):
    with pytest.raises(gc.GraphcError, match="floating-point"):
        make()


# ---- grad mode -------------------------------------------------------------------------------------------
def test_grad_mode_is_per_thread():
    inside, seen = threading.Event(), threading.Event()
    results, errors = {}, []

    def quiet():
        try:
            with gc.no_grad():
                inside.set()
                seen.wait(10)
                results["quiet"] = (gc.is_grad_enabled(), (gc.tensor([1.0], requires_grad=True) * 2).requires_grad)
        except Exception as e:  # noqa: BLE001  reported below
            errors.append(e)

    def recording():
        try:
            inside.wait(10)
            x = gc.tensor([1.0, 2.0], requires_grad=True)
            results["recording"] = gc.is_grad_enabled()
            (x * x).sum().backward()
            results["grad"] = grad_of(x).tolist()
        except Exception as e:  # noqa: BLE001
            errors.append(e)
        finally:
            seen.set()

    threads = [threading.Thread(target=quiet), threading.Thread(target=recording)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert not errors, errors
    assert results == {"quiet": (False, False), "recording": True, "grad": [2.0, 4.0]}
    assert gc.is_grad_enabled()  # this thread saw neither


def test_grad_mode_decorators_and_calls():
    x = gc.tensor([1.0], requires_grad=True)

    @gc.no_grad
    def bare(t):
        return t * 2

    @gc.no_grad()
    def called(t):
        return t * 2

    @gc.enable_grad()
    def recording(t):
        return t * 2

    assert not bare(x).requires_grad and not called(x).requires_grad
    assert gc.is_grad_enabled()
    with gc.no_grad():
        assert recording(x).requires_grad
        assert not gc.is_grad_enabled()
        with gc.enable_grad():
            assert (x * 2).requires_grad
        assert not (x * 2).requires_grad
    assert gc.is_grad_enabled()

    gc.set_grad_enabled(False)  # as a call it takes effect at once
    assert not gc.is_grad_enabled() and not (x * 2).requires_grad
    gc.set_grad_enabled(True)
    assert gc.is_grad_enabled() and (x * 2).requires_grad
    with gc.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert gc.is_grad_enabled()
    gc.set_grad_enabled(False)
    with gc.set_grad_enabled(True):
        assert (x * 2).requires_grad
    assert not gc.is_grad_enabled()  # the with block restores the mode from before its call
    gc.set_grad_enabled(True)

    with gc.inference_mode():
        assert not (x * 2).requires_grad
    with gc.inference_mode(False):
        assert (x * 2).requires_grad

    @gc.no_grad()
    def recursive(t, n):
        return t * 2 if n == 0 else recursive(t, n - 1)

    assert not recursive(x, 3).requires_grad and gc.is_grad_enabled()


def test_set_grad_enabled_as_a_decorator_changes_only_the_call():
    x = gc.tensor([1.0], requires_grad=True)
    try:
        @gc.set_grad_enabled(False)
        def f(t):
            return t * 2

        assert gc.is_grad_enabled(), "decorating turned gradients off"
        assert not f(x).requires_grad
        assert gc.is_grad_enabled()
    finally:
        gc.set_grad_enabled(True)


def test_bare_inference_mode_decorator_disables_gradients():
    @gc.inference_mode
    def f(t):
        return t * 2

    assert not f(gc.tensor([1.0], requires_grad=True)).requires_grad


# ---- models against PyTorch -----------------------------------------------------------------------------
CLASSES, BATCH = 5, 8


def mlp(lib):
    return lib.Sequential(lib.Linear(12, 16), lib.ReLU(), lib.Linear(16, 16), lib.Tanh(), lib.Linear(16, CLASSES))


def cnn(lib):
    """bias=False before BatchNorm: that bias's gradient is mathematically zero, its computed value
    rounding noise that two correct implementations need not share (tests/test_train_torch.py)."""
    return lib.Sequential(lib.Conv2d(2, 4, 3, padding=1, bias=False), lib.BatchNorm2d(4), lib.ReLU(),
                          lib.MaxPool2d(2), lib.Conv2d(4, 6, 3, padding=1, bias=False), lib.BatchNorm2d(6),
                          lib.ReLU(), lib.Flatten(), lib.Linear(6 * 4 * 4, CLASSES))


MODELS = {"mlp": (mlp, (12,)), "cnn": (cnn, (2, 8, 8))}


def _model_torch(builder, state, x, y) -> dict:
    tm = torch_twin(builder, state).train()
    xt = torch.from_numpy(x).requires_grad_()
    loss = torch.nn.functional.cross_entropy(tm(xt), torch.from_numpy(y))
    loss.backward()
    return {"loss": loss, "input": xt.grad, **torch_grads(tm),
            **{f"state.{k}": v for k, v in tm.state_dict().items()}}


@pytest.mark.parametrize("model_name", list(MODELS))
def test_model_gradients_match_torch(model_name, torch_ref):
    builder, shape = MODELS[model_name]
    gc.manual_seed(0)
    model = builder(nn)
    state = snapshot(model)
    rng = np.random.default_rng(11)
    x = rng.standard_normal((BATCH, *shape)).astype(np.float32)
    y = rng.integers(0, CLASSES, BATCH).astype(np.int64)
    ref = torch_ref([state, x, y], lambda: _model_torch(builder, state, x, y))

    xg = gc.tensor(x, requires_grad=True)
    loss = nn.CrossEntropyLoss()(model(xg), gc.tensor(y))
    loss.backward()
    assert_close_scaled(float(loss), ref["loss"], TORCH_RTOL, TORCH_ATOL, "loss")
    assert_close_scaled(grad_of(xg), ref["input"], TORCH_RTOL, TORCH_ATOL, "input gradient")
    for name, p in model.named_parameters():
        assert np.abs(grad_of(p)).max() > 0, f"{name}: zero gradient"
        assert_close_scaled(grad_of(p), ref[f"grad.{name}"], TORCH_RTOL, TORCH_ATOL, f"gradient of {name}")
    for key, value in model.state_dict().items():  # BN's running statistics moved as torch's
        want = ref[f"state.{key}"]
        if want.dtype.kind == "f":
            assert_close_scaled(value, want, TORCH_RTOL, TORCH_ATOL, f"{key} after the forward")
        else:
            np.testing.assert_array_equal(value, want, err_msg=key)


# ---- gradient clipping against PyTorch --------------------------------------------------------------------
CLIP_SHAPES = [(3, 4), (4,), (2, 2, 2)]


def _clip_setup(lib, coefs):
    """Leaves whose gradient is exactly ``coefs`` (loss = sum(p * c)), and one without a gradient."""
    params = [lib.tensor(np.ones_like(c), requires_grad=True) for c in coefs]
    unused = lib.tensor(np.ones(3, np.float32), requires_grad=True)
    sum((p * lib.tensor(c)).sum() for p, c in zip(params, coefs)).backward()
    return params, unused


def _clip_coefs(scale):
    rng = np.random.default_rng(21)
    return [(rng.standard_normal(s) * scale).astype(np.float32) for s in CLIP_SHAPES]


# norm 2 of these gradients is ~2.6 x scale; max_norm 1 clips, 1e3 does not
@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf, 3.0], ids=["l2", "l1", "inf", "l3"])
@pytest.mark.parametrize("max_norm", [1.0, 1e3], ids=["clipping", "not-clipping"])
def test_clip_grad_norm_matches_torch(norm_type, max_norm, torch_ref):
    coefs = _clip_coefs(2.0)

    def compute():
        params, unused = _clip_setup(torch, coefs)
        total = torch.nn.utils.clip_grad_norm_(params + [unused], max_norm, norm_type=norm_type)
        return {"total": total, **{f"g{i}": p.grad for i, p in enumerate(params)}}

    ref = torch_ref([coefs, max_norm, norm_type], compute)
    params, unused = _clip_setup(gc, coefs)
    total = gc.nn.utils.clip_grad_norm_(params + [unused], max_norm, norm_type=norm_type)
    assert isinstance(total, gc.Tensor) and total.shape == ()
    # float32 norms summed in another order: a few ulps
    np.testing.assert_allclose(float(total), ref["total"], rtol=1e-6)
    assert (float(total) > max_norm) == (max_norm == 1.0), "the case does not test what its id says"
    for i, p in enumerate(params):
        np.testing.assert_allclose(grad_of(p), ref[f"g{i}"], rtol=1e-6, atol=1e-7, err_msg=f"clipped gradient {i}")
        if max_norm != 1.0:
            np.testing.assert_array_equal(grad_of(p), coefs[i])  # scaled by exactly 1
    assert unused.grad is None


def test_clip_grad_norm_nonfinite():
    coefs = _clip_coefs(1.0)
    params, _ = _clip_setup(gc, coefs)
    params[1].grad.array[2] = np.inf
    before = [grad_of(p).copy() for p in params]
    with pytest.raises(gc.GraphcError, match="non-finite"):
        gc.nn.utils.clip_grad_norm_(params, 1.0, error_if_nonfinite=True)
    for p, b in zip(params, before):  # refused before scaling anything
        np.testing.assert_array_equal(grad_of(p), b)
    assert math.isinf(float(gc.nn.utils.clip_grad_norm_(params, 1.0)))  # as torch: inf, grads scaled by 0


def test_clip_grad_value_matches_torch(torch_ref):
    coefs = _clip_coefs(2.0)

    def compute():
        params, _ = _clip_setup(torch, coefs)
        torch.nn.utils.clip_grad_value_(params, 0.75)
        return {f"g{i}": p.grad for i, p in enumerate(params)}

    ref = torch_ref([coefs], compute)
    params, unused = _clip_setup(gc, coefs)
    assert gc.nn.utils.clip_grad_value_(params + [unused], 0.75) is None
    for i, p in enumerate(params):
        np.testing.assert_array_equal(grad_of(p), ref[f"g{i}"], err_msg=f"clamped gradient {i}")
    assert any((np.abs(c) > 0.75).any() for c in coefs) and unused.grad is None


def test_clip_grad_norm_of_a_single_tensor_and_no_gradients():
    w = gc.tensor([3.0, 4.0], requires_grad=True)
    assert float(gc.nn.utils.clip_grad_norm_(w, 1.0)) == 0.0  # nothing to clip yet
    (w * w).sum().backward()
    assert float(gc.nn.utils.clip_grad_norm_(w, 1.0)) == pytest.approx(10.0, rel=1e-6)
    np.testing.assert_allclose(grad_of(w), [0.6, 0.8], rtol=1e-5)
