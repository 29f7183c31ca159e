"""ONNX control flow: graphc's ``cond``/``scan``/``while_loop`` exported as ``If``/``Scan``/``Loop``
and run by onnxruntime, and ONNX's ``If``/``Loop``/``Scan`` imported (hand-written models with
outer-scope names, axes, directions and nesting; onnx's own cases run in
tests/test_onnx_backend_suite.py).

Tolerances. onnxruntime runs the same float32 ops as graphc's numpy kernels,
but its Tanh (MLAS's own approximation) and its Gemm/ReduceSum (another summation order)
differ by a few ulps, carried through a recurrence of at most 7 steps: measured at most
2.4e-7 of the output's scale, checked at 1e-6 (RTOL). graphc's own round trip (export, then
gc.load) runs the same kernels: measured equal, checked at 1e-6 too (a Gemm may come back as
MatMul + Add).
"""
from __future__ import annotations

import functools
import importlib.util
import os

import numpy as np
import pytest

import graphc as gc
from graphc import nn

onnx = pytest.importorskip("onnx", reason="the onnx extra is part of the test extra; pip install 'graphc[onnx]'")

HAVE_ORT = importlib.util.find_spec("onnxruntime") is not None
needs_ort = pytest.mark.skipif(not HAVE_ORT, reason="onnxruntime is not installed (CI installs it)")
RTOL = 1e-6  # module docstring


def close(got, want, what=""):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.shape, want.shape, got.dtype, want.dtype)
    scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=RTOL * scale, err_msg=what)


def outputs(result) -> list:
    return list(result) if isinstance(result, tuple) else [result]


def ort_run(path, feeds: dict) -> list:
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


# ---- export: cond -> If, scan -> Scan, while_loop -> Loop ----------------------------------------
class CondNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return gc.cond(x.sum() > 0, lambda t: self.fc(t).relu(), lambda t: t * 2.0, (x,))


class ScanNet(nn.Module):
    """A reverse scan over the batch dim, reading a Linear's weights from outside the body."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        def step(c, v):
            h = (self.fc(v) + c).tanh()
            return h, h * 2.0
        return gc.scan(step, x.mean(0), x, dim=0, reverse=True)


class ScanDim1(nn.Module):
    """A scan over dim 1 whose carry holds the batch dim."""

    def forward(self, x):
        return gc.scan(lambda c, v: ((c * 0.5 + v).tanh(), c - v), x.mean(1), x, dim=1)


class WhileNet(nn.Module):
    """A data-dependent trip count, an integer counter carried next to a tensor."""

    def forward(self, x):
        return gc.while_loop(lambda i, y: y.abs().sum() < 50.0 + i, lambda i, y: (i + 1, y * 2.0 + 1.0),
                             (gc.tensor(0), x))


class Function(nn.Module):
    """A plain function exported as a model."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


def nested(x):
    """A cond inside a scan body, reading the scan's carry and slice and a value from outside."""
    scale = x.mean() + 1.0

    def step(c, v):
        return gc.cond(v.sum() > 0, lambda a, b: (a + b * scale, a * b), lambda a, b: (a - b, a + scale), (c, v))
    return gc.scan(step, x[:, 0] * 0.0, x, dim=1)


MODELS = {"cond": (CondNet, (3, 4), "If"), "scan_batch_reverse": (ScanNet, (3, 4), "Scan"),
          "scan_dim1": (ScanDim1, (3, 5, 4), "Scan"), "while": (WhileNet, (3, 4), "Loop"),
          "nested_function": (lambda: Function(nested), (3, 4), "Scan")}


@functools.lru_cache(maxsize=None)
def _exported(name, folder):
    gc.manual_seed(0)
    make, shape, _ = MODELS[name]
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    path = os.path.join(folder, f"{name}.onnx")
    return gc.export(make(), (x,), path), path, shape


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return str(tmp_path_factory.mktemp("control_export"))


