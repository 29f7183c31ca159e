"""``gc.cond``, ``gc.scan`` and ``gc.while_loop`` against PyTorch: eager, compiled, saved and reloaded.

Every case runs the same code three ways on graphc (eager: the operators run as Python;
compiled: one ``cond``/``scan``/``while_loop`` node with nested bodies, through
``gc.compile``; reloaded: the compiled plan written with ``plan.save`` and read back with
``gc.load``, continuing where the original left off) and once on the *reference*:

- PyTorch where it is installed (CI has torch==2.13.0): ``torch.cond``,
  ``torch._higher_order_ops.scan.scan`` and ``torch._higher_order_ops.while_loop.while_loop``
  for forward values, and torch autograd of the same loop unrolled in Python for gradients
  (torch's scan rejects an empty or integer carry; the unrolled loop is what the scan means);
  the torch twin of each graphc model loads graphc's initial ``state_dict``.
- Without torch, graphc's own eager mode running the same reference code (eagerly
  ``gc.cond`` is the Python ``if`` and ``gc.scan``/``gc.while_loop`` the Python loop, op by
  op, differentiated by the eager tape). That path shares no code with the control-flow
  nodes, their kernels or their vjp rules, so the compiled and reloaded runs are still
  checked against an independent computation (the eager runs then check little). This
  module records no PyTorch outputs and needs no ``tests/data`` file.

The reference code is written once against a torch-like namespace (``REF.lib``/``REF.nn``
are torch's or graphc's), so both paths run the very same functions.

Tolerances. Everything runs in float64, so that float32 noise cannot hide a wrong carry, a
wrong branch or a gradient missing one step's term (each of those moves values by far more
than 1e-6). Two implementations summing matmuls in different orders differ by a few float64
ulps per op, compounded over a T-step loop and a few SGD steps. RTOL = 1e-10, ATOL = 1e-12
(measured: every comparison here within 2.2e-4 of that bound; the largest relative
difference on entries above 1e-6 in size is 1.1e-12). A reloaded plan runs the same kernels
as the plan it was saved from: bit for bit.

Library bugs these tests found are fixed, each with its test here (it was a strict xfail); some
older tests read the same captures in both branches, and say so.
"""
from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

import graphc as gc
from graphc import nn, optim
from graphc.ir import verify
from graphc.ir.errors import GraphcError, TraceError, VerifyError
from graphc.ir.graph import Node, Value
from conftest import HAVE_TORCH

if HAVE_TORCH:
    import torch
    from torch._higher_order_ops.scan import scan as torch_scan
    from torch._higher_order_ops.while_loop import while_loop as torch_while_loop

# torch.cond/scan/while_loop run eagerly through torch.compile, whose internals warn about their own use of
# torch.jit.script_method: PyTorch's warning, not this module's business
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")

RTOL, ATOL = 1e-10, 1e-12  # float64 against float64 (module docstring)
SEED = 0
B, T, F_IN, H, OUT = 3, 5, 4, 6, 2  # batch, sequence length, features, hidden, outputs (B != T: see rnn_loss)
MODES = ["eager", "compiled", "reloaded"]
HERE = "test_control_flow.py"


def lineno() -> int:
    """The caller's line number (to check that errors name the user's line)."""
    return inspect.currentframe().f_back.f_lineno


# ---- the reference: torch where installed, else graphc's eager mode running the same code ------
class Reference:
    """The library the reference computations run on, and its control-flow operators."""

    def __init__(self):
        if HAVE_TORCH:
            self.name, self.lib, self.nn, self.optim = "torch", torch, torch.nn, torch.optim
            self.cond, self.scan, self.while_loop = torch.cond, torch_scan, torch_while_loop
        else:
            self.name, self.lib, self.nn, self.optim = "graphc-eager", gc, nn, optim
            self.cond, self.scan, self.while_loop = gc.cond, gc.scan, gc.while_loop

    def tensor(self, a, requires_grad=False):
        return self.lib.tensor(np.array(a, copy=True), requires_grad=requires_grad)

    def twin(self, builder, state: dict):
        """``builder(REF.nn)`` in float64 holding graphc's ``state``."""
        model = builder(self.nn).double()
        model.load_state_dict({k: self.tensor(v) for k, v in state.items()})
        return model

    def unrolled_scan(self, combine_fn, init, xs, dim=0, reverse=False):
        """What a scan means: the Python loop, ys stacked at their xs' positions."""
        return unrolled_scan(self.lib, combine_fn, init, xs, dim, reverse)


REF = Reference()


class Ops:
    """The operators a forward function calls: graphc's, or the reference's."""

    def __init__(self, cond, scan, while_loop, lib):
        self.cond, self.scan, self.while_loop, self.lib = cond, scan, while_loop, lib


GC = Ops(gc.cond, gc.scan, gc.while_loop, gc)
REF_OPS = Ops(REF.cond, REF.scan, REF.while_loop, REF.lib)  # torch's higher-order ops
REF_UNROLLED = Ops(REF.cond, REF.unrolled_scan, REF.while_loop, REF.lib)  # scan as a Python loop


def tree_leaves(tree) -> list:
    if isinstance(tree, (tuple, list)):
        return [leaf for t in tree for leaf in tree_leaves(t)]
    if isinstance(tree, dict):
        return [leaf for t in tree.values() for leaf in tree_leaves(t)]
    return [tree]


def tree_map(fn, tree):
    if isinstance(tree, (tuple, list)):
        return type(tree)(tree_map(fn, t) for t in tree)
    if isinstance(tree, dict):
        return {k: tree_map(fn, v) for k, v in tree.items()}
    return fn(tree)


def tree_stack(lib, trees: list, dim: int):
    first = trees[0]
    if isinstance(first, (tuple, list)):
        return type(first)(tree_stack(lib, [t[i] for t in trees], dim) for i in range(len(first)))
    if isinstance(first, dict):
        return {k: tree_stack(lib, [t[k] for t in trees], dim) for k in first}
    return lib.stack(list(trees), dim)


def unrolled_scan(lib, combine_fn, init, xs, dim=0, reverse=False):
    length = tree_leaves(xs)[0].shape[dim]
    lead = (slice(None),) * dim
    carry, ys = init, [None] * length
    for pos in (range(length - 1, -1, -1) if reverse else range(length)):
        carry, ys[pos] = combine_fn(carry, tree_map(lambda x: x[(*lead, pos)], xs))
    return carry, tree_stack(lib, ys, dim)


def arr(x) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach()
    if hasattr(x, "numpy"):
        x = x.numpy()
    return np.array(x)


def assert_trees_close(got, want, rtol=RTOL, atol=ATOL, what="output"):
    """Same pytree structure (tuple/list/dict), leaves allclose (numpy, graphc or torch)."""
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want), f"{what}: {type(got)} vs {type(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_trees_close(g, w, rtol, atol, f"{what}[{i}]")
    elif isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want), f"{what}: keys {list(got)} vs {list(want)}"
        for k in want:
            assert_trees_close(got[k], want[k], rtol, atol, f"{what}[{k!r}]")
    else:
        g, w = arr(got), arr(want)
        assert g.shape == w.shape, f"{what}: shape {g.shape} vs reference {w.shape}"
        assert g.dtype == w.dtype, f"{what}: dtype {g.dtype} vs reference {w.dtype}"
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=what)


