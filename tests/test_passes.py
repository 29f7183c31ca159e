"""Graph passes (DESIGN.md section 4): printed-IR before/after tests on tiny graphs for every
pass, the cases where a fusion must not fire, purity, ``ir.verify`` after every pass, the
pass manager's records, and numeric equivalence of ``passes="none"`` vs the default
pipelines on real models (inference, training, frozen-BN fine-tuning, export with BN folding).

Printed IR is compared with the ``  # module at file:line`` comments stripped (they carry
source lines); the pass that made a node is checked through ``node.meta`` instead.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import graphc as gc
import graphc.nn.functional as F
from graphc import ir, nn, optim
from graphc.tracing import trace_model
from graphc.executor.run_node import run_graph_node as evaluate_node
from graphc.passes import manager
from graphc.passes.cleanup import cse, dce, fold_constants
from graphc.passes.freeze import fold_bn, freeze
from graphc.passes.fusion import fuse_conv_bn, fuse_linear_bias, fuse_linear_relu, fuse_rsqrt
from graphc.training import build_training_graph

# passes="none" vs default, float32: max |a - b| <= RTOL * max |b| per tensor (scale-relative,
# so entries near zero do not need digits they never had).
RTOL = 1e-5
# Exported (BN folded in float64, cast back to float32) vs eager eval, same scale-relative form.
FOLD_RTOL = 1e-5
TRAIN_STEPS = 5


# ---- helpers -----------------------------------------------------------------------------------
def text(graph) -> str:
    """``str(graph)`` without the trailing ``  # ...`` comments on node lines (the header's
    ``# pass ...`` lines are kept)."""
    lines = []
    for line in str(graph).splitlines():
        lines.append(line if line.lstrip().startswith("#") else re.sub(r"  # .*$", "", line))
    return "\n".join(lines)


def node_lines(graph) -> list:
    return [re.sub(r"  # .*$", "", ir.format_node(n, graph)) for n in graph.nodes]


def ops(graph) -> list:
    return [n.op for n in graph.nodes]


def snapshot(graph):
    """Everything a pass could mutate in place: printed text, node fields, containers."""
    nodes = [(n, n.op, list(map(id, n.inputs)), list(map(id, n.outputs)), dict(n.attrs), dict(n.meta),
              [(v.name, v.type) for v in n.outputs]) for n in graph.nodes]
    return (str(graph), nodes, list(map(id, graph.inputs)), dict(graph.state), dict(graph.constants),
            {k: v.copy() for k, v in graph.constant_data.items()}, list(map(id, graph.outputs)),
            dict(graph.updates), repr(graph.meta))


def assert_same_snapshot(a, b):
    assert a[0] == b[0], "printed graph changed"
    for (n1, *rest1), (n2, *rest2) in zip(a[1], b[1]):
        assert n1 is n2 and rest1 == rest2, f"node {n1.op} mutated"
    assert len(a[1]) == len(b[1])
    assert a[2:5] == b[2:5] and a[6:] == b[6:]
    assert a[5].keys() == b[5].keys()
    for k in a[5]:
        np.testing.assert_array_equal(a[5][k], b[5][k])


def rel_err(got, want) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    diff = float(np.max(np.abs(got - want), initial=0.0))
    scale = float(np.max(np.abs(want), initial=0.0))
    return diff / scale if scale > 0 else diff


def assert_rel_close(got, want, tol=RTOL, what="value"):
    err = rel_err(got, want)
    assert err <= tol, f"{what}: relative error {err:.3g} > {tol}"


def images(n, seed=0, c=1, hw=8):
    return np.random.default_rng(seed).standard_normal((n, c, hw, hw)).astype(np.float32)


def labels(n, seed=0, classes=10):
    return np.random.default_rng(seed + 100).integers(0, classes, n).astype(np.int64)


def randomize_bn(model, seed=0):
    """Give every BatchNorm non-trivial gamma/beta/running stats via load_state_dict."""
    rng = np.random.default_rng(seed)
    sd = {k: np.array(v, copy=True) for k, v in model.state_dict().items()}
    for name, m in model.named_modules():
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            p, c = (f"{name}." if name else ""), m.num_features
            sd[p + "weight"] = rng.uniform(0.5, 1.5, c).astype(np.float32)
            sd[p + "bias"] = rng.uniform(-0.5, 0.5, c).astype(np.float32)
            sd[p + "running_mean"] = rng.uniform(-0.5, 0.5, c).astype(np.float32)
            sd[p + "running_var"] = rng.uniform(0.5, 2.0, c).astype(np.float32)
    model.load_state_dict(sd)
    return model


def eager(model, x):
    return model(gc.tensor(x)).numpy()