def _batches(shape):
    rng = np.random.default_rng(2)
    for batch in (1, shape[0], 6):
        x = rng.standard_normal((batch, *shape[1:])).astype(np.float32)
        yield from (x, -x)  # both branches, short and long loops


@pytest.mark.parametrize("name", sorted(MODELS))
def test_export_writes_the_onnx_control_op(name, folder):
    _, path, _ = _exported(name, folder)
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    ops = [n.op_type for n in model.graph.node]
    assert MODELS[name][2] in ops
    for node in model.graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH and node.op_type == "If":
                assert not attr.g.input  # a branch reads the If's operands by their outer names


@needs_ort
@pytest.mark.parametrize("name", sorted(MODELS))
def test_onnxruntime_runs_the_export_to_graphcs_outputs(name, folder):
    plan, path, shape = _exported(name, folder)
    for x in _batches(shape):
        want = outputs(plan(x))
        got = ort_run(path, {plan.graph.inputs[0].name: x})
        assert len(got) == len(want)
        for g, w in zip(got, want):
            close(g, np.asarray(w), f"{name} at batch {x.shape[0]}")


@pytest.mark.parametrize("name", sorted(MODELS))
def test_export_then_import_gives_graphc_control_nodes_and_the_same_numbers(name, folder):
    plan, path, shape = _exported(name, folder)
    back = gc.load(path)
    op = {"If": "cond", "Scan": "scan", "Loop": "while_loop"}[MODELS[name][2]]
    assert op in {n.op for n in back.graph.nodes}
    for x in _batches(shape):
        for g, w in zip(outputs(back(x)), outputs(plan(x))):
            close(g, np.asarray(w), name)


def test_a_scan_saving_its_carries_is_a_training_graph_and_is_refused():
    from graphc.ir import Builder, DType, Graph, TensorType, Value
    from graphc.onnx.export import graph_to_onnx

    c, xs = np.zeros(3, np.float32), np.zeros((4, 3), np.float32)
    body = gc.jit.trace(lambda c, x: ((c + x).tanh(), c * x), c, xs[0], dynamic_batch=False)
    g = Graph("saving")
    carry = g.add_input(Value("c", TensorType((3,), DType.float32)))
    seq = g.add_input(Value("xs", TensorType((4, 3), DType.float32)))
    g.outputs = Builder(g).emit("scan", [carry, seq], {"body": body, "carries": 1, "scanned": 1, "saves": True})
    with pytest.raises(gc.GraphcError, match="saves its carries for a gradient belongs to a training graph"):
        graph_to_onnx(g)