def snapshot(model) -> dict:
    return {k: np.array(v, copy=True) for k, v in model.state_dict().items()}


def graphc_model(builder):
    gc.manual_seed(SEED)
    return builder(nn).double()


def ops_of(graph, op) -> list:
    return [n for n in graph.nodes if n.op == op]


# ---- running one function eagerly, compiled, or through a saved and reloaded plan --------------
def run_forward(mode, fn, inputs_list, tmp_path):
    """``fn`` (graphc ops) on each tuple of numpy inputs: eager, one compiled plan for all, or
    that plan saved and loaded. Returns the outputs (numpy arrays or pytrees of Tensors)."""
    if mode == "eager":
        return [fn(*(gc.tensor(a) for a in inputs)) for inputs in inputs_list]
    plan = gc.compile(fn, example_inputs=inputs_list[0])
    if mode == "reloaded":
        plan.save(tmp_path / "forward.graphc")
        plan = gc.load(tmp_path / "forward.graphc")
    outs = []
    for inputs in inputs_list:
        out = plan(*inputs)
        outs.append(tuple(out) if isinstance(out, (tuple, list)) else out)
    return outs


def graphc_gradients(mode, builder, loss_fn, leaves: dict):
    """``loss_fn(GC, model, **leaves)`` and its gradients w.r.t. the leaves and the model's
    parameters, eagerly (leaves are tensors requiring grad) or through a compiled function
    that calls ``loss.backward()`` and returns the ``.grad``s (the leaves are then
    parameters of a holder module, since a plan differentiates w.r.t. parameters)."""
    model = graphc_model(builder)
    names = [k for k, _ in model.named_parameters()]
    if mode == "eager":
        tensors = {k: gc.tensor(a, requires_grad=True) for k, a in leaves.items()}
        loss = loss_fn(GC, model, **tensors)
        loss.backward()
        return (arr(loss), {k: arr(t.grad) for k, t in tensors.items()},
                {k: arr(p.grad) if p.grad is not None else None for k, p in model.named_parameters()})
    holder = nn.Module()
    for k, a in leaves.items():
        setattr(holder, k, nn.Parameter(gc.tensor(a)))
    params = [getattr(holder, k) for k in leaves] + list(model.parameters())

    def gradients(weight):
        for p in params:
            p.grad = None
        loss = loss_fn(GC, model, **{k: getattr(holder, k) for k in leaves}) * weight
        loss.backward()
        return (loss, *[p.grad for p in params])
    plan = gc.compile(gradients, example_inputs=(np.float64(1.0),))
    loss, *grads = plan(np.float64(1.0))
    assert len(ops_of(plan.graph, "scan")) + len(ops_of(plan.graph, "cond")) >= 2, "no control-flow vjp node"
    return (arr(loss), {k: arr(g) for k, g in zip(leaves, grads)},
            {k: None if g is None else arr(g) for k, g in zip(names, grads[len(leaves):])})


def reference_gradients(builder, state, loss_fn, leaves: dict, ops=REF_UNROLLED):
    model = REF.twin(builder, state)
    tensors = {k: REF.tensor(a, requires_grad=True) for k, a in leaves.items()}
    loss = loss_fn(ops, model, **tensors)
    loss.backward()
    return (arr(loss), {k: arr(t.grad) for k, t in tensors.items()},
            {k: None if p.grad is None else arr(p.grad) for k, p in model.named_parameters()})


def assert_gradients_match(got, want):
    (g_loss, g_leaves, g_params), (w_loss, w_leaves, w_params) = got, want
    np.testing.assert_allclose(g_loss, w_loss, rtol=RTOL, atol=ATOL, err_msg="loss")
    assert_trees_close(g_leaves, w_leaves, what="grad")
    assert list(g_params) == list(w_params)
    for k, w in w_params.items():
        g = g_params[k]
        if g is None and w is None:
            continue
        # a parameter the loss never reached: no .grad (None) on one side, zeros on a plan's
        zero = np.zeros_like(w if w is not None else g)
        np.testing.assert_allclose(zero if g is None else g, zero if w is None else w, rtol=RTOL, atol=ATOL,
                                   err_msg=f"grad of {k}")


def graphc_training(mode, builder, loss_fn, batches, tmp_path, lr=0.1, momentum=0.9, saved_after=2):
    """SGD on ``batches`` with a step function in PyTorch's idiom (zero_grad, backward, step):
    eagerly, as one compiled plan, or compiled for ``saved_after`` steps then saved, loaded
    and continued by the loaded plan (which must do exactly what the original plan does).
    Returns (initial state, per-step losses, final state)."""
    model = graphc_model(builder)
    initial = snapshot(model)
    opt = optim.SGD(model.parameters(), lr=lr, momentum=momentum)

    def train_step(*batch):
        opt.zero_grad()
        loss = loss_fn(GC, model, *batch)
        loss.backward()
        opt.step()
        return loss
    if mode == "eager":
        losses = [float(arr(train_step(*(gc.tensor(a) for a in batch)))) for batch in batches]
        return initial, losses, snapshot(model)
    step = gc.compile(train_step, example_inputs=batches[0])
    if mode == "compiled":
        return initial, [float(step(*batch)) for batch in batches], snapshot(model)
    losses = [float(step(*batch)) for batch in batches[:saved_after]]
    step.save(tmp_path / "step.graphc")
    loaded = gc.load(tmp_path / "step.graphc")
    resumed = [float(loaded(*batch)) for batch in batches[saved_after:]]
    original = [float(step(*batch)) for batch in batches[saved_after:]]  # the plan it was saved from goes on
    assert resumed == original, "the reloaded plan does not continue training as the original plan does"
    for name, array in step.state.items():
        np.testing.assert_array_equal(loaded.state[name], array, err_msg=f"reloaded state {name}")
    return initial, losses + resumed, {k: np.array(loaded.state_dict()[k]) for k in initial}


def reference_training(builder, initial, loss_fn, batches, lr=0.1, momentum=0.9, ops=REF_OPS):
    model = REF.twin(builder, initial)
    opt = REF.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    losses = []
    for batch in batches:
        opt.zero_grad()
        loss = loss_fn(ops, model, *(REF.tensor(a) for a in batch))
        loss.backward()
        opt.step()
        losses.append(float(arr(loss)))
    return losses, {k: arr(v) for k, v in model.state_dict().items()}


def assert_training_matches(got, want):
    (_, g_losses, g_state), (w_losses, w_state) = got, want
    np.testing.assert_allclose(g_losses, w_losses, rtol=RTOL, atol=ATOL, err_msg="per-step losses")
    assert list(g_state) == list(w_state)
    for k in w_state:
        np.testing.assert_allclose(g_state[k], w_state[k], rtol=RTOL, atol=ATOL, err_msg=f"state {k} after training")


