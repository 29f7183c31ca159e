"""Op tests generated from tests/op_table.py (DESIGN.md section 7).

For every sample: eager (``graphc.dispatch.apply``) against the numpy reference, compiled
against eager, and against PyTorch (live where torch is installed, else PyTorch's recorded
outputs: tests/torch_refs.py). Plus: the table, the registry and the numpy kernel table
cover the same ops, and bad inputs raise ``gc.ShapeError``.
"""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc.compile import trace_model
from graphc.dispatch import apply
from graphc.executor import Plan, get_backend
from graphc.ir import REGISTRY, Builder, DType, Graph, TensorType, verify
from graphc.ir.registry import infer_types

from conftest import HAVE_TORCH
from op_table import OP_TABLE

# Forward tolerances against the float64 references (rtol and atol alike).
FLOAT32_TOL = 1e-5
FLOAT64_TOL = 1e-10
# Compiled plans run the same kernels as eager mode.
COMPILED_TOL = 1e-6

CASES = [pytest.param(op, sample, id=f"{op}-{sample.desc}") for op, samples in sorted(OP_TABLE.items())
         for sample in samples]


def tolerance(dtype) -> float | None:
    """rtol = atol for a float dtype; None means exact (ints, bools)."""
    return {np.dtype(np.float32): FLOAT32_TOL, np.dtype(np.float64): FLOAT64_TOL}.get(np.dtype(dtype))


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
    missing, extra = set(REGISTRY) - set(OP_TABLE), set(OP_TABLE) - set(REGISTRY)
    assert not missing, f"ops without op_table entries: {sorted(missing)}"
    assert not extra, f"op_table entries for unregistered ops: {sorted(extra)}"


def test_numpy_kernel_table_matches_registry():
    kernels = set(get_backend("cpu").kernels)
    assert kernels == set(REGISTRY), (sorted(set(REGISTRY) - kernels), sorted(kernels - set(REGISTRY)))


@pytest.mark.parametrize("op", sorted(OP_TABLE))
def test_table_entries_are_varied(op):
    """Several samples per op, float64 where the op takes floats, and a non-contiguous input."""
    samples = OP_TABLE[op]
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
        assert any(a.dtype.kind == "f" for a in sample.inputs)
        assert all(t.dtype.is_float for t in expected_types(op, sample))


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

