"""The fuse_elementwise pass and the fused_elementwise kernel (compiled by numba, or op by op).

The IEEE rules (``+ - * /``, sqrt, comparisons, selects, clips) must give exactly what the
unfused numpy kernels give, NaN, infinities and signed zeros included, so those comparisons
are bit for bit; exp, log, tanh, sigmoid and erf come from LLVM's and the C library's math and numpy's SIMD one
(graphc's own float64 erf), which differ by an ulp or so (checked to 4 ulps).
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import graphc as gc
from graphc import ir, nn, optim
from graphc.executor.kernels import KernelSpec
from graphc.executor.kernels import _loops
from graphc.executor.kernels.fused_elementwise import fused_elementwise_kernel
from graphc.ir.errors import GraphcError
from graphc.ir.ops.fused_elementwise import EXACT, SCALAR_RULES
from graphc.passes import manager
from graphc.passes.fuse_elementwise import fuse_elementwise

numba = pytest.importorskip("numba")  # the fast extra; `make test` installs it

SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 6.0, 1e-30, 3e38, 2.5], np.float32)


def ops(graph):
    return [n.op for n in graph.nodes]


def values(shape, seed, dtype=np.float32):
    x = (np.random.default_rng(seed).standard_normal(shape) * 4).astype(dtype)
    k = min(x.size, SPECIALS.size)
    x.reshape(-1)[:k] = SPECIALS[:k].astype(dtype)
    return x


def test_a_chain_becomes_one_node_and_prints_its_body():
    g = gc.jit.trace(lambda x, y: ((x * 2 + 1).relu() * y, x - y), np.ones((2, 3), np.float32),
                     np.ones((2, 3), np.float32))
    fused = fuse_elementwise(g)
    assert ops(fused) == ["fused_elementwise", "sub"]  # sub reads inputs only: a group of one stays
    node = fused.nodes[0]
    assert ops(node.attrs["body"]) == ["mul", "add", "relu", "mul"]
    assert node.meta["pass"] == "fuse_elementwise" and node.meta["fused"] == "mul+add+relu+mul"
    text = ir.format_graph(fused)
    assert "fused_elementwise" in text and "relu" in text
    ir.verify(fused)


def test_a_value_read_outside_the_group_is_one_of_its_outputs():
    def f(x):
        a = x * 3
        return a.relu() + 1, a.softmax(-1)  # softmax is no elementwise op: it reads a from memory
    g = gc.jit.trace(f, np.ones((2, 3), np.float32))
    fused = fuse_elementwise(g)
    node = next(n for n in fused.nodes if n.op == "fused_elementwise")
    assert len(node.outputs) == 2
    x = values((2, 3), 0)
    for a, b in zip(_run(fused, x), _run(g, x)):
        np.testing.assert_array_equal(a, b)


def test_no_group_waits_on_itself():
    # c = a + softmax(a): c cannot join a's group (softmax sits between them)
    def f(x):
        a = x * 2
        return (a + a.softmax(-1)).relu()
    g = gc.jit.trace(f, np.ones((4, 5), np.float32))
    fused = fuse_elementwise(g)
    ir.verify(fused)
    producer = {id(v): i for i, n in enumerate(fused.nodes) for v in n.outputs}
    for i, node in enumerate(fused.nodes):  # the order is a valid schedule
        assert all(producer.get(id(v), -1) < i for v in node.inputs)
    x = values((4, 5), 1)
    np.testing.assert_array_equal(_run(fused, x)[0], _run(g, x)[0])


def test_groups_of_other_shapes_or_dtypes_stay_apart():
    g = gc.jit.trace(lambda x, b: (x * 2).relu() + (b * 3), np.ones((2, 3), np.float32), np.ones(3, np.float32))
    fused = fuse_elementwise(g)
    # b * 3 has shape (3,): broadcasting inside a loop is not fused; x's chain is
    assert ops(fused).count("fused_elementwise") == 1 and "add" in ops(fused)
    h = gc.jit.trace(lambda x: (x.double() * 2).relu(), np.ones((2, 3), np.float32))
    assert ops(fuse_elementwise(h)) == ["fused_elementwise"]  # cast joins: float64 after it


def _run(graph, *arrays):
    from graphc.executor.backends import NUMPY
    from graphc.executor.program import Program
    state = {k: graph.constant_data.get(k) for k in graph.state}
    program = Program(graph, arrays[0].shape[0], NUMPY, np.random.default_rng(0), dict(graph.constant_data), state)
    return [np.array(a, copy=True) for a in program.run(list(arrays))]


# ---- the kernel: every rule, compiled against op by op --------------------------------------------
def _one_op_body(op, dtypes, attrs, out_dtype):
    graph = ir.Graph("one")
    inputs = [graph.add_input(ir.Value(f"i{k}", ir.TensorType((64, 33), ir.DType[d]))) for k, d in enumerate(dtypes)]
    out = ir.Value("t0", ir.TensorType((64, 33), ir.DType[out_dtype]))
    attrs = ir.registry.get_op(op).normalize_attrs(attrs)
    graph.nodes.append(ir.Node(op, inputs, [out], attrs))
    graph.outputs = [out]
    return graph


CASES = [(op, ("float32", "float32"), {}, "float32") for op in ("add", "sub", "mul", "div", "maximum", "minimum")]
CASES += [(op, ("float32", "float32"), {}, "bool") for op in ("gt", "lt", "ge", "le", "eq", "ne")]
CASES += [(op, ("float32",), {}, "float32") for op in ("neg", "abs", "relu", "sqrt", "exp", "log", "tanh",
                                                      "sigmoid", "erf")]
CASES += [("sigmoid", ("float64",), {}, "float64"), ("erf", ("float64",), {}, "float64")]
CASES += [(op, ("float32", "float32"), {}, "float32") for op in ("relu_grad", "sigmoid_grad", "tanh_grad")]
CASES += [("where", ("bool", "float32", "float32"), {}, "float32"), ("cast", ("float32",), {"dtype": "float64"}, "float64"),
          ("cast", ("float32",), {"dtype": "bool"}, "bool"), ("cast", ("bool",), {"dtype": "float32"}, "float32"),
          ("hardtanh", ("float32",), {"min_val": 0.0, "max_val": 6.0}, "float32"),
          ("leaky_relu", ("float32",), {"negative_slope": 0.2}, "float32"),
          ("leaky_relu", ("float32",), {"negative_slope": 3.0}, "float32"),
          ("add", ("float64", "float64"), {}, "float64"), ("div", ("float64", "float64"), {}, "float64")]


def test_every_rule_is_tested():
    assert {c[0] for c in CASES} == set(SCALAR_RULES)


@pytest.mark.parametrize("op,dtypes,attrs,out_dtype", CASES, ids=[f"{c[0]}-{c[3]}-{i}" for i, c in enumerate(CASES)])
def test_compiled_rule_matches_the_numpy_kernel(op, dtypes, attrs, out_dtype):
    body = _one_op_body(op, dtypes, attrs, out_dtype)
    in_types = tuple(v.type for v in body.inputs)
    spec = KernelSpec({"body": body}, in_types, (body.outputs[0].type,))
    arrays = [values((64, 33), k).astype(d) if d != "bool" else values((64, 33), k) > 0 for k, d in enumerate(dtypes)]
    if op in ("sigmoid_grad", "tanh_grad"):
        arrays[1] = np.tanh(arrays[1]).astype(arrays[1].dtype)
    with np.errstate(all="ignore"):
        want = fused_elementwise_kernel(np, spec, compiled=False)(*arrays)
        got = fused_elementwise_kernel(np, spec, compiled=True)(*arrays)
    assert got.dtype == want.dtype
    if op not in EXACT:  # two math libraries: within a few ulps
        np.testing.assert_array_max_ulp(got, want, maxulp=4)
    else:  # IEEE operations: bit for bit (signed zeros and NaNs included)
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_float32_loops_never_compute_in_float64():
    body = _one_op_body("mul", ("float32", "float32"), {}, "float32")
    for op in ("sqrt", "exp", "tanh", "sigmoid", "erf", "hardtanh", "leaky_relu", "relu_grad", "sigmoid_grad"):
        graph = ir.Graph("chain")
        # a chain through every float32 rule: any widening to double would show in the LLVM IR
        x = graph.add_input(ir.Value("i0", ir.TensorType((8,), ir.DType.float32)))
        attrs = ir.registry.get_op(op).normalize_attrs({})
        out = ir.Value("t0", x.type)
        inputs = [x, x] if op in ("relu_grad", "sigmoid_grad") else [x]
        graph.nodes.append(ir.Node(op, inputs, [out], attrs))
        graph.outputs = [out]
        loop = _loops.compiled_loop(_loops.loop_key(graph))
        x8 = np.ones(8, np.float32)
        loop((x8,), (np.empty(8, np.float32),), 8)
        llvm = "".join(loop.compiled.inspect_llvm().values())
        assert not re.search(r"\b(fpext|fadd double|fmul double|fdiv double|fsub double)\b", llvm), op
    assert body is not None


def test_equal_groups_share_one_compiled_loop():
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 3))
    step = gc.compile(model, (np.ones((4, 6), np.float32), np.zeros(4, np.int64)), loss_fn=nn.CrossEntropyLoss(),
                      optimizer=optim.Adam(model.parameters(), lr=1e-3))
    groups = [n for n in step.graph.nodes if n.op == "fused_elementwise"]
    updates = [n for n in groups if n.meta.get("phase") == "update"]
    assert len(updates) == 6 and all(len(n.outputs) == 3 for n in updates)  # p, m, v per parameter
    keys = {_loops.loop_key(n.attrs["body"]) for n in updates}
    assert len(keys) == 1  # every parameter's update is the same loop


# ---- whole plans: fused against unfused ------------------------------------------------------------
def _unfused(pipeline):
    return [s.name for s in manager.PIPELINES[pipeline] if s.name != "fuse_elementwise" and not s.required]


@pytest.mark.parametrize("opt_name", ["adam", "sgd"])
def test_fused_training_is_bit_identical_to_unfused(opt_name):
    def make():
        gc.manual_seed(0)
        # the 256x256 weight's update (65536 elements) runs the compiled loop, in place
        model = nn.Sequential(nn.Linear(20, 256), nn.ReLU6(), nn.Linear(256, 256), nn.Tanh(), nn.Linear(256, 4))
        opt = (optim.Adam(model.parameters(), lr=1e-2) if opt_name == "adam"
               else optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4))
        return model, opt
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((16, 20)).astype(np.float32), rng.integers(0, 4, 16)
    results = []
    for passes in ("default", _unfused("training")):
        model, opt = make()
        step = gc.compile(model, (x, y), loss_fn=nn.CrossEntropyLoss(), optimizer=opt, passes=passes)
        losses = [float(step(x, y)) for _ in range(5)]
        results.append((step, losses, {k: np.array(v, copy=True) for k, v in model.state_dict().items()}))
    (fused, losses_f, sd_f), (plain, losses_p, sd_p) = results
    assert "fused_elementwise" in ops(fused.graph) and "fused_elementwise" not in ops(plain.graph)
    program = fused._programs[16]
    assert not program.copy_back  # every update written in place
    loops = [r.run for r, n in zip(program.runs, program.nodes) if isinstance(r.run, _loops.Tiered)]
    assert loops and all(r.make_fast is None for r in loops)  # and by the compiled loop
    assert losses_f == losses_p
    for k in sd_p:
        np.testing.assert_array_equal(sd_f[k], sd_p[k], err_msg=k)


def test_the_numeric_pass_check_covers_the_pass():
    model = nn.Sequential(nn.Linear(5, 8), nn.Sigmoid(), nn.Linear(8, 2))
    x, y = np.ones((3, 5), np.float32), np.zeros(3, np.int64)
    step = gc.compile(model, (x, y), loss_fn=nn.CrossEntropyLoss(), optimizer=optim.Adam(model.parameters()),
                      verify="numeric")
    record = [r for r in step.graph.meta["verification"] if r["pass"] == "fuse_elementwise"]
    assert record and all(r["max_abs"] == 0 for r in record)


def test_a_saved_fused_plan_loads_and_trains_on(tmp_path):
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    x, y = np.ones((4, 6), np.float32), np.zeros(4, np.int64)
    step = gc.compile(model, (x, y), loss_fn=nn.CrossEntropyLoss(), optimizer=optim.Adam(model.parameters()))
    step(x, y)
    step.save(tmp_path / "plan.gcp")
    loaded = gc.load(tmp_path / "plan.gcp")
    assert "fused_elementwise" in ops(loaded.graph)
    assert float(loaded(x, y)) == float(step(x, y))


def test_a_body_with_an_op_that_cannot_fuse_is_refused():
    body = _one_op_body("add", ("float32", "float32"), {}, "float32")
    body.nodes[0] = ir.Node("matmul", body.nodes[0].inputs, body.nodes[0].outputs, {})
    opdef = ir.registry.get_op("fused_elementwise")
    with pytest.raises(GraphcError, match="cannot be fused"):
        ir.registry.infer_types(opdef, [v.type for v in body.inputs], {"body": body})


def test_plans_with_parallel_loops_run_from_several_threads_at_once():
    # numba's workqueue layer aborts the process when two threads launch parallel loops at
    # once; the launch lock serialises them (a plan is shared between threads)
    import threading
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(64, 512)

        def forward(self, x):
            return (self.lin(x) * 0.5 + 1).relu() * 3  # exact ops: the loop gives numpy's bits
    x = np.random.default_rng(0).standard_normal((256, 64)).astype(np.float32)
    plan = gc.compile(Net().eval(), (x,))
    assert ops(plan.graph)[-1] == "fused_elementwise" and 256 * 512 >= _loops.COMPILE_MIN
    want = np.array(plan(x), copy=True)
    results, errors = [], []

    def work():
        try:
            for _ in range(20):
                results.append(np.array_equal(np.asarray(plan(x)), want))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)
    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 60 and all(results)


def test_a_value_read_twice_by_one_op_is_one_input():
    g = gc.jit.trace(lambda x, y: (x * x + y).relu(), np.ones((2, 3), np.float32), np.ones((2, 3), np.float32))
    node = fuse_elementwise(g).nodes[0]
    assert len(node.inputs) == 2 and len({v.name for v in node.attrs["body"].inputs}) == 2
    ir.verify(fuse_elementwise(g))


def test_a_forked_child_runs_plans_whose_loops_split_over_threads():
    # a pool's worker threads do not survive fork: the child must make its own, not wait forever
    import multiprocessing
    x = np.random.default_rng(0).standard_normal((64, 16, 32, 32)).astype(np.float32)
    plan = gc.compile(nn.Sequential(nn.MaxPool2d(2)).eval(), (x,))
    for _ in range(_loops.WARM_CALLS):  # the pooling loop (split over the cores) takes over
        want = np.array(plan(x))
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=lambda: send.send(np.array(plan(x))))  # forked: nothing pickled
    child.start()
    try:
        assert receive.poll(60), "the forked child's plan never finished"
        np.testing.assert_array_equal(receive.recv(), want)
    finally:
        child.join(10)
        if child.is_alive():
            child.kill()


def test_a_body_mixing_dtypes_inside_one_op_is_refused():
    # the pass never makes one (the rules assume one dtype per op); a file must not either
    body = _one_op_body("add", ("float32", "float64"), {}, "float64")
    opdef = ir.registry.get_op("fused_elementwise")
    with pytest.raises(GraphcError, match="cannot be fused"):
        ir.registry.infer_types(opdef, [v.type for v in body.inputs], {"body": body})