# ================================================================================================
# cond
# ================================================================================================
def cond_net(lib):
    class CondNet(lib.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.head = lib.Linear(F_IN, H), lib.Linear(F_IN, H), lib.Linear(H, OUT)
    return CondNet()


def cond_forward(ops, m, x):
    """Both branches are closures over the module's layers. They read the same captured
    values (both use ``a`` and ``b``): branches capturing disjoint sets trip the bug pinned by
    test_cond_branches_capturing_different_layers_verify_and_reload."""
    def positive(t):
        return (m.a(t) + m.b(t)).tanh()

    def negative(t):
        return m.a(t) * m.b(t).sigmoid()
    return m.head(ops.cond(x.sum() > 0, positive, negative, (x,)))


def cond_loss(ops, m, x, y):
    return ((cond_forward(ops, m, x) - y) ** 2).mean()


def branch_inputs(seed=1, batch=B):
    """One input that takes the true branch, one the false branch (by the sign of its sum)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, F_IN))
    x = x - x.mean() + 0.3
    return [(x,), (-x,)]


@pytest.mark.parametrize("mode", MODES)
def test_cond_forward_takes_either_branch_like_torch_cond(mode, tmp_path):
    model = graphc_model(cond_net)
    inputs = branch_inputs() + branch_inputs(seed=2, batch=B + 4)  # a second batch size: N is symbolic
    got = run_forward(mode, lambda x: cond_forward(GC, model, x), inputs, tmp_path)
    twin = REF.twin(cond_net, snapshot(model))
    for (x,), out in zip(inputs, got):
        assert_trees_close(out, cond_forward(REF_OPS, twin, REF.tensor(x)), what=f"cond (x.sum()={x.sum():+.2f})")


def test_cond_compiles_to_one_node_holding_both_branches():
    model = graphc_model(cond_net)
    graph = gc.compile(lambda x: cond_forward(GC, model, x), example_inputs=branch_inputs()[0]).graph
    node, = ops_of(graph, "cond")
    true, false = node.attrs["true_branch"], node.attrs["false_branch"]
    assert [n.op for n in true.nodes] == ["linear", "linear", "add", "tanh"]
    assert [n.op for n in false.nodes] == ["linear", "linear", "sigmoid", "mul"]
    # the captured layer weights are trailing operands of the node, not state read by the bodies
    assert [graph.state.get(v.name) is v for v in node.inputs[2:]] == [True] * 4
    assert [v.name for v in node.inputs[2:]] == ["a.weight", "a.bias", "b.weight", "b.bias"]
    assert not true.state and not false.state
    verify(graph)


@pytest.mark.parametrize("mode", ["eager", "compiled"])
@pytest.mark.parametrize("sign", [1, -1], ids=["true_branch", "false_branch"])
def test_cond_gradients_through_the_branch_taken_match_torch(mode, sign):
    x, y = branch_inputs()[0][0] * sign, np.random.default_rng(3).standard_normal((B, OUT))

    def loss_fn(ops, m, x):
        return cond_loss(ops, m, x, ops.lib.tensor(y))
    got = graphc_gradients(mode, cond_net, loss_fn, {"x": x})
    want = reference_gradients(cond_net, snapshot(graphc_model(cond_net)), loss_fn, {"x": x}, ops=REF_OPS)
    assert_gradients_match(got, want)


def pytree_cond(ops, m, x):
    """Branches returning ``(tensor, {"gate": tensor, "total": tensor})``."""
    def positive(t):
        return m.a(t).tanh(), {"gate": m.b(t).sigmoid(), "total": m.a(t).sum(1)}

    def negative(t):
        return m.b(t) * 0.5, {"gate": m.a(t).tanh(), "total": m.b(t).sum(1)}
    return ops.cond(x.sum() > 0, positive, negative, (x,))


def pytree_cond_loss(ops, m, x):
    h, extra = pytree_cond(ops, m, x)
    return (m.head(h * extra["gate"]) ** 2).sum() + (extra["total"] ** 3).sum()


@pytest.mark.parametrize("mode", MODES)
def test_cond_pytree_outputs_match_torch(mode, tmp_path):
    model = graphc_model(cond_net)
    twin = REF.twin(cond_net, snapshot(model))
    inputs = branch_inputs()
    # a compiled function returns a flat tuple of tensors: the cond's leaves, in order
    got = run_forward(mode, lambda x: tuple(tree_leaves(pytree_cond(GC, model, x))), inputs, tmp_path)
    for (x,), out in zip(inputs, got):
        want = pytree_cond(REF_OPS, twin, REF.tensor(x))
        assert_trees_close(out, tuple(tree_leaves(want)))
        if mode == "eager":  # the structure itself: a tuple holding a dict, keys in order
            assert_trees_close(pytree_cond(GC, model, gc.tensor(x)), want)


@pytest.mark.parametrize("mode", ["eager", "compiled"])
@pytest.mark.parametrize("sign", [1, -1], ids=["true_branch", "false_branch"])
def test_cond_pytree_output_gradients_match_torch(mode, sign):
    x = branch_inputs()[0][0] * sign
    got = graphc_gradients(mode, cond_net, pytree_cond_loss, {"x": x})
    want = reference_gradients(cond_net, snapshot(graphc_model(cond_net)), pytree_cond_loss, {"x": x}, ops=REF_OPS)
    assert_gradients_match(got, want)


def nested_cond_loss(ops, m, x):
    """A cond inside a branch of a cond (inner predicate read from the outer branch's operand)."""
    def inner(t):
        return ops.cond(t.mean() > 0.1, lambda u: (m.a(u) - m.b(u)).tanh(), lambda u: m.a(u) * m.b(u), (t,))

    def outer_false(t):
        return m.a(t) + m.b(t)
    return (m.head(ops.cond(x.sum() > 0, inner, outer_false, (x,))) ** 2).sum()


NESTED_SHIFTS = {"outer_true_inner_true": 1.0, "outer_true_inner_false": 0.05, "outer_false": -1.0}


def nested_input(shift):
    x = np.random.default_rng(4).standard_normal((B, F_IN))
    return x - x.mean() + shift


@pytest.mark.parametrize("mode", ["eager", "compiled"])
@pytest.mark.parametrize("path", list(NESTED_SHIFTS))
def test_nested_cond_forward_and_gradients_match_torch(mode, path):
    x = nested_input(NESTED_SHIFTS[path])
    got = graphc_gradients(mode, cond_net, nested_cond_loss, {"x": x})
    want = reference_gradients(cond_net, snapshot(graphc_model(cond_net)), nested_cond_loss, {"x": x}, ops=REF_OPS)
    assert_gradients_match(got, want)


def test_nested_cond_is_a_cond_node_inside_a_branch():
    model = graphc_model(cond_net)
    graph = gc.jit.trace(lambda x: nested_cond_loss(GC, model, x), nested_input(1.0))
    outer, = ops_of(graph, "cond")
    assert len(ops_of(outer.attrs["true_branch"], "cond")) == 1
    assert not ops_of(outer.attrs["false_branch"], "cond")
    verify(graph)


@pytest.mark.parametrize("mode", MODES)
def test_nested_cond_compiled_and_reloaded_runs_every_path(mode, tmp_path):
    model = graphc_model(cond_net)
    inputs = [(nested_input(s),) for s in NESTED_SHIFTS.values()]
    got = run_forward(mode, lambda x: nested_cond_loss(GC, model, x), inputs, tmp_path)
    twin = REF.twin(cond_net, snapshot(model))
    for (x,), out in zip(inputs, got):
        assert_trees_close(out, nested_cond_loss(REF_OPS, twin, REF.tensor(x)))


def cond_batches(steps=6, seed=5):
    """Batches whose sums alternate in sign: training goes through both branches."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(steps):
        x = rng.standard_normal((B, F_IN))
        x = x - x.mean() + (0.4 if i % 2 == 0 else -0.4)
        out.append((x, rng.standard_normal((B, OUT))))
    return out


@pytest.mark.parametrize("mode", MODES)
def test_cond_training_with_sgd_matches_torch(mode, tmp_path):
    batches = cond_batches()
    assert {np.sign(x.sum()) for x, _ in batches} == {1.0, -1.0}
    got = graphc_training(mode, cond_net, cond_loss, batches, tmp_path, saved_after=3)
    assert_training_matches(got, reference_training(cond_net, got[0], cond_loss, batches))


def test_cond_branches_capturing_different_layers_verify_and_reload(tmp_path):
    model = graphc_model(cond_net)

    def fn(x):  # the natural form: each branch uses its own layer (a: weight, bias; b: weight, bias)
        return model.head(gc.cond(x.sum() > 0, lambda t: model.a(t).tanh(), lambda t: model.b(t), (x,)))
    inputs = branch_inputs()
    verify(gc.jit.trace(fn, inputs[0][0]))
    got = run_forward("reloaded", fn, inputs, tmp_path)
    for (x,), out in zip(inputs, got):
        np.testing.assert_allclose(out, arr(fn(gc.tensor(x))), rtol=RTOL, atol=ATOL)


def test_python_if_on_a_traced_bool_using_different_layers_verifies_and_reloads(tmp_path):
    model = graphc_model(cond_net)

    def fn(x):
        if x.sum() > 0:
            return model.a(x).tanh()
        return model.b(x)
    inputs = branch_inputs()
    got = run_forward("reloaded", fn, inputs, tmp_path)
    for (x,), out in zip(inputs, got):
        np.testing.assert_allclose(out, arr(fn(gc.tensor(x))), rtol=RTOL, atol=ATOL)


# ================================================================================================
# scan
# ================================================================================================
def rnn_net(lib):
    class RNN(lib.Module):
        def __init__(self):
            super().__init__()
            self.i2h, self.h2h, self.out = lib.Linear(F_IN, H), lib.Linear(H, H), lib.Linear(H, OUT)
    return RNN()


def rnn_cell(m):
    """A tanh RNN step written with the model's nn.Linear layers (a closure over them)."""
    def cell(h, x):
        h = (m.i2h(x) + m.h2h(h)).tanh()
        return h, m.out(h)
    return cell


def rnn(ops, m, xs, h0, dim=1, reverse=False):
    return ops.scan(rnn_cell(m), h0, xs, dim=dim, reverse=reverse)


def sequence(dim, seed=6, batch=B, length=T):
    """``(xs, h0)``: xs batch-first for dim=1, time-major for dim=0. xs is the first input, so
    its leading dim is the plan's symbolic one: the batch (dim=1) or the sequence length
    (dim=0, where h0's batch is fixed); B != T keeps h0's batch from being taken for it."""
    rng = np.random.default_rng(seed)
    shape = (batch, length, F_IN) if dim == 1 else (length, batch, F_IN)
    return rng.standard_normal(shape), rng.standard_normal((batch, H)) * 0.5


SCAN_LAYOUTS = [(1, False), (1, True), (0, False), (0, True)]
LAYOUT_IDS = ["dim1", "dim1_reverse", "dim0", "dim0_reverse"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dim,reverse", SCAN_LAYOUTS, ids=LAYOUT_IDS)
def test_rnn_scan_forward_matches_torch_scan(mode, dim, reverse, tmp_path):
    model = graphc_model(rnn_net)
    # a second call with a different symbolic dim: the batch for dim=1, the length for dim=0
    inputs = [sequence(dim), sequence(dim, seed=7, batch=B + 2) if dim == 1 else sequence(dim, seed=7, length=T + 3)]
    got = run_forward(mode, lambda xs, h0: rnn(GC, model, xs, h0, dim, reverse), inputs, tmp_path)
    twin = REF.twin(rnn_net, snapshot(model))
    for (xs, h0), out in zip(inputs, got):
        want = rnn(REF_OPS, twin, REF.tensor(xs), REF.tensor(h0), dim, reverse)
        assert_trees_close(out, want)
        assert_trees_close(out, rnn(REF_UNROLLED, twin, REF.tensor(xs), REF.tensor(h0), dim, reverse))


def test_scan_reverse_keeps_ys_at_their_xs_positions():
    xs = gc.tensor(np.arange(1.0, 5.0))
    for compiled in (False, True):
        fn = (lambda v: gc.scan(lambda c, x: (c + x, c + x), gc.zeros(()).double(), v, reverse=True))
        carry, ys = gc.compile(fn, example_inputs=(xs.numpy(),))(xs.numpy()) if compiled else fn(xs)
        assert arr(carry) == 10.0
        np.testing.assert_array_equal(arr(ys), [10.0, 9.0, 7.0, 4.0])  # cumulative sums from the end


def test_rnn_scan_is_one_node_not_an_unrolled_graph():
    model = graphc_model(rnn_net)
    xs, h0 = sequence(1)
    graph = gc.jit.trace(lambda xs, h0: rnn(GC, model, xs, h0), xs, h0)
    node, = graph.nodes
    assert node.op == "scan" and node.attrs["dim"] == 1 and node.attrs["carries"] == 1
    assert [n.op for n in node.attrs["body"].nodes] == ["linear", "linear", "add", "tanh", "linear"]
    assert [str(v.type) for v in node.outputs] == ["f64[N,6]", "f64[N,5,2]"]
    verify(graph)


def rnn_loss(ops, m, xs, h0, target, dim=1, reverse=False):
    h, ys = rnn(ops, m, xs, h0, dim, reverse)
    return ((ys - target) ** 2).mean() + (h ** 2).sum() * 0.1


@pytest.mark.parametrize("mode", ["eager", "compiled"])
@pytest.mark.parametrize("dim,reverse", SCAN_LAYOUTS, ids=LAYOUT_IDS)
def test_rnn_scan_gradients_wrt_init_xs_and_weights_match_torch_unrolled(mode, dim, reverse):
    xs, h0 = sequence(dim)
    target = np.random.default_rng(8).standard_normal((B, T, OUT) if dim == 1 else (T, B, OUT))

    def loss_fn(ops, m, xs, h0):
        return rnn_loss(ops, m, xs, h0, ops.lib.tensor(target), dim, reverse)
    leaves = {"xs": xs, "h0": h0}
    got = graphc_gradients(mode, rnn_net, loss_fn, leaves)
    want = reference_gradients(rnn_net, snapshot(graphc_model(rnn_net)), loss_fn, leaves)  # autograd of the loop
    assert_gradients_match(got, want)
    assert all(np.abs(g).max() > 1e-3 for g in got[1].values())  # every leaf really gets a gradient


def rnn_train_loss(ops, m, xs, h0, target):
    return rnn_loss(ops, m, xs, h0, target)


def rnn_batches(steps=5, seed=9):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((B, T, F_IN)), rng.standard_normal((B, H)) * 0.5, rng.standard_normal((B, T, OUT)))
            for _ in range(steps)]


@pytest.mark.parametrize("mode", MODES)
def test_rnn_scan_training_with_sgd_matches_torch_loop(mode, tmp_path):
    batches = rnn_batches()
    got = graphc_training(mode, rnn_net, rnn_train_loss, batches, tmp_path, lr=0.2)
    want = reference_training(rnn_net, got[0], rnn_train_loss, batches, lr=0.2, ops=REF_UNROLLED)
    assert_training_matches(got, want)
    assert np.abs(got[2]["h2h.weight"] - got[0]["h2h.weight"]).max() > 1e-3  # the recurrent weight learned


@pytest.mark.parametrize("mode", ["eager", "compiled"])
@pytest.mark.parametrize("reads", ["carry", "ys"])
def test_scan_gradients_when_the_loss_reads_only_the_carry_or_only_the_ys(mode, reads):
    xs, h0 = sequence(1)

    def loss_fn(ops, m, xs, h0):
        h, ys = rnn(ops, m, xs, h0)
        return (h ** 2).sum() if reads == "carry" else (ys ** 2).sum()
    leaves = {"xs": xs, "h0": h0}
    got = graphc_gradients(mode, rnn_net, loss_fn, leaves)
    assert_gradients_match(got, reference_gradients(rnn_net, snapshot(graphc_model(rnn_net)), loss_fn, leaves))
    if reads == "carry":  # the output layer never reached the loss
        assert got[2]["out.weight"] is None or not np.any(got[2]["out.weight"])


@pytest.mark.parametrize("mode", ["eager", "compiled"])
def test_two_scans_sharing_weights_accumulate_their_gradients(mode):
    xs, h0 = sequence(1)

    def loss_fn(ops, m, xs, h0):  # a forward and a backward pass over the sequence, as a bidirectional RNN
        forward_h, forward_ys = rnn(ops, m, xs, h0)
        backward_h, backward_ys = rnn(ops, m, xs * 0.5, forward_h, reverse=True)
        return ((forward_ys - backward_ys) ** 2).sum() + (backward_h ** 2).sum()
    leaves = {"xs": xs, "h0": h0}
    got = graphc_gradients(mode, rnn_net, loss_fn, leaves)
    assert_gradients_match(got, reference_gradients(rnn_net, snapshot(graphc_model(rnn_net)), loss_fn, leaves))


def cond_in_scan_loss(ops, m, xs, h0):
    """A cond inside the scan step, choosing per position."""
    def step(h, x):
        h = ops.cond(x.sum() > 0, lambda a, b: (m.i2h(b) + m.h2h(a)).tanh(), lambda a, b: m.h2h(a).tanh() * 0.5, (h, x))
        return h, m.out(h)
    h, ys = ops.scan(step, h0, xs, dim=1)
    return (ys ** 2).sum() + h.sum()


def scan_in_cond_loss(ops, m, xs, h0):
    """A scan inside a cond branch."""
    def recurrent(xs, h0):
        return ops.scan(rnn_cell(m), h0, xs, dim=1)[0]
    h = ops.cond(xs.sum() > 0, recurrent, lambda xs, h0: m.h2h(h0 + m.i2h(xs[:, 0])), (xs, h0))
    return (m.out(h) ** 2).sum()


def scan_in_scan_loss(ops, m, xs, h0):
    """A scan over chunks of 2 positions whose step scans the chunk (xs viewed (B, T', 2, F))."""
    def chunk(h, x):
        h, ys = ops.scan(rnn_cell(m), h, x, dim=1)
        return h, ys.sum(1)
    chunks = xs[:, :4].reshape(xs.shape[0], 2, 2, F_IN)
    h, ys = ops.scan(chunk, h0, chunks, dim=1)
    return (ys ** 2).sum() + (h ** 2).sum()


def nested_sequence(sign):
    xs, h0 = sequence(1, seed=14)
    shift = np.array([0.5, -0.5, 0.5, 0.5, -0.5])[None, :, None]  # positions of both signs inside the sequence
    return (xs - xs.mean(axis=(0, 2), keepdims=True) + shift) * sign, h0


@pytest.mark.parametrize("mode", ["eager", "compiled"])
@pytest.mark.parametrize("sign", [1, -1], ids=["positive", "negative"])
@pytest.mark.parametrize("loss_fn", [cond_in_scan_loss, scan_in_cond_loss, scan_in_scan_loss],
                         ids=["cond_in_scan", "scan_in_cond", "scan_in_scan"])
def test_nested_control_flow_gradients_match_torch_unrolled(mode, sign, loss_fn):
    xs, h0 = nested_sequence(sign)
    if loss_fn is cond_in_scan_loss:
        assert {np.sign(xs[:, t].sum()) for t in range(T)} == {1.0, -1.0}  # the step's cond goes both ways
    leaves = {"xs": xs, "h0": h0}
    got = graphc_gradients(mode, rnn_net, loss_fn, leaves)
    assert_gradients_match(got, reference_gradients(rnn_net, snapshot(graphc_model(rnn_net)), loss_fn, leaves))


def lstm_net(lib):
    class LSTM(lib.Module):
        def __init__(self):
            super().__init__()
            self.i2h, self.h2h, self.out = lib.Linear(F_IN, 4 * H), lib.Linear(H, 4 * H), lib.Linear(H, OUT)
    return LSTM()


def lstm_cell(m):
    """Carry ``(h, c)``, xs ``{"x": features, "mask": 1.0 where the step is real}``, ys a dict."""
    def cell(carry, x):
        h, c = carry
        gates = m.i2h(x["x"]) + m.h2h(h)
        i, f, g, o = (gates[:, k * H:(k + 1) * H] for k in range(4))
        c_next = f.sigmoid() * c + i.sigmoid() * g.tanh()
        h_next = o.sigmoid() * c_next.tanh()
        keep = x["mask"][:, None]
        c_next = keep * c_next + (1 - keep) * c
        h_next = keep * h_next + (1 - keep) * h
        return (h_next, c_next), {"y": m.out(h_next), "c_norm": (c_next * c_next).sum(1)}
    return cell


def lstm_inputs(seed=10):
    rng = np.random.default_rng(seed)
    mask = (np.arange(T)[None, :] < np.array([T, 3, 4])[:, None]).astype(np.float64)  # padded sequences
    return {"x": rng.standard_normal((B, T, F_IN)), "mask": mask}, rng.standard_normal((B, H)) * 0.3, \
        rng.standard_normal((B, H)) * 0.3


def lstm_loss(ops, m, x, mask, h0, c0):
    (h, c), ys = ops.scan(lstm_cell(m), (h0, c0), {"x": x, "mask": mask}, dim=1)
    return (ys["y"] ** 2).mean() + ys["c_norm"].sum() * 0.01 + (h * c).sum()


@pytest.mark.parametrize("mode", MODES)
def test_scan_pytree_carry_and_dict_xs_forward_matches_torch_scan(mode, tmp_path):
    model = graphc_model(lstm_net)
    xs, h0, c0 = lstm_inputs()

    def fn(x, mask, h0, c0):
        return GC.scan(lstm_cell(model), (h0, c0), {"x": x, "mask": mask}, dim=1)
    # a compiled function returns a flat tuple of tensors: h, c, ys["y"], ys["c_norm"]
    got, = run_forward(mode, lambda *a: tuple(tree_leaves(fn(*a))), [(xs["x"], xs["mask"], h0, c0)], tmp_path)
    twin = REF.twin(lstm_net, snapshot(model))
    want = REF.scan(lstm_cell(twin), (REF.tensor(h0), REF.tensor(c0)), tree_map(REF.tensor, xs), dim=1)
    assert_trees_close(got, tuple(tree_leaves(want)))
    if mode == "eager":  # the structure itself: ((h, c), {"y", "c_norm"})
        assert_trees_close(fn(*(gc.tensor(a) for a in (xs["x"], xs["mask"], h0, c0))), want)


@pytest.mark.parametrize("mode", ["eager", "compiled"])
def test_scan_pytree_carry_and_dict_xs_gradients_match_torch_unrolled(mode):
    xs, h0, c0 = lstm_inputs()
    leaves = {"x": xs["x"], "h0": h0, "c0": c0}

    def loss_fn(ops, m, x, h0, c0):
        return lstm_loss(ops, m, x, ops.lib.tensor(xs["mask"]), h0, c0)
    got = graphc_gradients(mode, lstm_net, loss_fn, leaves)
    assert_gradients_match(got, reference_gradients(lstm_net, snapshot(graphc_model(lstm_net)), loss_fn, leaves))
    assert np.abs(got[1]["x"][1, 3:]).max() == 0  # masked steps pass no gradient to their inputs


def counter_loss(ops, m, xs):
    """A scan whose only carry is an integer step counter (no float carry)."""
    count, ys = ops.scan(lambda i, x: (i + 1, m.out(m.i2h(x).tanh()) * (i + 1)), ops.lib.tensor(0), xs, dim=1)
    return (ys ** 2).sum() + count


def stateless_loss(ops, m, xs):
    """A scan with no carry at all: a map over positions."""
    _, ys = ops.scan(lambda c, x: ((), m.out(m.i2h(x).tanh())), (), xs, dim=1)
    return (ys ** 2).sum()


@pytest.mark.parametrize("mode", ["eager", "compiled"])
@pytest.mark.parametrize("loss_fn", [counter_loss, stateless_loss], ids=["int_carry", "empty_carry"])
def test_scan_without_float_carry_gradients_match_torch_unrolled(mode, loss_fn):
    xs = sequence(1)[0]
    got = graphc_gradients(mode, rnn_net, loss_fn, {"xs": xs})
    assert_gradients_match(got, reference_gradients(rnn_net, snapshot(graphc_model(rnn_net)), loss_fn, {"xs": xs}))


@pytest.mark.parametrize("mode", MODES)
def test_scan_with_integer_carry_forward_matches_torch_unrolled(mode, tmp_path):
    model = graphc_model(rnn_net)
    inputs = [(sequence(1)[0],), (sequence(1, seed=11, batch=B + 1)[0],)]

    def fn(xs):
        return GC.scan(lambda i, x: (i + 1, model.out(model.i2h(x).tanh()) * (i + 1)), gc.tensor(0), xs, dim=1)
    got = run_forward(mode, fn, inputs, tmp_path)
    twin = REF.twin(rnn_net, snapshot(model))
    for (xs,), out in zip(inputs, got):
        want = REF.unrolled_scan(lambda i, x: (i + 1, twin.out(twin.i2h(x).tanh()) * (i + 1)), REF.tensor(0),
                                 REF.tensor(xs), dim=1)
        assert_trees_close(out, want)
        assert arr(out[0]) == T and arr(out[0]).dtype == np.int64


# ================================================================================================
# while_loop
# ================================================================================================
def shrink(ops, x, limit):
    """Apply tanh until the sum of |x| is at most ``limit``; also count the iterations.

    cond_fn captures ``limit``, body_fn the constant 1: one capture each. A cond_fn and a
    body_fn capturing two or more values the other does not use trip the bug pinned by
    test_while_loop_with_disjoint_captures_verifies_and_reloads."""
    return ops.while_loop(lambda i, y: y.abs().sum() > limit, lambda i, y: (i + 1, y.tanh()),
                          (ops.lib.tensor(0), x))


def while_inputs():
    rng = np.random.default_rng(12)
    x = rng.standard_normal((B, F_IN)) * 3
    return [(x, np.float64(limit)) for limit in (8.0, 4.0, 1e9)] + [(x[:1], np.float64(0.5))]


@pytest.mark.parametrize("mode", MODES)
def test_while_loop_forward_matches_torch_while_loop(mode, tmp_path):
    inputs = while_inputs()
    got = run_forward(mode, lambda x, limit: shrink(GC, x, limit), inputs, tmp_path)
    counts = []
    for (x, limit), out in zip(inputs, got):
        want = shrink(REF_OPS, REF.tensor(x), REF.tensor(limit))
        assert_trees_close(tuple(out), tuple(want))
        counts.append(int(arr(out[0])))
    assert counts[2] == 0 and len(set(counts)) == 4  # data-dependent trip counts, including none


def test_while_loop_is_one_node_whose_trip_count_is_decided_at_run_time():
    graph = gc.jit.trace(lambda x, limit: shrink(GC, x, limit), *while_inputs()[0])
    node, = graph.nodes
    assert node.op == "while_loop" and node.attrs["carried"] == 2
    assert [n.op for n in node.attrs["cond"].nodes] == ["abs", "sum", "gt"]
    assert [n.op for n in node.attrs["body"].nodes] == ["add", "tanh"]
    verify(graph)


def while_net(lib):
    class Net(lib.Module):
        def __init__(self):
            super().__init__()
            self.a, self.head = lib.Linear(F_IN, H), lib.Linear(H, OUT)
    return Net()


def while_train_loss(ops, m, x, y):
    """The while_loop decides how much to shrink the input (no gradient needed through it);
    the model trains on the result."""
    with ops.lib.no_grad():
        steps, _ = shrink(ops, x, ops.lib.tensor(6.0, dtype=x.dtype))
    h = m.a(x / (steps + 1)).tanh()
    return ((m.head(h) - y) ** 2).mean()


@pytest.mark.parametrize("mode", MODES)
def test_training_step_with_while_loop_off_the_gradient_path_matches_torch(mode, tmp_path):
    rng = np.random.default_rng(13)
    batches = [(rng.standard_normal((B, F_IN)) * s, rng.standard_normal((B, OUT))) for s in (0.5, 3, 1, 4, 2)]
    got = graphc_training(mode, while_net, while_train_loss, batches, tmp_path)
    assert_training_matches(got, reference_training(while_net, got[0], while_train_loss, batches))


def test_compiled_gradient_through_a_while_loop_raises_naming_it():
    model = graphc_model(while_net)
    opt = optim.SGD(model.parameters(), lr=0.1)

    def through_body(x, y):  # the body applies a layer: the loss needs d/d(weights) through the loop
        opt.zero_grad()
        _, h = gc.while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, model.a(h)[:, :F_IN].tanh()),
                             (gc.tensor(0), x))
        loss = ((model.head(model.a(h)) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    def through_carried(x, y):  # the carried value comes from a layer
        opt.zero_grad()
        _, h = gc.while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, h.tanh()), (gc.tensor(0), model.a(x)))
        loss = ((model.head(h) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss
    x, y = cond_batches(1)[0]
    for fn in (through_body, through_carried):
        with pytest.raises(GraphcError, match="while_loop has no gradient") as info:
            gc.compile(fn, example_inputs=(x, y))
        assert f"{HERE}:{fn.__code__.co_firstlineno + 2}" in str(info.value)  # the while_loop's line
    with pytest.raises(GraphcError, match="while_loop has no gradient"):  # eagerly: a carried value needing grad
        gc.while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, h.tanh()), (gc.tensor(0), model.a(gc.tensor(x))))


