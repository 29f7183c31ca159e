"""Op tests generated from tests/op_table.py (DESIGN.md section 7).

For every sample of every ``OpInfo`` entry: eager (``graphc.core.dispatch.apply``) against the numpy
reference, compiled against eager, and against the entry's PyTorch counterpart (live where torch
is installed, else PyTorch's recorded outputs: tests/torch_refs.py). Plus: the table, the
registry and the numpy kernel table cover the same ops, and bad inputs raise ``gc.ShapeError``.
"""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc.tracing import trace_model
from graphc.core.dispatch import apply
from graphc.executor import Plan, get_backend
from graphc.ir import REGISTRY, Builder, DType, Graph, TensorType, verify
from graphc.ir.registry import infer_types

from op_table import OP_INFO

# Forward tolerances against the float64 references (rtol and atol alike).
FLOAT32_TOL = 1e-5
FLOAT64_TOL = 1e-10
# Compiled plans run the same kernels as eager mode.
COMPILED_TOL = 1e-6

CASES = [pytest.param(op, sample, id=f"{op}-{sample.desc}") for op, info in sorted(OP_INFO.items())
         for sample in info.samples]


def tolerance(dtype) -> float | None:
    """rtol = atol for a float dtype; None means exact (ints, bools)."""
    return {np.dtype(np.float32): FLOAT32_TOL, np.dtype(np.float64): FLOAT64_TOL,
            np.dtype(np.complex64): FLOAT32_TOL, np.dtype(np.complex128): FLOAT64_TOL}.get(np.dtype(dtype))


def assert_close(actual, expected, tol=None, what="output"):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    tol = tolerance(actual.dtype) if tol is None else tol
    if actual.dtype.kind in "biu" or tol is None:
        np.testing.assert_array_equal(actual, expected, err_msg=what)
    else:
        np.testing.assert_allclose(actual, expected, rtol=tol, atol=tol, err_msg=what)


def expected_types(op, sample) -> list:
    opdef = REGISTRY[op]
    in_types = [TensorType(a.shape, DType.from_any(a.dtype)) for a in sample.inputs]
    return infer_types(opdef, in_types, opdef.normalize_attrs(sample.attrs))


def run_eager(op, sample) -> list:
    out = apply(op, [gc.Tensor(a) for a in sample.inputs], dict(sample.attrs))
    return [t.numpy() for t in (out if isinstance(out, tuple) else (out,))]


def compile_sample(op, sample):
    """Trace ``fn(*inputs) = op(*inputs)`` and build a plan; return (plan, outputs)."""
    attrs = dict(sample.traced_attrs if sample.dynamic and sample.traced_attrs else sample.attrs)
    if not sample.inputs:  # nothing to trace (full): build the one-node graph by hand
        graph = Graph(op)
        graph.outputs = Builder(graph).emit(op, [], attrs)
        plan = Plan(graph, {})
    else:
        def fn(*xs):
            return apply(op, list(xs), attrs)

        if sample.dynamic:
            plan = gc.compile(fn, example_inputs=tuple(sample.inputs))
        else:
            graph, tracer = trace_model(fn, sample.inputs, dynamic_batch=False)
            plan = Plan(graph, tracer.state_arrays)
    return plan, [np.asarray(o) for o in plan.run(list(sample.inputs))]


# ---- coverage ------------------------------------------------------------------------------

def test_table_covers_registry():
    missing, extra = set(REGISTRY) - set(OP_INFO), set(OP_INFO) - set(REGISTRY)
    assert not missing, f"ops without op_table entries: {sorted(missing)}"
    assert not extra, f"op_table entries for unregistered ops: {sorted(extra)}"


def test_numpy_kernel_table_matches_registry():
    kernels = set(get_backend("cpu").kernels)
    assert kernels == set(REGISTRY), (sorted(set(REGISTRY) - kernels), sorted(kernels - set(REGISTRY)))


@pytest.mark.parametrize("op", sorted(OP_INFO))
def test_table_entries_are_varied(op):
    """Several samples per op, float64 where the op takes floats, and a non-contiguous input."""
    samples = OP_INFO[op].samples
    assert len(samples) >= 4, f"{op}: only {len(samples)} samples"
    descs = [s.desc for s in samples]
    assert len(set(descs)) == len(descs), f"{op}: duplicate sample descriptions"
    if samples[0].inputs:
        assert any(not a.flags.c_contiguous for s in samples for a in s.inputs), f"{op}: no non-contiguous input"
        if any(a.dtype.kind == "f" for s in samples for a in s.inputs):
            assert any(a.dtype == np.float64 for s in samples for a in s.inputs), f"{op}: no float64 sample"