def _torch_ops() -> dict:
    """op -> fn(list of torch tensors, normalized attrs) -> tensor or list of tensors."""
    import torch
    import torch.nn.functional as F

    def same_dtype(ts):  # torch's matmul/linear/conv want one dtype; graphc promotes
        dt = ts[0].dtype
        for t in ts[1:]:
            dt = torch.promote_types(dt, t.dtype)
        return [t.to(dt) for t in ts]

    def unary(fn):
        return lambda ts, a: fn(ts[0])

    def binary(fn):
        return lambda ts, a: fn(ts[0], ts[1])

    def reduce(fn):
        def run(ts, a):
            x, dims = ts[0], a["dims"]
            return fn(x, dim=tuple(range(x.ndim)) if dims is None else tuple(dims), keepdim=a["keepdim"])
        return run

    def slice_(ts, a):
        x = ts[0]
        for axis in reversed(range(x.ndim)):
            start, stop, step = a["slices"][axis]
            if axis in a["drop"]:
                x = x.select(axis, start)
            else:
                idx = list(range(x.shape[axis]))[start:stop:step]  # torch slicing has no negative steps
                x = x.index_select(axis, torch.tensor(idx, dtype=torch.int64))
        return x

    def batch_norm_train(ts, a):
        x, w, b, rm, rv = ts
        rm, rv = rm.clone(), rv.clone()  # updated in place by torch
        y, mean, invstd = torch.native_batch_norm(x, w, b, rm, rv, True, a["momentum"], a["eps"])
        return [y, mean, invstd, rm, rv]

    def vjp(forward, x_shape):
        """Backward ops: PyTorch autograd's vector-Jacobian product of the forward op."""
        def run(ts, a):
            x = torch.zeros(tuple(x_shape(ts, a)), dtype=ts[0].dtype, requires_grad=True)
            return torch.autograd.grad(forward(x, ts, a), x, ts[0])[0]
        return run

    def window(a):
        return {k: a[k] for k in ("stride", "padding", "dilation", "groups")}

    def max_pool2d_grad(ts, a):
        x = ts[1].clone().requires_grad_(True)
        y = F.max_pool2d(x, a["kernel_size"], a["stride"], a["padding"], a["dilation"])
        return torch.autograd.grad(y, x, ts[0])[0]

    def batch_norm_train_grad(ts, a):
        g, x, w, mean, invstd = ts
        return torch.ops.aten.native_batch_norm_backward(g, x, w, None, None, mean, invstd, True, 1e-5,
                                                          [True, True, True])

    def conv_bn(ts, a):
        y = F.batch_norm(ops["conv2d"](ts[:-4], a), ts[-2], ts[-1], ts[-4], ts[-3], training=False, eps=a["eps"])
        return torch.relu(y) if a["relu"] else y

    def conv_bn_train(ts, a):
        conv_out = ops["conv2d"](ts[:-4], a)
        y, *stats = batch_norm_train([conv_out] + list(ts[-4:]), a)
        return [torch.relu(y) if a["relu"] else y, conv_out] + stats

    def conv_bn_train_grad(ts, a):
        g, x, w, conv_out, y, gamma, mean, invstd = ts
        if a["relu"]:
            g = aten.threshold_backward(g, y, 0)
        g_conv, g_gamma, g_beta = batch_norm_train_grad([g, conv_out, gamma, mean, invstd], a)
        outs = [torch.nn.grad.conv2d_input(x.shape, w, g_conv, **window(a))] if a["input_grad"] else []
        outs.append(torch.nn.grad.conv2d_weight(x, w.shape, g_conv, **window(a)))
        if a["has_bias"]:
            outs.append(g_conv.sum(dim=(0, 2, 3)))
        return outs + [g_gamma, g_beta]

    aten = torch.ops.aten
    dt = lambda name: getattr(torch, name)  # noqa: E731
    ops = {
        "exp": unary(torch.exp), "log": unary(torch.log), "log1p": unary(torch.log1p), "sqrt": unary(torch.sqrt),
        "rsqrt": unary(torch.rsqrt), "tanh": unary(torch.tanh), "sigmoid": unary(torch.sigmoid),
        "erf": unary(torch.erf),
        "neg": unary(torch.neg), "abs": unary(torch.abs), "relu": unary(torch.relu), "sign": unary(torch.sign),
        "add": binary(torch.add), "sub": binary(torch.sub), "mul": binary(torch.mul), "div": binary(torch.div),
        "pow": binary(torch.pow), "maximum": binary(torch.maximum), "minimum": binary(torch.minimum),
        "eq": binary(torch.eq), "ne": binary(torch.ne), "lt": binary(torch.lt), "le": binary(torch.le),
        "gt": binary(torch.gt), "ge": binary(torch.ge),
        "leaky_relu": lambda ts, a: F.leaky_relu(ts[0], a["negative_slope"]),
        "where": lambda ts, a: torch.where(*ts),
        "cast": lambda ts, a: ts[0].to(dt(a["dtype"])),
        "logical_not": unary(torch.logical_not),
        "matmul": lambda ts, a: torch.matmul(*same_dtype(ts)),
        "linear": lambda ts, a: F.linear(*same_dtype(ts)),
        "conv2d": lambda ts, a: F.conv2d(*same_dtype(ts), stride=a["stride"], padding=a["padding"],
                                         dilation=a["dilation"], groups=a["groups"]),
        "max_pool2d": lambda ts, a: F.max_pool2d(ts[0], a["kernel_size"], a["stride"], a["padding"], a["dilation"]),
        "avg_pool2d": lambda ts, a: F.avg_pool2d(ts[0], a["kernel_size"], a["stride"], a["padding"],
                                                 count_include_pad=a["count_include_pad"]),
        "adaptive_avg_pool2d": lambda ts, a: F.adaptive_avg_pool2d(ts[0], a["output_size"]),
        "batch_norm": lambda ts, a: F.batch_norm(ts[0], ts[3], ts[4], ts[1], ts[2], training=False, eps=a["eps"]),
        "batch_norm_train": batch_norm_train,
        "softmax": lambda ts, a: torch.softmax(ts[0], a["dim"]),
        "log_softmax": lambda ts, a: torch.log_softmax(ts[0], a["dim"]),
        "one_hot": lambda ts, a: F.one_hot(ts[0], a["num_classes"]).to(dt(a["dtype"])),
        "binary_cross_entropy": lambda ts, a: F.binary_cross_entropy(ts[0], ts[1], reduction="none"),
        "sum": reduce(torch.sum), "mean": reduce(torch.mean), "max": reduce(torch.amax),
        "argmax": lambda ts, a: torch.argmax(ts[0], dim=a["dim"], keepdim=a["keepdim"]),
        "embedding": lambda ts, a: F.embedding(ts[0], ts[1], padding_idx=a["padding_idx"]),
        "reshape": lambda ts, a: torch.reshape(ts[0], a["shape"]),
        "flatten": lambda ts, a: torch.flatten(ts[0], a["start_dim"], a["end_dim"]),
        "permute": lambda ts, a: torch.permute(ts[0], a["perm"]),
        "concat": lambda ts, a: torch.cat(ts, a["dim"]),
        "slice": slice_,
        "full": lambda ts, a: torch.full(a["shape"], a["value"], dtype=dt(a["dtype"])),
        "broadcast_to": lambda ts, a: torch.broadcast_to(ts[0], a["shape"]),
        # backward ops
        "relu_grad": lambda ts, a: aten.threshold_backward(ts[0], ts[1], 0),
        "sigmoid_grad": lambda ts, a: aten.sigmoid_backward(ts[0], ts[1]),
        "tanh_grad": lambda ts, a: aten.tanh_backward(ts[0], ts[1]),
        "reduce_grad": vjp(lambda x, ts, a: (torch.mean if a["mean"] else torch.sum)(
            x, dim=tuple(a["dims"]), keepdim=a["keepdim"]), lambda ts, a: a["shape"]),
        "slice_grad": vjp(lambda x, ts, a: slice_([x], a), lambda ts, a: a["shape"]),
        "conv2d_grad_input": lambda ts, a: torch.nn.grad.conv2d_input(a["input_shape"], ts[1], ts[0], **window(a)),
        "conv2d_grad_weight": lambda ts, a: torch.nn.grad.conv2d_weight(ts[1], a["weight_shape"], ts[0], **window(a)),
        "max_pool2d_grad": max_pool2d_grad,
        "avg_pool2d_grad": vjp(lambda x, ts, a: F.avg_pool2d(x, a["kernel_size"], a["stride"], a["padding"],
                                                             count_include_pad=a["count_include_pad"]),
                               lambda ts, a: a["input_shape"]),
        "adaptive_avg_pool2d_grad": vjp(lambda x, ts, a: F.adaptive_avg_pool2d(x, ts[0].shape[2:]),
                                        lambda ts, a: ts[0].shape[:2] + tuple(a["input_size"])),
        "batch_norm_train_grad": batch_norm_train_grad,
        "embedding_grad": lambda ts, a: aten.embedding_dense_backward(
            ts[0], ts[1], a["num_embeddings"], -1 if a["padding_idx"] is None else a["padding_idx"], False),
        # fused ops: the unfused PyTorch functions (and their backward kernels) in sequence
        "linear_relu": lambda ts, a: torch.relu(F.linear(*ts)),
        "conv2d_relu": lambda ts, a: torch.relu(F.conv2d(*same_dtype(ts), stride=a["stride"], padding=a["padding"],
                                                         dilation=a["dilation"], groups=a["groups"])),
        "conv_bn": conv_bn,
        "conv_bn_train": conv_bn_train,
        "conv_bn_train_grad": conv_bn_train_grad,
    }
    return ops