# ---- import: hand-written models -------------------------------------------------------------------
HEADER = '<ir_version: 8, opset_import: ["" : 17]>\n'
WHILE = HEADER + """
agraph (int64 M, bool c0, float[3] y0, float limit) => (float[3] y, int64 k) <int64 zero_i = {0}> {
  y, k = Loop(M, c0, y0, zero_i) <body = loop_body (int64 i, bool c, float[3] y_in, int64 k_in)
                                                => (bool c_out, float[3] y_out, int64 k_out) {
      fi = Cast<to=1>(i)
      two = Constant<value = float {2.0}>()
      t = Mul(y_in, two)
      y_out = Add(t, fi)
      s = ReduceSum<keepdims=0>(y_out)
      c_out = Less(s, limit)
      one = Constant<value = int64 {1}>()
      k_out = Add(k_in, one)
  }>
}"""
LOOP_SCAN = HEADER + """
agraph (float[2] y0, float[2] w) => (float[2] y, float[4,2] ys) {
  M = Constant<value = int64 {4}>()
  y, ys = Loop(M, "", y0) <body = b (int64 i, bool c, float[2] y_in) => (bool c_out, float[2] y_out, float[2] s) {
      c_out = Identity(c)
      fi = Cast<to=1>(i)
      t = Mul(y_in, w)
      y_out = Add(t, fi)
      s = Sub(y_out, y_in)
  }>
}"""
SCAN_AXES = HEADER + """
agraph (float[3] s0, float[3,4] a, float[4,3] b, float[3] w) => (float[3] s, float[3,4] y1, float[4,3] y2) {
  s, y1, y2 = Scan(s0, a, b) <num_scan_inputs = 2, scan_input_axes = [-1, 0], scan_input_directions = [1, 0],
      scan_output_axes = [1, 0], scan_output_directions = [1, 0],
      body = sb (float[3] s_in, float[3] a_t, float[3] b_t) => (float[3] s_out, float[3] o1, float[3] o2) {
        m = Mul(s_in, w)
        p = Add(m, a_t)
        q = Sub(p, b_t)
        s_out = Tanh(q)
        o1 = Mul(s_out, a_t)
        o2 = Add(s_out, b_t)
  }>
}"""
SCAN8 = '<ir_version: 4, opset_import: ["" : 8]>\n' + """
agraph (float[2,3] init, float[2,4,3] x) => (float[2,3] y, float[2,4,3] z) {
  y, z = Scan("", init, x) <num_scan_inputs = 1, directions = [1],
      body = sb (float[3] s_in, float[3] x_t) => (float[3] s_out, float[3] o) {
        a = Add(s_in, x_t)
        s_out = Tanh(a)
        o = Mul(s_out, x_t)
  }>
}"""
NESTED = HEADER + """
agraph (int64 M, float[2] y0, float[2] bias) => (float[2] y) {
  y = Loop(M, "", y0) <body = b (int64 i, bool c, float[2] y_in) => (bool c_out, float[2] y_out) {
      c_out = Identity(c)
      s = ReduceSum<keepdims=0>(y_in)
      zero = Constant<value = float {0.0}>()
      p = Greater(s, zero)
      y_out = If(p) <then_branch = tb () => (float[2] o) { o = Sub(y_in, bias) },
                     else_branch = eb () => (float[2] o2) { q = Mul(y_in, y_in)
                                                             o2 = Add(q, bias) }>
  }>
}"""
rng = np.random.default_rng(5)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


# name -> (text, feeds, the graphc op the model becomes, the op inside its body, if any)
IMPORTS = {
    "loop_as_while_loop": (WHILE, lambda: {"M": np.array(10, np.int64), "c0": np.array(True), "y0": f32(3),
                                           "limit": np.array(40, np.float32)}, "while_loop", None),
    "loop_with_scan_outputs_as_scan": (LOOP_SCAN, lambda: {"y0": f32(2), "w": f32(2)}, "scan", None),
    "scan_axes_and_directions": (SCAN_AXES, lambda: {"s0": f32(3), "a": f32(3, 4), "b": f32(4, 3), "w": f32(3)},
                                 "scan", None),
    "scan_opset8_batch": (SCAN8, lambda: {"init": f32(2, 3), "x": f32(2, 4, 3)}, "scan", "scan"),
    "if_in_loop_reading_two_scopes_out": (NESTED, lambda: {"M": np.array(5, np.int64), "y0": f32(2),
                                                           "bias": f32(2)}, "while_loop", "cond"),
}


def _write(tmp_path, text, name="m"):
    model = onnx.parser.parse_model(text)
    onnx.checker.check_model(model, full_check=True)
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    return path, model


@needs_ort
@pytest.mark.parametrize("name", sorted(IMPORTS))
def test_imported_control_flow_matches_onnxruntime(name, tmp_path):
    text, feeds, op, inner = IMPORTS[name]
    path, model = _write(tmp_path, text)
    plan = gc.load(path)
    node = next(n for n in plan.graph.nodes if n.op == op)
    if inner is not None:
        assert inner in {n.op for body in node.attrs.values() if hasattr(body, "nodes") for n in body.nodes}
    for trial in range(2):
        values = feeds()
        got = outputs(plan(*(values[i.name] for i in model.graph.input)))
        want = ort_run(path, values)
        for g, w in zip(got, want):
            close(g, w, f"{name}, trial {trial}")