@pytest.mark.parametrize("op, sample", CASES)
def test_grad_flag_is_consistent(op, sample):
    """``grad=True`` needs a floating-point input to perturb and floating-point outputs
    (random ops qualify: gradient checks replay the plan's RNG state for every evaluation)."""
    if sample.grad:
        assert any(a.dtype.kind in "fc" for a in sample.inputs)
        assert all(t.dtype.is_float or t.dtype.is_complex for t in expected_types(op, sample))


# ---- forward against the numpy reference ---------------------------------------------------

@pytest.mark.parametrize("op, sample", CASES)
def test_forward_matches_reference(op, sample):
    before = [a.copy() for a in sample.inputs]
    outs = run_eager(op, sample)
    types = expected_types(op, sample)
    assert len(outs) == len(types)
    for i, (out, t) in enumerate(zip(outs, types)):
        assert out.dtype == t.dtype.numpy and out.shape == t.shape, f"output {i}: {out.dtype}{out.shape} vs {t}"
    for a, b in zip(sample.inputs, before):
        np.testing.assert_array_equal(a, b, err_msg="the kernel modified its input")
    if sample.check is not None:
        sample.check(sample.inputs, sample.attrs, outs)
        return
    refs = sample.ref(sample.inputs, sample.attrs)
    assert len(refs) == len(outs)
    for i, (out, ref) in enumerate(zip(outs, refs)):
        assert_close(out, ref, what=f"{op} output {i}")


# ---- compiled against eager ------------------------------------------------------------------

@pytest.mark.parametrize("op, sample", CASES)
def test_compiled_matches_eager(op, sample):
    plan, outs = compile_sample(op, sample)
    verify(plan.graph)
    assert [n.op for n in plan.graph.nodes] == [op], "expected exactly one node for the op"
    if sample.dynamic and sample.inputs and sample.inputs[0].ndim:
        assert plan.graph.inputs[0].type.shape[0] == "N", "the batch dim should be symbolic"
    if sample.check is not None:
        sample.check(sample.inputs, sample.attrs, outs)
        return
    eager = run_eager(op, sample)
    assert len(outs) == len(eager)
    for i, (out, ref) in enumerate(zip(outs, eager)):
        assert_close(out, ref, tol=COMPILED_TOL, what=f"compiled {op} output {i}")


# ---- PyTorch parity --------------------------------------------------------------------------

def test_every_op_is_torch_mapped_or_excused():
    """Every registered op's entry names PyTorch's counterpart or says why there is none (never
    both), and an op with a counterpart is compared with it on at least one sample."""
    unaccounted = sorted(op for op in REGISTRY if op not in OP_INFO or not (OP_INFO[op].torch or OP_INFO[op].no_torch))
    assert not unaccounted, f"ops with neither a PyTorch counterpart nor a no_torch reason: {unaccounted}"
    for op, info in OP_INFO.items():
        assert (info.torch is None) == bool(info.no_torch), f"{op}: needs exactly one of torch / no_torch"
        if info.torch is not None:
            assert any(not s.no_torch for s in info.samples), f"{op}: every sample is excused from the torch check"


# Parity cases: everything except the excused ops and samples (their checks live elsewhere).
TORCH_CASES = [pytest.param(op, sample, id=f"{op}-{sample.desc}") for op, info in sorted(OP_INFO.items())
               if info.torch is not None for sample in info.samples if not sample.no_torch]


def torch_outputs(op, sample) -> dict:
    import torch

    attrs = REGISTRY[op].normalize_attrs(sample.attrs)
    out = OP_INFO[op].torch([torch.from_numpy(np.array(a, order="C")) for a in sample.inputs], attrs)
    return {f"out{i}": t for i, t in enumerate([out] if isinstance(out, torch.Tensor) else out)}


@pytest.mark.parametrize("op, sample", TORCH_CASES)
def test_matches_torch(op, sample, torch_ref):
    expected = list(torch_ref([op, sample.attrs, sample.inputs], lambda: torch_outputs(op, sample)).values())
    outs = run_eager(op, sample)
    assert len(outs) == len(expected)
    for i, (out, ref) in enumerate(zip(outs, expected)):
        assert_close(out, ref, what=f"{op} output {i} vs torch")


# ---- shape-rule errors -----------------------------------------------------------------------

def _z(*shape, dtype=np.float32):
    return np.zeros(shape, dtype)