def test_while_loop_with_disjoint_captures_verifies_and_reloads(tmp_path):
    def halve(x, limit):  # the natural form: cond_fn reads limit, body_fn the constants 1 and 0.5
        return gc.while_loop(lambda i, y: y.abs().sum() > limit, lambda i, y: (i + 1, y * 0.5), (gc.tensor(0), x))
    inputs = while_inputs()[:2]
    verify(gc.jit.trace(halve, *inputs[0]))
    got = run_forward("reloaded", halve, inputs, tmp_path)
    for (x, limit), out in zip(inputs, got):
        assert_trees_close(tuple(out), tuple(halve(gc.tensor(x), gc.tensor(limit))))


# ================================================================================================
# the IR: verifier and text form
# ================================================================================================
def traced_cond():
    model = graphc_model(cond_net)
    return gc.jit.trace(lambda x: cond_forward(GC, model, x), branch_inputs()[0][0])


@pytest.mark.parametrize("case", ["cond", "nested_cond", "pytree_cond", "rnn_scan", "lstm_scan", "while_loop",
                                  "rnn_training_step", "cond_training_step"])
def test_verifier_accepts_traced_graphs(case):
    if case == "cond":
        graph = traced_cond()
    elif case == "nested_cond":
        model = graphc_model(cond_net)
        graph = gc.jit.trace(lambda x: nested_cond_loss(GC, model, x), nested_input(1.0))
    elif case == "pytree_cond":
        model = graphc_model(cond_net)
        graph = gc.jit.trace(lambda x: pytree_cond_loss(GC, model, x), nested_input(1.0))
    elif case == "rnn_scan":
        model = graphc_model(rnn_net)
        graph = gc.jit.trace(lambda xs, h0: rnn(GC, model, xs, h0, 0, True), *sequence(0))
    elif case == "lstm_scan":
        model = graphc_model(lstm_net)
        xs, h0, c0 = lstm_inputs()
        graph = gc.jit.trace(lambda x, mask, h0, c0: lstm_loss(GC, model, x, mask, h0, c0), xs["x"], xs["mask"], h0, c0)
    elif case == "while_loop":
        graph = gc.jit.trace(lambda x, limit: shrink(GC, x, limit), *while_inputs()[0])
    else:  # a whole compiled training step, every pass verified (backward conds and scans included)
        builder, loss_fn, batch = ((rnn_net, rnn_train_loss, rnn_batches(1)[0]) if case == "rnn_training_step"
                                   else (cond_net, cond_loss, cond_batches(1)[0]))
        model = graphc_model(builder)
        opt = optim.SGD(model.parameters(), lr=0.1)

        def train_step(*b):
            opt.zero_grad()
            loss = loss_fn(GC, model, *b)
            loss.backward()
            opt.step()
            return loss
        graph = gc.compile(train_step, example_inputs=batch, verify=True).graph
        assert len([n for n in graph.nodes if n.op in ("cond", "scan")]) == 2  # forward and its vjp
    assert verify(graph) is graph