# Ops with no PyTorch counterpart to compare against, each with the reason.
NO_TORCH = {
    "dropout": "random mask: PyTorch's RNG differs; op_table checks the mask's properties instead",
    "assert_finite": "a training step's NaN/inf guard, no PyTorch op; tests/test_nonfinite.py checks it raising",
}
TORCH_OPS = _torch_ops() if HAVE_TORCH else {}


def test_every_op_is_torch_mapped_or_excused(torch_ref):
    # building TORCH_OPS needs torch, so which ops it maps is a recorded fact like any output
    ref = torch_ref([sorted(REGISTRY), sorted(NO_TORCH)], lambda: {"ops": np.array(sorted(TORCH_OPS))})
    mapped = ref["ops"].tolist()
    assert not set(mapped) & set(NO_TORCH)
    assert set(mapped) | set(NO_TORCH) == set(REGISTRY), sorted(set(REGISTRY) - set(mapped) - set(NO_TORCH))


# Parity cases: everything except the excused ops and samples (their checks live elsewhere).
TORCH_CASES = [pytest.param(op, sample, id=f"{op}-{sample.desc}") for op, samples in sorted(OP_TABLE.items())
               if op not in NO_TORCH for sample in samples if not sample.no_torch]


def torch_outputs(op, sample) -> dict:
    import torch

    attrs = REGISTRY[op].normalize_attrs(sample.attrs)
    out = TORCH_OPS[op]([torch.from_numpy(np.array(a, order="C")) for a in sample.inputs], attrs)
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
    ("exp", [_z(2, dtype=np.int64)], {}, "float-op-on-int"),
    ("where", [_z(2), _z(2), _z(2)], {}, "non-bool-condition"),
    ("where", [_z(3, dtype=bool), _z(2), _z(2)], {}, "where-non-broadcastable"),
    ("logical_not", [_z(2)], {}, "logical-not-on-float"),
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
    ("erf", [_z(2, dtype=np.int64)], {}, "int-input"),
    ("embedding", [_z(2, 3), _z(5, 4)], {}, "float-indices"),
    ("embedding", [_z(2, dtype=np.int64), _z(5)], {}, "1d-weight"),
    ("embedding", [_z(2, dtype=np.int64), _z(5, 4, dtype=np.int64)], {}, "int-weight"),
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
def test_symbolic_batch_refusals_raise_shape_error(op, inputs, attrs):
    """Shape rules refuse results whose size would depend on the batch size, at trace time."""
    with pytest.raises(gc.ShapeError):
        trace_model(lambda *xs: apply(op, list(xs), attrs), inputs)


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
    pytest.param("pow", [np.array([2]), np.array([-1])], {}, id="pow-int-negative-exponent"),
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