BAD = [  # (op, inputs, attrs, why)
    ("add", [_z(2, 3), _z(4)], {}, "non-broadcastable"),
    ("mul", [_z(2, 3), _z(3, 2)], {}, "non-broadcastable-2d"),
    ("add", [_z(2), _z(2), _z(2)], {}, "too-many-inputs"),
    ("sub", [_z(2, dtype=bool), _z(2)], {}, "sub-bool"),
    ("argmax", [_z(2, dtype=bool)], {}, "argmax-bool"),
    ("matmul", [_z(2, 3, dtype=np.int64), _z(3, 2)], {}, "matmul-int64-f32"),
    ("matmul", [_z(2, 3, dtype=bool), _z(3, 2, dtype=bool)], {}, "matmul-bool"),
    ("linear", [_z(2, 3, dtype=np.int64), _z(4, 3)], {}, "linear-int64-input-f32-weight"),
    ("batch_norm", [_z(2, 3)] + [np.ones(3)] * 4, {}, "batch-norm-f32-input-f64-params"),
    ("where", [_z(2), _z(2), _z(2)], {}, "non-bool-condition"),
    ("where", [_z(3, dtype=bool), _z(2), _z(2)], {}, "where-non-broadcastable"),
    ("pow", [_z(2, dtype=bool), _z(2, dtype=bool)], {}, "pow-two-bools"),
    ("div", [_z(2, dtype=bool), _z(2, dtype=bool)], {"rounding_mode": "floor"}, "floor-div-two-bools"),
    ("div", [_z(2, dtype=bool), _z(2, dtype=bool)], {"rounding_mode": "trunc"}, "trunc-div-two-bools"),
    ("div", [_z(2), _z(2)], {"rounding_mode": "round"}, "unknown-rounding-mode"),
    ("matmul", [_z(2, 3), _z(4, 5)], {}, "inner-dim-mismatch"),
    ("matmul", [_z(3), _z(2)], {}, "1d-mismatch"),
    ("matmul", [_z(), _z(3)], {}, "0d-operand"),
    ("matmul", [_z(2, 2, 3), _z(3, 3, 4)], {}, "batch-dims-mismatch"),
    ("linear", [_z(2, 3), _z(4, 5)], {}, "mismatched-features"),
    ("linear", [_z(2, 3), _z(4, 3), _z(5)], {}, "bad-bias"),
    ("linear", [_z(2, 3), _z(3)], {}, "1d-weight"),
    ("conv2d", [_z(1, 3, 5, 5), _z(4, 2, 3, 3)], {}, "channel-mismatch"),
    ("conv2d", [_z(1, 4, 5, 5), _z(3, 2, 3, 3)], {"groups": 2}, "out-channels-not-divisible-by-groups"),
    ("conv2d", [_z(3, 5, 5), _z(4, 3, 3, 3)], {}, "rank3-input"),
    ("conv2d", [_z(1, 3, 2, 2), _z(4, 3, 3, 3)], {}, "input-smaller-than-kernel"),
    ("conv2d", [_z(1, 3, 5, 5), _z(4, 3, 3, 3), _z(3)], {}, "bad-bias"),
    ("conv2d", [_z(1, 3, 5, 5, dtype=np.int64), _z(4, 3, 3, 3)], {}, "int-input"),
    ("max_pool2d", [_z(1, 1, 4, 4)], {"kernel_size": (2, 2), "stride": (2, 2), "padding": (2, 2)}, "padding-over-half"),
    ("max_pool2d", [_z(1, 4, 4)], {"kernel_size": (2, 2), "stride": (2, 2)}, "rank3"),
    ("avg_pool2d", [_z(1, 1, 2, 2)], {"kernel_size": (3, 3), "stride": (1, 1)}, "kernel-too-big"),
    ("batch_norm", [_z(2, 3, 4, 4), _z(3), _z(3), _z(4), _z(3)], {}, "param-shape"),
    ("batch_norm", [_z(2, 3, 4, 4, 4)] + [_z(3)] * 4, {}, "rank5"),
    ("batch_norm_train", [_z(2, 3), _z(2), _z(3), _z(3), _z(3)], {}, "param-shape"),
    ("dropout", [_z(2, 2)], {"p": 1.0}, "p-is-one"),
    ("dropout", [_z(2, dtype=np.int64)], {}, "int-input"),
    ("softmax", [_z(2, 3)], {"dim": 2}, "dim-out-of-range"),
    ("log_softmax", [_z(2, dtype=np.int64)], {"dim": 0}, "int-input"),
    ("one_hot", [_z(3)], {"num_classes": 4}, "float-indices"),
    ("mean", [_z(2, 3, dtype=np.int64)], {}, "mean-of-int"),
    ("sum", [_z(2, 3)], {"dims": (2,)}, "dim-out-of-range"),
    ("max", [_z(2, 3)], {"dims": (1, -1)}, "repeated-dims"),
    ("argmax", [_z(2, 3)], {"dim": -3}, "dim-out-of-range"),
    ("embedding", [_z(2, 3), _z(5, 4)], {}, "float-indices"),
    ("embedding", [_z(2, dtype=np.int64), _z(5)], {}, "1d-weight"),
    ("embedding", [_z(2, dtype=np.int64), _z(5, 4)], {"padding_idx": 5}, "padding-idx-out-of-range"),
    ("embedding_grad", [_z(2, 4), _z(3, dtype=np.int64)], {"num_embeddings": 5}, "cotangent-mismatch"),
    ("reshape", [_z(2, 3)], {"shape": (4, 2)}, "wrong-size"),
    ("reshape", [_z(2, 3)], {"shape": (-1, -1)}, "two-inferred"),
    ("reshape", [_z(2, 3)], {"shape": (-1, 4)}, "not-divisible"),
    ("flatten", [_z(2, 3, 4)], {"start_dim": 2, "end_dim": 1}, "start-after-end"),
    ("permute", [_z(2, 3)], {"perm": (0, 0)}, "not-a-permutation"),
    ("permute", [_z(2, 3)], {"perm": (0, 1, 2)}, "too-many-axes"),
    ("concat", [_z(2, 3), _z(2, 4)], {"dim": 0}, "mismatch-outside-dim"),
    ("concat", [_z(2, 3), _z(2, 3, 1)], {"dim": 1}, "rank-mismatch"),
    ("slice", [_z(2, 3)], {"slices": [(None, None, 1), (None, None, 0)]}, "zero-step"),
    ("slice", [_z(2, 3)], {"slices": [(None, None, 1)]}, "too-few-entries"),
    ("slice", [_z(2, 3)], {"slices": [(None, None, 1), (3, None, 1)], "drop": (1,)}, "index-out-of-range"),
    ("full", [], {"shape": (2, -1), "value": 0.0}, "negative-dim"),
    ("broadcast_to", [_z(2, 3)], {"shape": (3, 3)}, "incompatible"),
    ("broadcast_to", [_z(2, 3)], {"shape": (3,)}, "lower-rank-target"),
]