def test_verifier_rejects_a_body_reading_a_value_it_does_not_define():
    graph = traced_cond()
    node, = ops_of(graph, "cond")
    body = node.attrs["true_branch"]
    outer_x = graph.inputs[0]  # the enclosing graph's input: a body may read only its own inputs
    stray = Value(body.unique_name("stray"), outer_x.type)
    body.nodes.append(Node("neg", [outer_x], [stray], {}, {}))
    with pytest.raises(VerifyError, match=r"true_branch.*reads %x before it is defined"):
        verify(graph)


def test_verifier_rejects_branches_returning_different_types():
    graph = traced_cond()
    node, = ops_of(graph, "cond")
    body = node.attrs["false_branch"]
    total = Value(body.unique_name("total"), body.outputs[0].type.with_shape(()))
    body.nodes.append(Node("sum", [body.outputs[0]], [total], {"dims": None, "keepdim": False}, {}))
    body.outputs = [total]
    with pytest.raises(VerifyError, match=r"cond: the branches return different types: \(f64\[N,6\]\) and \(f64\[\]\)"):
        verify(graph)


def test_verifier_rejects_a_scan_body_changing_the_carry_type():
    model = graphc_model(rnn_net)
    graph = gc.jit.trace(lambda xs, h0: rnn(GC, model, xs, h0), *sequence(1))
    body = graph.nodes[0].attrs["body"]
    narrow = Value(body.unique_name("narrow"), body.outputs[0].type.with_shape(("N", H - 1)))
    body.nodes.append(Node("slice", [body.outputs[0]], [narrow], {"dim": 1, "start": 0, "end": H - 1, "step": 1}, {}))
    body.outputs = [narrow, body.outputs[1]]
    with pytest.raises(VerifyError, match="scan"):
        verify(graph)