def test_if_with_a_condition_known_while_importing_reads_its_branch_in_place(tmp_path):
    text = HEADER + """
agraph (float[2] x) => (float[2] y) <bool flag = {1}> {
  y = If(flag) <then_branch = tb () => (float[2] o) { o = Neg(x) },
                else_branch = eb () => (float[2] o2) { o2 = Abs(x) }>
}"""
    plan = gc.load(_write(tmp_path, text)[0])
    assert [n.op for n in plan.graph.nodes] == ["neg"]
    np.testing.assert_array_equal(plan(np.array([1.0, -2.0], np.float32)), [-1.0, 2.0])


@pytest.mark.parametrize("text, match", [
    (HEADER + """
agraph (int64 M, float[2] y0) => (float[2] y, float[N,2] ys) {
  y, ys = Loop(M, "", y0) <body = b (int64 i, bool c, float[2] y_in) => (bool c_out, float[2] y_out, float[2] s) {
      c_out = Identity(c)
      y_out = Neg(y_in)
      s = Abs(y_in)
  }>
}""", r"Loop with scan outputs and a trip count computed at run time"),
    (HEADER + """
agraph (float[2] y0) => (float[2] y, float[3,2] ys) {
  M = Constant<value = int64 {3}>()
  t = Constant<value = bool {1}>()
  y, ys = Loop(M, t, y0) <body = b (int64 i, bool c, float[2] y_in) => (bool c_out, float[2] y_out, float[2] s) {
      y_out = Neg(y_in)
      s = Abs(y_in)
      r = ReduceSum<keepdims=0>(y_in)
      zero = Constant<value = float {0.0}>()
      c_out = Greater(r, zero)
  }>
}""", r"Loop with scan outputs whose body computes its condition"),
    (HEADER + """
agraph (float[2] y0) => (float[2] y) {
  y = Loop("", "", y0) <body = b (int64 i, bool c, float[2] y_in) => (bool c_out, float[2] y_out) {
      c_out = Identity(c)
      y_out = Neg(y_in)
  }>
}""", r"ONNX op 'Loop' is not supported with neither a trip count nor a condition"),
    (HEADER + """
agraph (bool p, float[2] x) => (float[N] y) {
  y = If(p) <then_branch = tb () => (float[2] o) { o = Neg(x) },
             else_branch = eb () => (float[4] o2) { o2 = Concat<axis=0>(x, x) }>
}""", r"If's branches return \(f32\[2\]\) and \(f32\[4\]\)"),
    (HEADER + """
agraph (int64 M, float[2] y0) => (float[4] y) {
  y = Loop(M, "", y0) <body = b (int64 i, bool c, float[2] y_in) => (bool c_out, float[4] y_out) {
      c_out = Identity(c)
      y_out = Concat<axis=0>(y_in, y_in)
  }>
}""", r"Loop's body returns \(f32\[4\]\) for the loop-carried values \(f32\[2\]\)"),
    ('<ir_version: 4, opset_import: ["" : 8]>\n' + """
agraph (int64[1] lens, float[1,2] init, float[1,3,2] x) => (float[1,2] y, float[1,3,2] z) {
  y, z = Scan(lens, init, x) <num_scan_inputs = 1,
      body = sb (float[2] s_in, float[2] x_t) => (float[2] s_out, float[2] o) {
        s_out = Add(s_in, x_t)
        o = Identity(s_out)
  }>
}""", r"sequence_lens shorter than the sequence"),
], ids=["loop_runtime_trip_count_scan_outputs", "loop_computed_condition_scan_outputs", "loop_never_ends",
        "if_branch_types_differ", "loop_carried_type_changes", "scan8_sequence_lens"])
def test_unrepresentable_control_flow_is_refused_clearly(tmp_path, text, match):
    model = onnx.parser.parse_model(text)
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    with pytest.raises(gc.GraphcError, match=match):
        gc.load(path)