def test_shape_error_is_a_graphc_error():
    assert issubclass(gc.ShapeError, gc.GraphcError)


@pytest.mark.parametrize("op, inputs, attrs", [pytest.param(*b[:3], id=f"{b[0]}-{b[3]}") for b in BAD])
def test_bad_inputs_raise_shape_error(op, inputs, attrs):
    with pytest.raises(gc.ShapeError):
        apply(op, [gc.Tensor(a) for a in inputs], attrs)


@pytest.mark.parametrize("op, inputs, attrs", [
    pytest.param("concat", [_z(2, 3), _z(2, 3)], {"dim": 0}, id="concat-along-batch"),
    pytest.param("slice", [_z(4, 3)], {"slices": [(1, 3, 1), (None, None, 1)]}, id="slice-batch-with-bounds"),
    pytest.param("reshape", [_z(4, 3)], {"shape": (6, 2)}, id="reshape-batch-to-static"),
])
def test_symbolic_batch_refusals_specialize_the_batch(op, inputs, attrs):
    """Shape rules refuse results whose size would depend on the batch size; the trace then
    specializes the batch at the example's size (graphc/tracing.py), and says why."""
    graph, _ = trace_model(lambda *xs: apply(op, list(xs), attrs), inputs)
    assert graph.meta["fixed_batch"]["size"] == inputs[0].shape[0]
    with pytest.raises(gc.ShapeError):
        trace_model(lambda *xs: apply(op, list(xs), attrs), inputs, dynamic_dims={0: {0: "N"}})


# ---- inputs outside the table: the shape rule refuses them or the kernel honours it -------------