# ---- tiny modules ------------------------------------------------------------------------------
class LinearTwoUsers(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        h = self.fc(x)
        return h.relu() + h


class LinearAlsoOutput(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        h = self.fc(x)
        return h.relu(), h


class ConvTwoBNs(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(2)
        self.bn2 = nn.BatchNorm2d(2)

    def forward(self, x):
        c = self.conv(x)
        return self.bn1(c) + self.bn2(c)


class ConvResidual(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3, padding=1)
        self.bn = nn.BatchNorm2d(2)

    def forward(self, x):
        c = self.conv(x)
        return (self.bn(c) + c).relu()


class BNTwoUsers(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(2)

    def forward(self, x):
        b = self.bn(self.conv(x))
        return b.relu() + b


class ExpParam(nn.Module):
    """After freeze, ``w.exp() * 2`` is a parameter-free subgraph that folds to one constant."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(np.arange(4, dtype=np.float32) / 4)

    def forward(self, x):
        return x + self.w.exp() * 2.0


def conv_bn_relu(bias=True, relu=True):
    gc.manual_seed(0)
    layers = [nn.Conv2d(1, 2, 3, padding=1, bias=bias), nn.BatchNorm2d(2)] + ([nn.ReLU()] if relu else [])
    return nn.Sequential(*layers)


X2 = np.ones((2, 4), np.float32)
XIMG = np.ones((2, 1, 4, 4), np.float32)
CONV_ATTRS = "stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=1"


# ---- dce ---------------------------------------------------------------------------------------
def test_dce_drops_dead_nodes_and_unused_constants():
    c = gc.tensor(np.arange(4, dtype=np.float32))

    def dead(x):
        unused = (x + c).exp()  # noqa: F841
        return x.relu()

    g = gc.jit.trace(dead, X2)
    assert text(g) == """graph dead(%x:f32[N,4]) {
  constants: $c0:f32[4]
  %0:f32[N,4] = add(%x, $c0)
  %1:f32[N,4] = exp(%0)
  %2:f32[N,4] = relu(%x)
  return %2
}"""
    out = dce(g)
    assert text(out) == """graph dead(%x:f32[N,4]) {
  %2:f32[N,4] = relu(%x)
  return %2
}"""
    assert out.constants == {} and out.constant_data == {}


def test_dce_keeps_state_updates_alive():
    gc.manual_seed(0)
    g = gc.jit.trace(nn.BatchNorm1d(4), X2)  # train mode: the running stats are updates
    out = dce(g)
    assert text(out) == text(g)
    assert ops(out) == ["add", "batch_norm_train"]


# ---- cse ---------------------------------------------------------------------------------------
def test_cse_merges_duplicate_pure_subexpressions():
    def twice(x):
        return x.exp() + x.exp()

    g = gc.jit.trace(twice, X2)
    assert node_lines(g) == ["%0:f32[N,4] = exp(%x)", "%1:f32[N,4] = exp(%x)", "%2:f32[N,4] = add(%0, %1)"]
    assert text(cse(g)) == """graph twice(%x:f32[N,4]) {
  %0:f32[N,4] = exp(%x)
  %2:f32[N,4] = add(%0, %0)
  return %2
}"""


def test_cse_merges_chains_and_identical_small_constants():
    c1 = gc.tensor(np.full(4, 3.0, np.float32))
    c2 = gc.tensor(np.full(4, 3.0, np.float32))
    c3 = gc.tensor(np.full(4, 5.0, np.float32))

    def chains(x):
        return (x * c1).tanh() + (x * c2).tanh() + x * c3

    g = gc.jit.trace(chains, X2)
    assert text(cse(g)) == """graph chains(%x:f32[N,4]) {
  constants: $c0:f32[4], $c2:f32[4]
  %0:f32[N,4] = mul(%x, $c0)
  %1:f32[N,4] = tanh(%0)
  %4:f32[N,4] = add(%1, %1)
  %5:f32[N,4] = mul(%x, $c2)
  %6:f32[N,4] = add(%4, %5)
  return %6
}"""


def test_cse_keeps_nodes_with_different_attrs():
    def two_axes(x):
        return x.softmax(0) + x.softmax(1)

    g = gc.jit.trace(two_axes, np.ones((4, 4), np.float32), dynamic_batch=False)
    assert text(cse(g)) == text(g)
    assert ops(cse(g)) == ["softmax", "softmax", "add"]


def test_cse_never_merges_dropout():
    def drop(x):
        return F.dropout(x, 0.5, training=True) + F.dropout(x, 0.5, training=True)

    g = gc.jit.trace(drop, X2)
    expected = """graph drop(%x:f32[N,4]) {
  %0:f32[N,4], %1:f32[N,4] = dropout[p=0.5](%x)
  %2:f32[N,4], %3:f32[N,4] = dropout[p=0.5](%x)
  %4:f32[N,4] = add(%0, %2)
  return %4
}"""
    assert text(g) == expected
    assert text(cse(g)) == expected


def test_cse_never_merges_dropout_in_a_training_graph():
    gc.manual_seed(0)

    class TwoDrops(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 2)
            self.d1, self.d2 = nn.Dropout(0.5), nn.Dropout(0.5)

        def forward(self, x):
            h = self.fc(x)
            return self.d1(h) + self.d2(h)

    model = TwoDrops()
    step = gc.compile(model, (X2, np.ones((2, 2), np.float32)), loss_fn=nn.MSELoss(),
                      optimizer=optim.SGD(model.parameters(), lr=0.1))
    assert ops(step.graph).count("dropout") == 2


# ---- fold_constants ----------------------------------------------------------------------------
def test_fold_constants_evaluates_parameter_free_subgraphs():
    gc.manual_seed(0)
    model = ExpParam()
    g, tracer = trace_model(model, (X2,))
    frozen = freeze(g, tracer.state_arrays)
    assert text(frozen) == """graph ExpParam(%x:f32[N,4]) {
  constants: $w:f32[4]
  %0:f32[4] = exp($w)
  %1:f32[4] = mul(%0, 2:f32)
  %2:f32[N,4] = add(%x, %1)
  return %2
}"""
    out = fold_constants(frozen, evaluate=evaluate_node)
    assert text(out) == """graph ExpParam(%x:f32[N,4]) {
  constants: $c3:f32[4]
  %2:f32[N,4] = add(%x, $c3)
  return %2
}"""
    np.testing.assert_allclose(out.constant_data["c3"], np.exp(np.arange(4) / 4) * 2, rtol=1e-6)
    assert out.constant_data["c3"].dtype == np.float32


def test_fold_constants_never_folds_random_ops():
    class DropParam(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(np.ones(4, np.float32))

        def forward(self, x):
            return x + F.dropout(self.w.exp(), 0.5, training=True)

    frozen = _frozen(DropParam(), X2)
    assert ops(frozen) == ["exp", "dropout", "add"]
    out = fold_constants(frozen, evaluate=evaluate_node)
    assert ops(out) == ["dropout", "add"]  # exp(w) folded; the dropout still draws at run time
    assert out.nodes[0].inputs[0].name in out.constants


def test_fold_constants_leaves_state_and_inputs_alone():
    gc.manual_seed(0)
    g = gc.jit.trace(ExpParam(), X2)  # w is a parameter (state), not a constant: nothing folds
    assert text(fold_constants(g, evaluate=evaluate_node)) == text(g)


# ---- fuse_linear_relu --------------------------------------------------------------------------
@pytest.mark.parametrize("bias", [True, False])
def test_fuse_linear_relu(bias):
    gc.manual_seed(0)
    g = gc.jit.trace(nn.Sequential(nn.Linear(4, 8, bias=bias), nn.ReLU()), X2)
    args = "%x, @0.weight, @0.bias" if bias else "%x, @0.weight"
    params = "@0.weight:f32[8,4], @0.bias:f32[8]" if bias else "@0.weight:f32[8,4]"
    assert text(g) == f"""graph Sequential(%x:f32[N,4]) {{
  params: {params}
  %0:f32[N,8] = linear({args})
  %1:f32[N,8] = relu(%0)
  return %1
}}"""
    out = fuse_linear_relu(g)
    assert text(out) == f"""graph Sequential(%x:f32[N,4]) {{
  params: {params}
  %1:f32[N,8] = linear_relu({args})
  return %1
}}"""
    node = out.nodes[0]
    assert node.meta["pass"] == "fuse_linear_relu" and node.meta["fused"] == "linear+relu"
    assert node.meta["module"] == "0" and node.meta["module_type"] == "Linear"
    assert "by fuse_linear_relu" in ir.format_node(node, out)


def test_fuse_linear_relu_not_when_linear_has_two_users():
    gc.manual_seed(0)
    g = gc.jit.trace(LinearTwoUsers(), X2)
    assert ops(g) == ["linear", "relu", "add"]
    assert text(fuse_linear_relu(g)) == text(g)


def test_fuse_linear_relu_not_when_linear_is_a_graph_output():
    gc.manual_seed(0)
    g = gc.jit.trace(LinearAlsoOutput(), X2)
    assert ops(g) == ["linear", "relu"]
    assert text(fuse_linear_relu(g)) == text(g)


# ---- fuse_linear_bias, fuse_rsqrt (the import pipeline's) ----------------------------------------
W34, B3 = np.ones((3, 4), np.float32), np.arange(3, dtype=np.float32)


@pytest.mark.parametrize("bias_first", [False, True])
def test_fuse_linear_bias_either_operand_order(bias_first):
    g = gc.jit.trace(lambda x, w, b: b + F.linear(x, w) if bias_first else F.linear(x, w) + b, X2, W34, B3)
    out = fuse_linear_bias(g)
    assert ops(out) == ["linear"] and [v.name for v in out.nodes[0].inputs] == ["x", "w", "b"]
    assert out.nodes[0].meta["fused"] == "linear+add"  # numbers: test_onnx_import's round trips, bit-identical


@pytest.mark.parametrize("fn", [
    lambda x, w, b: F.linear(x, w) + b[:2].sum(),  # a scalar, not a (features,) bias
    lambda x, w, b: F.linear(x, w, b) + b,  # the linear has its bias already
    lambda x, w, b: (F.linear(x, w) + b) * F.linear(x, w).sum(),  # cse: the product has two users
])
def test_fuse_linear_bias_leaves_other_adds(fn):
    g = cse(gc.jit.trace(fn, X2, W34, B3))
    assert text(fuse_linear_bias(g)) == text(g)


def test_fuse_rsqrt_only_for_a_numerator_of_one():
    g = gc.jit.trace(lambda x: 1.0 / x.abs().sqrt() + 2.0 / x.abs().sqrt(), X2)
    assert ops(fuse_rsqrt(cse(g))) == ops(cse(g))  # sqrt has two users after cse
    out = fuse_rsqrt(gc.jit.trace(lambda x: 1.0 / x.abs().sqrt(), X2))
    assert ops(out) == ["abs", "rsqrt"] and out.nodes[1].meta["pass"] == "fuse_rsqrt"
    assert ops(fuse_rsqrt(gc.jit.trace(lambda x: 2.0 / x.abs().sqrt(), X2))) == ["abs", "sqrt", "div"]
    floored = gc.jit.trace(lambda x: gc.div(1.0, x.abs().sqrt(), rounding_mode="floor"), X2)
    assert ops(fuse_rsqrt(floored)) == ["abs", "sqrt", "div"]  # floor(1 / sqrt(x)) is no rsqrt


# ---- fuse_conv_bn (eval form) ------------------------------------------------------------------
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("relu", [True, False])
def test_fuse_conv_bn_eval_form(bias, relu):
    g = gc.jit.trace(conv_bn_relu(bias, relu).eval(), XIMG)
    conv_in = "%x, @0.weight, @0.bias" if bias else "%x, @0.weight"
    bn_in = "@1.weight, @1.bias, @1.running_mean, @1.running_var"
    expected_before = [f"%0:f32[N,2,4,4] = conv2d[{CONV_ATTRS}]({conv_in})",
                       f"%1:f32[N,2,4,4] = batch_norm[eps=1e-05](%0, {bn_in})"]
    if relu:
        expected_before.append("%2:f32[N,2,4,4] = relu(%1)")
    assert node_lines(g) == expected_before
    out = fuse_conv_bn(g)
    y = "%2" if relu else "%1"
    assert node_lines(out) == [f"{y}:f32[N,2,4,4] = conv_bn[{CONV_ATTRS}, eps=1e-05, relu={relu}]({conv_in}, {bn_in})"]
    assert out.outputs[0] is g.outputs[0]
    assert out.nodes[0].meta["fused"] == "+".join(["conv2d", "batch_norm"] + (["relu"] if relu else []))
    assert out.nodes[0].meta["pass"] == "fuse_conv_bn"
    # the header (params, buffers) is unchanged
    assert text(out).splitlines()[:3] == text(g).splitlines()[:3]


# ---- fuse_conv_bn (training form) --------------------------------------------------------------
BN_ARGS = "%0, @1.weight, @1.bias, @1.running_mean, @1.running_var"


def test_fuse_conv_bn_training_form():
    g = gc.jit.trace(conv_bn_relu(bias=True, relu=True), XIMG)  # train mode: batch statistics
    fused = (f"conv_bn_train[{CONV_ATTRS}, eps=1e-05, relu=True, momentum=0.1]"
             "(%x, @0.weight, @0.bias, @1.weight, @1.bias, @1.running_mean, @1.running_var)")
    assert text(g) == f"""graph Sequential(%x:f32[N,1,4,4]) {{
  params: @0.weight:f32[2,1,3,3], @0.bias:f32[2], @1.weight:f32[2], @1.bias:f32[2]
  buffers: @1.running_mean:f32[2], @1.running_var:f32[2], @1.num_batches_tracked:i64[]
  %0:f32[N,2,4,4] = conv2d[{CONV_ATTRS}](%x, @0.weight, @0.bias)
  %1:i64[] = add(@1.num_batches_tracked, 1:i64)
  %2:f32[N,2,4,4], %3:f32[2], %4:f32[2], %5:f32[2], %6:f32[2] = batch_norm_train[eps=1e-05, momentum=0.1]({BN_ARGS})
  %7:f32[N,2,4,4] = relu(%2)
  return %7
  update @1.num_batches_tracked <- %1
  update @1.running_mean <- %5
  update @1.running_var <- %6
}}"""
    out = fuse_conv_bn(g)
    assert text(out) == f"""graph Sequential(%x:f32[N,1,4,4]) {{
  params: @0.weight:f32[2,1,3,3], @0.bias:f32[2], @1.weight:f32[2], @1.bias:f32[2]
  buffers: @1.running_mean:f32[2], @1.running_var:f32[2], @1.num_batches_tracked:i64[]
  %1:i64[] = add(@1.num_batches_tracked, 1:i64)
  %7:f32[N,2,4,4], %0:f32[N,2,4,4], %3:f32[2], %4:f32[2], %5:f32[2], %6:f32[2] = {fused}
  return %7
  update @1.num_batches_tracked <- %1
  update @1.running_mean <- %5
  update @1.running_var <- %6
}}"""
    assert out.nodes[1].meta["fused"] == "conv2d+batch_norm_train+relu"


def test_fuse_conv_bn_training_form_without_bias_or_relu():
    g = gc.jit.trace(conv_bn_relu(bias=False, relu=False), XIMG)
    out = fuse_conv_bn(g)
    assert node_lines(out) == [
        "%1:i64[] = add(@1.num_batches_tracked, 1:i64)",
        f"%2:f32[N,2,4,4], %0:f32[N,2,4,4], %3:f32[2], %4:f32[2], %5:f32[2], %6:f32[2] = conv_bn_train["
        f"{CONV_ATTRS}, eps=1e-05, relu=False, momentum=0.1](%x, @0.weight, @1.weight, @1.bias, "
        "@1.running_mean, @1.running_var)"]


# ---- fusions that must not fire ----------------------------------------------------------------
@pytest.mark.parametrize("train", [False, True], ids=["eval", "train"])
@pytest.mark.parametrize("make", [ConvTwoBNs, ConvResidual], ids=["two_bns", "residual"])
def test_fuse_conv_bn_not_when_conv_output_has_two_users(make, train):
    gc.manual_seed(0)
    model = make().train(train)
    g = gc.jit.trace(model, XIMG)
    assert "conv2d" in ops(g)
    out = fuse_conv_bn(g)
    assert text(out) == text(g)
    assert not {"conv_bn", "conv_bn_train"} & set(ops(out))


@pytest.mark.parametrize("train", [False, True], ids=["eval", "train"])
def test_fuse_conv_bn_keeps_relu_when_bn_output_has_two_users(train):
    gc.manual_seed(0)
    g = gc.jit.trace(BNTwoUsers().train(train), XIMG)
    out = fuse_conv_bn(g)
    fused = "conv_bn_train" if train else "conv_bn"
    assert [op for op in ops(out) if op != "add"] == [fused, "relu"]
    node = out.nodes[ops(out).index(fused)]
    assert node.attrs["relu"] is False
    relu = out.nodes[ops(out).index("relu")]
    assert relu.inputs[0] is node.outputs[0]
    # the relu's output and the bn output both reach the final add
    assert set(map(id, out.nodes[-1].inputs)) == {id(relu.outputs[0]), id(node.outputs[0])}
    ir.verify(out)


def test_fuse_conv_bn_keeps_relu_when_bn_output_is_a_graph_output():
    class Both(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.bn = nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2)

        def forward(self, x):
            b = self.bn(self.conv(x))
            return b.relu(), b

    gc.manual_seed(0)
    out = fuse_conv_bn(gc.jit.trace(Both().eval(), XIMG))
    assert ops(out) == ["conv_bn", "relu"] and out.nodes[0].attrs["relu"] is False


# ---- freeze and fold_bn ------------------------------------------------------------------------
def test_freeze_turns_state_into_constants():
    gc.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
    g, tracer = trace_model(model, (X2,))
    out = freeze(g, tracer.state_arrays)
    assert text(out) == """graph Sequential(%x:f32[N,4]) {
  constants: $0.weight:f32[3,4], $0.bias:f32[3]
  %0:f32[N,3] = linear(%x, $0.weight, $0.bias)
  %1:f32[N,3] = relu(%0)
  return %1
}"""
    assert out.state == {} and out.state_roles == {}
    np.testing.assert_array_equal(out.constant_data["0.weight"], model.state_dict()["0.weight"])
    # a copy: later training does not change the frozen constants
    assert not np.shares_memory(out.constant_data["0.weight"], tracer.state_arrays["0.weight"])


def test_freeze_refuses_a_graph_with_updates():
    g, tracer = trace_model(conv_bn_relu(), (XIMG,))  # train mode: running-stat updates
    with pytest.raises(gc.GraphcError, match="updates"):
        freeze(g, tracer.state_arrays)


def test_fold_bn_into_conv():
    model = randomize_bn(conv_bn_relu(bias=True, relu=True)).eval()
    g, tracer = trace_model(model, (XIMG,))
    frozen = freeze(g, tracer.state_arrays)
    out = fold_bn(frozen)
    assert node_lines(out) == [f"%1:f32[N,2,4,4] = conv2d[{CONV_ATTRS}](%x, $c7, $c8)",
                               "%2:f32[N,2,4,4] = relu(%1)"]
    assert out.nodes[0].meta["pass"] == "fold_bn"
    sd = model.state_dict()
    scale = sd["1.weight"].astype(np.float64) / np.sqrt(sd["1.running_var"].astype(np.float64) + 1e-5)
    want_w = sd["0.weight"] * scale[:, None, None, None]
    want_b = (sd["0.bias"] - sd["1.running_mean"]) * scale + sd["1.bias"]
    np.testing.assert_allclose(out.constant_data["c7"], want_w, rtol=1e-6)
    np.testing.assert_allclose(out.constant_data["c8"], want_b, rtol=1e-6, atol=1e-7)
    assert out.constant_data["c7"].dtype == np.float32
    # the old weights are dead now; dce removes them
    assert text(dce(out)) == f"""graph Sequential(%x:f32[N,1,4,4]) {{
  constants: $c7:f32[2,1,3,3], $c8:f32[2]
  %1:f32[N,2,4,4] = conv2d[{CONV_ATTRS}](%x, $c7, $c8)
  %2:f32[N,2,4,4] = relu(%1)
  return %2
}}"""


def test_fold_bn_without_foldable_producer_becomes_mul_add():
    gc.manual_seed(0)
    model = randomize_bn(nn.Sequential(nn.ReLU(), nn.BatchNorm2d(1))).eval()
    g, tracer = trace_model(model, (XIMG,))
    out = dce(fold_bn(freeze(g, tracer.state_arrays)))
    assert text(out) == """graph Sequential(%x:f32[N,1,4,4]) {
  constants: $c5:f32[1,1,1,1], $c6:f32[1,1,1,1]
  %0:f32[N,1,4,4] = relu(%x)
  %1.scaled:f32[N,1,4,4] = mul(%0, $c5)
  %1:f32[N,1,4,4] = add(%1.scaled, $c6)
  return %1
}"""
    assert all(n.meta["pass"] == "fold_bn" for n in out.nodes[1:])
    sd = model.state_dict()
    scale = sd["1.weight"].astype(np.float64) / np.sqrt(sd["1.running_var"].astype(np.float64) + 1e-5)
    np.testing.assert_allclose(out.constant_data["c5"].ravel(), scale, rtol=1e-6)
    np.testing.assert_allclose(out.constant_data["c6"].ravel(), sd["1.bias"] - sd["1.running_mean"] * scale,
                               rtol=1e-6)


def test_fold_bn_skips_bn_whose_statistics_are_not_constant():
    g = gc.jit.trace(conv_bn_relu().eval(), XIMG)  # not frozen: the stats are state
    assert text(fold_bn(g)) == text(g)


def test_fold_bn_into_linear_with_batchnorm1d():
    gc.manual_seed(0)
    model = randomize_bn(nn.Sequential(nn.Linear(4, 3, bias=False), nn.BatchNorm1d(3))).eval()
    g, tracer = trace_model(model, (X2,))
    out = dce(fold_bn(freeze(g, tracer.state_arrays)))
    assert node_lines(out) == ["%1:f32[N,3] = linear(%x, $c6, $c7)"]
    sd = model.state_dict()
    scale = sd["1.weight"].astype(np.float64) / np.sqrt(sd["1.running_var"].astype(np.float64) + 1e-5)
    np.testing.assert_allclose(out.constant_data["c6"], sd["0.weight"] * scale[:, None], rtol=1e-6)
    np.testing.assert_allclose(out.constant_data["c7"], sd["1.bias"] - sd["1.running_mean"] * scale, rtol=1e-6)


# ---- purity ------------------------------------------------------------------------------------
def _frozen(model, x):
    g, tracer = trace_model(model, (x,))
    return freeze(g, tracer.state_arrays)


def _pure_cases() -> dict:
    """Tiny graphs on which every pass has something to do (or to refuse)."""
    gc.manual_seed(0)
    c = gc.tensor(np.arange(4, dtype=np.float32))

    def mixed(x):
        dead = (x + c).exp()  # noqa: F841
        return x.exp() + x.exp() + F.dropout(x, 0.5, training=True)

    model = randomize_bn(nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.ReLU(), nn.BatchNorm2d(2),
                                       nn.Flatten(), nn.Linear(8, 3), nn.ReLU())).eval()
    small_cnn = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.ReLU(), nn.Flatten(), nn.Linear(8, 3),
                              nn.ReLU(), nn.Linear(3, 2))
    train = _training_graph_of(small_cnn, (XIMG, np.zeros(2, np.int64)), "none")
    return {
        "mixed": gc.jit.trace(mixed, X2),
        "linear_relu": gc.jit.trace(nn.Sequential(nn.Linear(4, 8), nn.ReLU()), X2),
        "conv_bn_eval": gc.jit.trace(conv_bn_relu().eval(), XIMG),
        "conv_bn_train": gc.jit.trace(conv_bn_relu(), XIMG),
        "frozen": _frozen(model, XIMG),
        "foldable": _frozen(ExpParam(), X2),
        "training_step": train,
    }


def _training_graph_of(model, example, passes):
    opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    return build_training_graph(model, example, nn.CrossEntropyLoss(), opt, passes)[0]


PASSES = {
    "dce": dce,
    "cse": cse,
    "fold_constants": lambda g: fold_constants(g, evaluate=evaluate_node),
    "fuse_linear_relu": fuse_linear_relu,
    "fuse_conv_bn": fuse_conv_bn,
    "fold_bn": fold_bn,
}


@pytest.mark.parametrize("name", sorted(PASSES))
def test_passes_are_pure(name):
    changed = []
    for key, graph in _pure_cases().items():
        before = snapshot(graph)
        out = PASSES[name](graph)
        assert out is not graph
        assert_same_snapshot(before, snapshot(graph))
        ir.verify(out)
        changed.append(text(out) != text(graph))
    assert any(changed), f"{name} changed none of the cases: the purity check would be vacuous"


def test_freeze_is_pure():
    gc.manual_seed(0)
    model = randomize_bn(conv_bn_relu()).eval()
    graph, tracer = trace_model(model, (XIMG,))
    before = snapshot(graph)
    saved = {k: v.copy() for k, v in tracer.state_arrays.items()}
    out = freeze(graph, tracer.state_arrays)
    assert_same_snapshot(before, snapshot(graph))
    assert graph.state and not out.state
    for k, v in tracer.state_arrays.items():
        np.testing.assert_array_equal(v, saved[k])


def test_run_passes_is_pure():
    for graph in _pure_cases().values():
        before = snapshot(graph)
        manager.run_passes(graph, ["fold_bn", "dce", "cse", "fold_constants", "fuse_conv_bn", "fuse_linear_relu"],
                           evaluate_node, verify=True)
        assert_same_snapshot(before, snapshot(graph))


def test_passes_are_idempotent():
    names = ["fold_bn", "fold_constants", "cse", "dce", "fuse_conv_bn", "fuse_linear_relu"]
    for graph in _pure_cases().values():
        once = manager.run_passes(graph, names, evaluate_node)
        twice = manager.run_passes(once, names, evaluate_node)
        assert node_lines(twice) == node_lines(once)


# ---- verify after every pass -------------------------------------------------------------------
ALL_NAMES = ["dce", "cse", "fold_constants", "fuse_conv_bn", "fuse_linear_relu", "fold_bn"]


@pytest.mark.parametrize("name", ALL_NAMES)
def test_run_passes_verifies_after_each_pass(name):
    for graph in _pure_cases().values():
        out = manager.run_passes(graph, [name], evaluate_node, verify=True)
        assert ir.verify(out) is out


def test_run_passes_verify_catches_a_broken_pass(monkeypatch):
    """Negative control: verify=True really runs ir.verify and names the offending pass."""
    table = manager.pass_table

    def broken(graph):
        out = graph.copy()
        out.nodes = out.nodes[::-1]  # breaks topological order
        return out

    monkeypatch.setattr(manager, "pass_table", lambda evaluate=None: {**table(evaluate), "dce": broken})
    g = gc.jit.trace(nn.Sequential(nn.Linear(4, 8), nn.ReLU()), X2)
    manager.run_passes(g, ["dce"])  # without verify the broken graph goes through
    with pytest.raises(gc.GraphcError, match="after pass 'dce'"):
        manager.run_passes(g, ["dce"], verify=True)


# ---- the pass manager --------------------------------------------------------------------------
def test_run_passes_records_node_counts_and_prints_them():
    def twice(x):
        return (x.exp() + x.exp()).relu()

    g = gc.jit.trace(twice, X2)
    out = manager.run_passes(g, ["cse", "dce"], evaluate_node)
    assert out.meta["passes"] == [{"name": "cse", "nodes_before": 4, "nodes_after": 3},
                                  {"name": "dce", "nodes_before": 3, "nodes_after": 3}]
    assert text(out) == """graph twice(%x:f32[N,4]) {
  # pass cse: 4 -> 3 nodes
  # pass dce: 3 -> 3 nodes
  %0:f32[N,4] = exp(%x)
  %2:f32[N,4] = add(%0, %0)
  %3:f32[N,4] = relu(%2)
  return %3
}"""
    assert "passes" not in g.meta


def _mlp():
    gc.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 10))


def _cnn(bias=True):
    gc.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1, bias=bias), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 12, 3, padding=1, bias=bias), nn.BatchNorm2d(12), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(12 * 2 * 2, 16), nn.ReLU(), nn.Linear(16, 10))


class ResBlockNet(nn.Module):
    """stem conv-bn-relu, then conv-bn-relu-conv-bn + skip add, relu, adaptive pool, linear."""

    def __init__(self, c=6, classes=10):
        super().__init__()
        self.stem = nn.Conv2d(1, c, 3, padding=1)
        self.bn0 = nn.BatchNorm2d(c)
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)
        self.pool = nn.AdaptiveAvgPool2d((2, 2))
        self.fc = nn.Linear(c * 4, classes)

    def forward(self, x):
        x = self.bn0(self.stem(x)).relu()
        out = self.bn1(self.conv1(x)).relu()
        out = self.bn2(self.conv2(out)) + x
        out = out.relu()
        return self.fc(self.pool(out).flatten(1))


def _resblock():
    gc.manual_seed(0)
    return ResBlockNet()


MODELS = {"mlp": _mlp, "cnn_bias": lambda: _cnn(True), "cnn_nobias": lambda: _cnn(False), "resblock": _resblock}
BATCH = 8


def _training_graph(model, passes, verify=False):
    opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    graph, _ = build_training_graph(model, (images(BATCH), labels(BATCH)), nn.CrossEntropyLoss(), opt, passes,
                                    verify)
    return graph


def test_pass_records_of_default_and_none_pipelines():
    model = _cnn()
    train = _training_graph(model, "default")
    assert [p["name"] for p in train.meta["passes"]] == ["fuse_linear_relu", "fuse_conv_bn", "fuse_conv_relu",
                                                         "autodiff", "guard_finite", "optimizer", "inline_calls", "cse",
                                                         "dce", "fuse_elementwise"]
    none = _training_graph(_cnn(), "none")
    assert [p["name"] for p in none.meta["passes"]] == ["autodiff", "guard_finite", "optimizer"]
    for g in (train, none):
        entries = g.meta["passes"]
        for a, b in zip(entries, entries[1:]):
            assert a["nodes_after"] == b["nodes_before"]
        assert entries[-1]["nodes_after"] == len(g.nodes)
        header = [line.strip() for line in str(g).splitlines() if line.strip().startswith("# pass")]
        assert header == [f"# pass {p['name']}: {p['nodes_before']} -> {p['nodes_after']} nodes" for p in entries]

    infer = gc.compile(_cnn().eval(), (images(4),))
    assert [p["name"] for p in infer.graph.meta["passes"]] == manager.INFERENCE_DEFAULT
    assert "passes" not in gc.compile(_cnn().eval(), (images(4),), passes="none").graph.meta
    assert "# pass" not in str(gc.compile(_cnn().eval(), (images(4),), passes="none").graph)
    chosen = gc.compile(_cnn().eval(), (images(4),), passes=["fuse_conv_bn"]).graph
    assert [p["name"] for p in chosen.meta["passes"]] == ["fuse_conv_bn"]
    assert ops(chosen).count("conv_bn") == 2


@pytest.mark.parametrize("bad", [["dce", "no_such_pass"], "fast", ["dce", 3]])
def test_unknown_passes_raise(bad):
    with pytest.raises(gc.GraphcError):
        gc.compile(_mlp().eval(), (images(4),), passes=bad)
    model = _mlp()
    with pytest.raises(gc.GraphcError):
        gc.compile(model, (images(4), labels(4)), loss_fn=nn.CrossEntropyLoss(),
                   optimizer=optim.SGD(model.parameters(), lr=0.1), passes=bad)


def test_run_passes_rejects_unknown_names():
    g = gc.jit.trace(nn.Linear(4, 2), X2)
    with pytest.raises(gc.GraphcError):
        manager.run_passes(g, ["no_such_pass"])
    with pytest.raises(gc.GraphcError):  # folding needs an evaluator
        manager.run_passes(g, ["fold_constants"])


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_compile_with_verify(kind):
    for passes in ("default", "none", ALL_NAMES):
        gc.compile(MODELS[kind]().eval(), (images(4),), passes=passes, verify=True)
        model = MODELS[kind]()
        step = gc.compile(model, (images(4), labels(4)), loss_fn=nn.CrossEntropyLoss(),
                          optimizer=optim.SGD(model.parameters(), lr=0.1), passes=passes, verify=True)
        ir.verify(step.graph)


# ---- numeric equivalence: passes="none" vs default ---------------------------------------------
@pytest.mark.parametrize("kind", sorted(MODELS))
def test_inference_default_matches_none(kind):
    model = randomize_bn(MODELS[kind](), seed=1).eval()
    x = images(BATCH, seed=3)
    plain = gc.compile(model, (x,), passes="none")
    opt = gc.compile(model, (x,))
    assert len(opt.graph.nodes) <= len(plain.graph.nodes)
    if kind != "mlp":
        assert "batch_norm" not in ops(opt.graph) and "conv_bn" in ops(opt.graph)
    if kind != "resblock":
        assert "linear_relu" in ops(opt.graph)
    want = plain(x)
    assert_rel_close(opt(x), want, what=f"{kind} eval output")
    assert_rel_close(want, eager(model, x), what=f"{kind} eval vs eager")
    assert_rel_close(opt(x[:3]), plain(x[:3]), what=f"{kind} eval output at batch 3")


def _train(model, passes, steps=TRAIN_STEPS, seed=0):
    opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    step = gc.compile(model, (images(BATCH), labels(BATCH)), loss_fn=nn.CrossEntropyLoss(), optimizer=opt,
                      passes=passes, verify=True)
    losses = [float(step(images(BATCH, seed=seed + i), labels(BATCH, seed=seed + i))) for i in range(steps)]
    return step, losses, {k: np.array(v, copy=True) for k, v in model.state_dict().items()}


def _assert_same_training(kind, a, b):
    (_, losses_a, sd_a), (_, losses_b, sd_b) = a, b
    np.testing.assert_allclose(losses_a, losses_b, rtol=RTOL, err_msg=f"{kind} losses")
    assert sd_a.keys() == sd_b.keys()
    for key in sd_a:
        if sd_a[key].dtype.kind in "iu":
            np.testing.assert_array_equal(sd_a[key], sd_b[key], err_msg=f"{kind} {key}")
        else:
            assert_rel_close(sd_a[key], sd_b[key], what=f"{kind} {key}")


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_training_default_matches_none(kind):
    plain = _train(MODELS[kind](), "none")
    fused = _train(MODELS[kind](), "default")
    _assert_same_training(kind, fused, plain)
    graph = fused[0].graph
    if kind != "mlp":
        assert "conv_bn_train" in ops(graph) and "batch_norm_train" not in ops(graph)
        tracked = "bn1.num_batches_tracked" if kind == "resblock" else "1.num_batches_tracked"
        assert int(fused[2][tracked]) == int(plain[2][tracked]) == TRAIN_STEPS
    assert len(graph.nodes) < len(plain[0].graph.nodes)
    # training actually changed the model
    start = MODELS[kind]().state_dict()
    assert any(rel_err(fused[2][k], start[k]) > 1e-3 for k in start if start[k].dtype.kind == "f")


@pytest.mark.parametrize("kind", ["cnn_bias", "cnn_nobias", "resblock"])
def test_frozen_bn_fine_tuning_default_matches_none(kind):
    """Training a model in eval mode: BN uses running stats (eval-form conv_bn in the training
    graph, with its vjp), the running stats never change, gamma/beta still train."""
    plain = _train(randomize_bn(MODELS[kind](), seed=2).eval(), "none")
    fused = _train(randomize_bn(MODELS[kind](), seed=2).eval(), "default")
    _assert_same_training(kind, fused, plain)
    graph = fused[0].graph
    assert "conv_bn" in ops(graph)
    assert not {"batch_norm", "batch_norm_train", "conv_bn_train"} & set(ops(graph))
    start = randomize_bn(MODELS[kind](), seed=2).state_dict()
    for key, value in fused[2].items():
        if "running" in key or "num_batches" in key:
            np.testing.assert_array_equal(value, start[key], err_msg=key)
    bn_weight = "1.weight" if kind != "resblock" else "bn1.weight"
    assert rel_err(fused[2][bn_weight], start[bn_weight]) > 1e-4  # gamma gets gradients


def test_cnn_training_graph_is_fused():
    fused = _training_graph(_cnn(), "default")
    plain = _training_graph(_cnn(), "none")
    conv_bn = [n for n in fused.nodes if n.op == "conv_bn_train"]
    assert len(conv_bn) == 2 and all(n.attrs["relu"] is True for n in conv_bn)
    assert ops(fused).count("linear_relu") == 1
    assert ops(fused).count("conv_bn_train_grad") == 2
    assert not {"batch_norm_train", "batch_norm_train_grad"} & set(ops(fused))
    assert len(fused.nodes) < len(plain.nodes)


# ---- export ------------------------------------------------------------------------------------
def _export_and_check(model, x, tmp_path, tol=FOLD_RTOL):
    path = tmp_path / "model.graphc"
    gc.export(model, (x,), str(path), verify=True)
    plan = gc.load(str(path))
    assert "batch_norm" not in ops(plan.graph) and "batch_norm_train" not in ops(plan.graph)
    assert not plan.graph.state
    was_training = model.training
    want = eager(model.eval(), x)
    model.train(was_training)
    assert_rel_close(plan(x), want, tol=tol, what="exported vs eager eval")
    return plan


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_export_folds_bn_and_matches_eager(kind, tmp_path):
    model = randomize_bn(MODELS[kind](), seed=4).train()
    plan = _export_and_check(model, images(BATCH, seed=5), tmp_path)
    assert model.training  # export restores the mode
    if kind != "mlp":
        # BN folded into the conv, whose relu then fuses with it
        assert "conv2d_relu" in ops(plan.graph) and "conv_bn" not in ops(plan.graph)
        assert not any(n.op in ("mul", "add") and n.meta.get("pass") == "fold_bn" for n in plan.graph.nodes)


class BNEdge(nn.Module):
    """conv (+/- bias) -> BN2d (folds into the conv) -> relu -> BN2d (no foldable producer:
    becomes mul/add) -> flatten -> linear -> BatchNorm1d (folds into the linear)."""

    def __init__(self, bias=True):
        super().__init__()
        self.conv = nn.Conv2d(1, 3, 3, padding=1, bias=bias)
        self.bn = nn.BatchNorm2d(3)
        self.bn_free = nn.BatchNorm2d(3)
        self.fc = nn.Linear(3 * 16, 5)
        self.bn1d = nn.BatchNorm1d(5)

    def forward(self, x):
        h = self.bn_free(self.bn(self.conv(x)).relu())
        return self.bn1d(self.fc(h.flatten(1)))


BN_KEYS = ("bn", "bn_free", "bn1d")


def _set_bn(model, case):
    """Edge-case BN state through load_state_dict (running_var 1e-8, gamma 1e4, gamma < 0)."""
    rng = np.random.default_rng(7)
    sd = {k: np.array(v, copy=True) for k, v in randomize_bn(model, seed=7).state_dict().items()}
    for key in BN_KEYS:
        shape = sd[f"{key}.weight"].shape
        if case == "tiny_var":
            sd[f"{key}.running_var"] = np.full(shape, 1e-8, np.float32)
        elif case == "large_gamma":
            sd[f"{key}.weight"] = np.full(shape, 1e4, np.float32)
        elif case == "negative_gamma":
            sd[f"{key}.weight"] = -rng.uniform(0.5, 2.0, shape).astype(np.float32)
    model.load_state_dict(sd)
    return model


@pytest.mark.parametrize("case", ["plain", "tiny_var", "large_gamma", "negative_gamma", "no_bias"])
def test_export_bn_fold_edge_cases(case, tmp_path):
    gc.manual_seed(0)
    model = _set_bn(BNEdge(bias=case != "no_bias"), case)
    if case == "tiny_var":
        assert float(model.state_dict()["bn.running_var"][0]) == np.float32(1e-8)
    plan = _export_and_check(model, images(BATCH, seed=6, hw=4), tmp_path)
    assert ops(plan.graph) == ["conv2d_relu", "mul", "add", "flatten", "linear"]
    assert [n.meta.get("pass") for n in plan.graph.nodes] == ["fuse_conv_relu", "fold_bn", "fold_bn", None, "fold_bn"]


@pytest.mark.parametrize("make", [ConvTwoBNs, ConvResidual, BNTwoUsers], ids=["two_bns", "residual", "bn_two_users"])
def test_export_bn_with_shared_conv_output(make, tmp_path):
    gc.manual_seed(0)
    model = randomize_bn(make(), seed=8)
    plan = _export_and_check(model, images(BATCH, seed=9, hw=4), tmp_path)
    assert {"conv2d", "conv2d_relu"} & set(ops(plan.graph))


def test_export_batchnorm1d_on_3d_input_becomes_mul_add(tmp_path):
    gc.manual_seed(0)
    model = randomize_bn(nn.Sequential(nn.BatchNorm1d(3), nn.ReLU()), seed=3)
    x = np.random.default_rng(0).standard_normal((4, 3, 5)).astype(np.float32)
    plan = _export_and_check(model, x, tmp_path)
    assert ops(plan.graph) == ["mul", "add", "relu"]


def test_zero_size_batch_example(tmp_path):
    """export refuses it (a file that takes only empty batches); compile traces at batch 0, as
    PyTorch runs empty batches, and the plan refuses a non-empty one saying why."""
    with pytest.raises(gc.GraphcError, match="zero-size batch"):
        gc.export(_cnn(), (images(0),), str(tmp_path / "empty.graphc"))
    assert not (tmp_path / "empty.graphc").exists()
    plan = gc.compile(_cnn().eval(), (images(0),))
    assert plan(images(0)).shape == (0, 10)
    with pytest.raises(gc.ShapeError, match="batch size 0, got 2.*zero-size batch"):
        plan(images(2))


# ---- bugs found while writing these tests (left failing on purpose) ------------------------------
def test_bug_folded_constant_names_collide_with_an_input_named_like_them(tmp_path):
    """BUG: fold_bn's ``_add`` and fold_constants' ``_fresh_constant_name`` pick ``c<k>``
    checking only ``graph.constants``; a forward argument called ``c7`` gets the same name
    as the folded weight: ``conv2d($c7, $c7, $c8)``. verify=True fails after fold_bn, and
    without it gc.export writes a file gc.load refuses ("two values share the name $c7")."""

    class Named(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.bn = nn.Conv2d(1, 2, 3, padding=1), nn.BatchNorm2d(2)

        def forward(self, c7):
            return self.bn(self.conv(c7)).relu()

    gc.manual_seed(0)
    model = randomize_bn(Named())
    path = str(tmp_path / "named.graphc")
    gc.export(model, (XIMG,), path)
    plan = gc.load(path)  # raises PlanFormatError today
    assert_rel_close(plan(XIMG), eager(model.eval(), XIMG), tol=FOLD_RTOL)


def test_bug_autodiff_constant_names_collide_with_a_parameter_named_like_them(tmp_path):
    """BUG: autodiff's seed constant (Builder.constant) is named ``c{len(constants)}`` without
    looking at state names: a Parameter called ``c0`` gives two values named $c0, so
    ``verify=True`` fails and a saved training plan cannot be loaded."""

    class Named(nn.Module):
        def __init__(self):
            super().__init__()
            self.c0 = nn.Parameter(np.ones(4, np.float32))

        def forward(self, x):
            return x * self.c0

    model = Named()
    step = gc.compile(model, (X2, X2), loss_fn=nn.MSELoss(), optimizer=optim.SGD(model.parameters(), lr=0.1),
                      passes="none")
    path = str(tmp_path / "named.graphc")
    step.save(path)
    gc.load(path)  # raises PlanFormatError today ("duplicate tensor name 'c0'")
    ir.verify(step.graph)


# ---- fuse_conv_relu ----------------------------------------------------------------------------
def test_fuse_conv_relu_before_after_and_not_with_two_users():
    from graphc.passes.fusion import fuse_conv_relu

    gc.manual_seed(0)
    x = np.random.default_rng(0).standard_normal((2, 1, 6, 6)).astype(np.float32)
    g = gc.jit.trace(nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(), nn.Flatten()), x)
    out = fuse_conv_relu(g)
    lines = [ln.split("  #")[0].strip() for ln in str(out).splitlines() if " = " in ln]
    assert lines == ["%1:f32[N,2,6,6] = conv2d_relu[stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=1]"
                     "(%x, @0.weight, @0.bias)",
                     "%2:f32[N,72] = flatten[start_dim=1, end_dim=-1](%1)"]
    assert out.nodes[0].meta["fused"] == "conv2d+relu"

    class TwoUsers(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 2, 3, padding=1)

        def forward(self, x):
            h = self.conv(x)
            return h.relu() + h

    g2 = gc.jit.trace(TwoUsers(), x)
    assert [n.op for n in fuse_conv_relu(g2).nodes] == [n.op for n in g2.nodes]


def test_cnn_without_bn_trains_the_same_with_fused_conv_relu():
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((8, 1, 6, 6)).astype(np.float32), rng.integers(0, 3, 8)
    losses = {}
    for passes in ("none", "default"):
        gc.manual_seed(0)
        model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                              nn.Linear(36, 3))
        step = gc.compile(model, (x, y), loss_fn=nn.CrossEntropyLoss(), passes=passes, verify=True,
                          optimizer=optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
        losses[passes] = [float(step(x, y)) for _ in range(5)]
        if passes == "default":
            assert "conv2d_relu" in [n.op for n in step.graph.nodes]
    np.testing.assert_allclose(losses["default"], losses["none"], rtol=1e-5)