def test_printed_ir_shows_the_branches_as_indented_blocks():
    def tiny(x):
        return gc.cond(x.sum() > 0, lambda t: t * 2.0, lambda t: t.tanh(), (x,))
    line = f"{HERE}:{tiny.__code__.co_firstlineno + 1}"
    text = str(gc.jit.trace(tiny, np.ones((2, 3))))
    assert text == f"""\
graph tiny(%x:f64[N,3]) {{
  %0:f64[] = sum[dims=None, keepdim=False](%x)  # at {line}
  %1:b1[] = gt(%0, 0:f64)  # at {line}
  %2:f64[N,3] = cond[true_branch={{true_branch}}, false_branch={{false_branch}}](%1, %x, 2:f64)  # at {line}
    true_branch(%arg0:f64[N,3], %captured:f64[]) {{
      %0:f64[N,3] = mul(%arg0, %captured)  # at {line}
      return %0
    }}
    false_branch(%arg0:f64[N,3], %unused:f64[]) {{
      %0:f64[N,3] = tanh(%arg0)  # at {line}
      return %0
    }}
  return %2
}}"""


def test_printed_ir_indents_a_nested_body_one_level_deeper():
    def tiny(x):
        return gc.cond(x.sum() > 0, lambda t: gc.cond(t.mean() > 1, lambda u: u.exp(), lambda u: u, (t,)),
                       lambda t: t, (x,))
    lines = str(gc.jit.trace(tiny, np.ones((2, 3)))).splitlines()
    heads = [ln for ln in lines if re.match(r" *(true|false)_branch[ (]", ln)]
    assert [len(ln) - len(ln.lstrip()) for ln in heads] == [4, 8, 8, 4]  # outer true, inner true/false, outer false
    assert [ln.strip() for ln in lines].count("}") == 5  # four bodies and the graph, each closed