@pytest.mark.parametrize("op, inputs, attrs", [
    pytest.param("linear", [_z(2, 3, dtype=np.int64), _z(4, 3)], {}, id="linear-int64-input-f32-weight"),
    pytest.param("conv2d", [_z(1, 1, 3, 3), _z(1, 1, 2, 2, dtype=np.int64)], {}, id="conv2d-int64-weight"),
    pytest.param("batch_norm", [_z(2, 3)] + [np.ones(3)] * 4, {}, id="batch_norm-f32-input-f64-params"),
    pytest.param("batch_norm_train", [np.arange(6, dtype=np.float32).reshape(2, 3)] + [np.ones(3)] * 4, {},
                 id="batch_norm_train-f32-input-f64-params"),
    pytest.param("relu", [np.array([True, False])], {}, id="relu-bool"),
    pytest.param("neg", [np.array([True, False])], {}, id="neg-bool"),
    pytest.param("sign", [np.array([True, False])], {}, id="sign-bool"),
    pytest.param("abs", [np.array([True, False])], {}, id="abs-bool"),
    pytest.param("div", [np.array([True]), np.array([True])], {}, id="div-bool"),
    pytest.param("sum", [np.array(2.0, np.float32)], {"dims": (0,)}, id="sum-0d-dim0"),
    pytest.param("softmax", [np.array(2.0, np.float32)], {"dim": 0}, id="softmax-0d"),
])
def test_shape_rule_and_kernel_agree(op, inputs, attrs):
    """Either the shape rule raises ShapeError, or the kernel returns exactly the types it promised
    (dispatch raises GraphcError on a mismatch; numpy errors must not leak out)."""
    sample = type("Call", (), {"inputs": inputs, "attrs": attrs})
    try:
        types = expected_types(op, sample)
    except gc.ShapeError:
        return
    outs = run_eager(op, sample)
    assert [(o.dtype, o.shape) for o in outs] == [(t.dtype.numpy, t.shape) for t in types]


@pytest.mark.parametrize("op, inputs, attrs", [
    pytest.param("conv2d", [_z(1, 2, 5, 5), _z(2, 2, 3, 3)], {"stride": (0, 1)}, id="conv2d-zero-stride"),
    pytest.param("conv2d", [_z(1, 2, 5, 5), _z(2, 2, 1, 1)], {"padding": (-1, -1)}, id="conv2d-negative-padding"),
    pytest.param("conv2d", [_z(1, 2, 5, 5), _z(2, 2, 3, 3)], {"dilation": (0, 0)}, id="conv2d-zero-dilation"),
    pytest.param("conv2d", [_z(1, 2, 5, 5), _z(2, 2, 3, 3)], {"stride": (1, 1, 1)}, id="conv2d-three-strides"),
    pytest.param("max_pool2d", [_z(1, 2, 4, 4)], {"kernel_size": (2, 2), "stride": (0, 1)},
                 id="max_pool2d-zero-stride"),
    pytest.param("avg_pool2d", [_z(1, 2, 4, 4)], {"kernel_size": (0, 0), "stride": (1, 1)},
                 id="avg_pool2d-zero-kernel"),
    pytest.param("adaptive_avg_pool2d", [_z(1, 2, 4, 4)], {"output_size": (2,)}, id="adaptive-one-size"),
    pytest.param("adaptive_avg_pool2d", [_z(1, 1, 4, 4)], {"output_size": (0, 2)}, id="adaptive-zero-output-size"),
    pytest.param("one_hot", [_z(3, dtype=np.int64)], {"num_classes": 0}, id="one_hot-no-classes"),
    pytest.param("slice", [_z(2, 3)], {"slices": [(None, None, 1), (None, None, 1)], "drop": (1,)},
                 id="slice-drop-without-index"),
    pytest.param("concat", [_z()], {"dim": 0}, id="concat-0d"),
    pytest.param("div", [np.array([7, 1]), np.array([2, 0])], {"rounding_mode": "floor"}, id="div-floor-int-by-zero"),
    pytest.param("div", [np.array([7]), np.array(0)], {"rounding_mode": "trunc"}, id="div-trunc-int-by-0d-zero"),
    pytest.param("div", [np.array([True]), np.array([0])], {"rounding_mode": "floor"}, id="div-floor-bool-by-int-zero"),
    pytest.param("one_hot", [np.array([5])], {"num_classes": 3}, id="one_hot-index-out-of-range"),
    pytest.param("embedding", [np.array([0, 5]), _z(5, 2)], {}, id="embedding-index-out-of-range"),
    pytest.param("embedding", [np.array([-1]), _z(5, 2)], {}, id="embedding-negative-index"),
    pytest.param("embedding", [np.array([0]), _z(5, 2)], {"padding_idx": -1}, id="embedding-negative-padding-attr"),
    pytest.param("embedding_grad", [_z(1, 2), np.array([7])], {"num_embeddings": 5},
                 id="embedding_grad-index-out-of-range"),
])
def test_bad_calls_raise_graphc_errors(op, inputs, attrs):
    """Every error graphc raises is a GraphcError (DESIGN.md section 2), in eager mode too:
    bad attr values are refused up front, not by a ZeroDivisionError or numpy ValueError."""
    with pytest.raises(gc.GraphcError):
        apply(op, [gc.Tensor(a) for a in inputs], attrs)