# ================================================================================================
# errors: what cannot be compiled says so, at the user's line
# ================================================================================================
def compile_error(fn, *inputs):
    with pytest.raises(GraphcError) as info:
        gc.compile(fn, example_inputs=inputs)
    return info.value


X = np.ones((B, F_IN))


def test_cond_branches_returning_different_structures_raise_trace_error_at_the_call():
    def tuple_vs_tensor(x):
        return gc.cond(x.sum() > 0, lambda t: (t, t), lambda t: t, (x,))

    def dict_keys(x):
        return gc.cond(x.sum() > 0, lambda t: {"a": t}, lambda t: {"b": t}, (x,))

    def list_vs_tuple(x):
        return gc.cond(x.sum() > 0, lambda t: [t, t], lambda t: (t, t), (x,))
    for fn in (tuple_vs_tensor, dict_keys, list_vs_tuple):
        error = compile_error(fn, X)
        assert isinstance(error, TraceError), fn.__name__
        assert "different structures" in str(error) and f"{HERE}:{fn.__code__.co_firstlineno + 1}" in str(error)


@pytest.mark.parametrize("case", ["shape", "dtype"])
def test_cond_branches_returning_different_types_raise_at_the_call(case):
    def shape(x):
        return gc.cond(x.sum() > 0, lambda t: t.sum(0), lambda t: t, (x,))

    def dtype(x):
        return gc.cond(x.sum() > 0, lambda t: t.float(), lambda t: t, (x,))
    fn = {"shape": shape, "dtype": dtype}[case]
    error = compile_error(fn, X)
    assert "the branches return different types" in str(error)
    assert f"{HERE}:{fn.__code__.co_firstlineno + 1}" in str(error)


def test_cond_branches_returning_different_types_raise_trace_error_like_scan_and_while():
    def shape(x):
        return gc.cond(x.sum() > 0, lambda t: t.sum(0), lambda t: t, (x,))
    assert isinstance(compile_error(shape, X), TraceError)


def test_scan_combine_fn_not_returning_a_pair_raises_trace_error():
    def carry_only(x):
        return gc.scan(lambda c, v: c + v, x[0], x)

    def triple(x):
        return gc.scan(lambda c, v: (c + v, v, v), x[0], x)
    for fn in (carry_only, triple):
        error = compile_error(fn, X)
        assert isinstance(error, TraceError) and "combine_fn must return a pair (next carry, y)" in str(error)
        assert f"{HERE}:{fn.__code__.co_firstlineno + 1}" in str(error)
    with pytest.raises(GraphcError, match="must return a pair"):  # eagerly too
        carry_only(gc.tensor(X))


@pytest.mark.parametrize("case", ["shape", "dtype", "structure"])
def test_scan_combine_fn_changing_the_carry_raises_trace_error(case):
    def shape(x):
        return gc.scan(lambda c, v: (c.sum(), v), x[0], x)

    def dtype(x):
        return gc.scan(lambda c, v: (c.float(), v), x[0], x)

    def structure(x):
        return gc.scan(lambda c, v: ((c, c), v), x[0], x)
    fn = {"shape": shape, "dtype": dtype, "structure": structure}[case]
    error = compile_error(fn, X)
    assert isinstance(error, TraceError) and "combine_fn must return the carry with init's structure" in str(error)
    assert f"{HERE}:{fn.__code__.co_firstlineno + 1}" in str(error)


def test_while_loop_body_changing_a_carried_type_raises_trace_error():
    def widen(x):
        return gc.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y.float()), (gc.tensor(0), x))
    error = compile_error(widen, X)
    assert isinstance(error, TraceError) and "body_fn must return the carried values with their types" in str(error)
    assert f"{HERE}:{widen.__code__.co_firstlineno + 1}" in str(error)


@pytest.mark.parametrize("op", ["cond", "scan", "while_loop"])
def test_batchnorm_updating_its_buffers_inside_a_body_raises_trace_error(op):
    bn, line = nn.BatchNorm1d(F_IN).double(), lineno()  # training mode: it would update running stats
    body = {
        "cond": lambda x: gc.cond(x.sum() > 0, lambda t: bn(t), lambda t: t, (x,)),
        "scan": lambda x: gc.scan(lambda c, v: (bn(c + v), c), x, gc.stack([x, x], 1), dim=1),
        "while_loop": lambda x: gc.while_loop(lambda i, y: i < 2, lambda i, y: (i + 1, bn(y)), (gc.tensor(0), x)),
    }[op]
    error = compile_error(body, X)
    assert isinstance(error, TraceError)
    assert f"updating a buffer (BatchNorm running statistics in training mode?) inside a {op} body" in str(error)
    assert f"BatchNorm1d at {HERE}:{line}" in str(error)  # a layer's nodes point at the line that made it
    bn.eval()  # in eval mode it only reads its buffers: fine inside a body
    assert ops_of(gc.compile(body, example_inputs=(X,)).graph, op)


@pytest.mark.parametrize("op", ["cond", "scan", "while_loop"])
def test_dropout_in_training_mode_inside_a_body_raises_trace_error(op):
    drop, line = nn.Dropout(0.5), lineno()
    body = {
        "cond": lambda x: gc.cond(x.sum() > 0, lambda t: drop(t), lambda t: t, (x,)),
        "scan": lambda x: gc.scan(lambda c, v: (drop(c + v), c), x, gc.stack([x, x], 1), dim=1),
        "while_loop": lambda x: gc.while_loop(lambda i, y: i < 2, lambda i, y: (i + 1, drop(y)), (gc.tensor(0), x)),
    }[op]
    error = compile_error(body, X)
    assert isinstance(error, TraceError)
    assert f"dropout (random) inside a {op} body is not supported" in str(error)
    assert f"Dropout at {HERE}:{line}" in str(error)

    def functional(x):
        return gc.cond(x.sum() > 0, lambda t: nn.functional.dropout(t, 0.5, training=True), lambda t: t, (x,))
    error = compile_error(functional, X)
    assert isinstance(error, TraceError) and f"at {HERE}:{functional.__code__.co_firstlineno + 1}" in str(error)
    drop.eval()  # the identity in eval mode
    assert ops_of(gc.compile(body, example_inputs=(X,)).graph, op)
