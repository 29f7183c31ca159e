"""Every ONNX op graphc imports, one table: a one-node model per case (input ``x`` with a named
batch dim, the other inputs as initializers), run by ``gc.load`` and by onnx's reference
evaluator (``onnx.reference``, pure numpy, part of the onnx package).

Tolerance: 1e-5 of the output's scale. Both sides compute in float32 numpy, but through
different formulas (the evaluator's own LayerNormalization, Gelu and pooling loops).
"""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc

onnx = pytest.importorskip("onnx", reason="the onnx extra is part of the test extra; pip install 'graphc[onnx]'")
from onnx import helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

RTOL = 1e-5  # module docstring
rng = np.random.default_rng(0)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def i64(*values):
    return np.array(values, np.int64)


# (id, op, x shape, other inputs (arrays become initializers, None an omitted input), attrs, opset)
CASES = [
    ("add", "Add", (2, 3), [f32(3)], {}, 17),
    ("sub", "Sub", (2, 3), [f32(3)], {}, 17),
    ("mul", "Mul", (2, 3), [f32(1, 3)], {}, 17),
    ("div", "Div", (2, 3), [np.full(3, 2.5, np.float32)], {}, 17),
    ("pow", "Pow", (2, 3), [np.array(2.0, np.float32)], {}, 17),
    ("max", "Max", (2, 3), [f32(3)], {}, 17),
    ("min", "Min", (2, 3), [f32(3)], {}, 17),
    ("sum3", "Sum", (2, 3), [f32(3), f32(1, 3)], {}, 17),
    ("relu", "Relu", (2, 5), [], {}, 17),
    ("sigmoid", "Sigmoid", (2, 5), [], {}, 17),
    ("tanh", "Tanh", (2, 5), [], {}, 17),
    ("exp", "Exp", (2, 5), [], {}, 17),
    ("neg", "Neg", (2, 5), [], {}, 17),
    ("abs", "Abs", (2, 5), [], {}, 17),
    ("erf", "Erf", (2, 5), [], {}, 17),
    ("sign", "Sign", (2, 5), [], {}, 17),
    ("reciprocal", "Reciprocal", (2, 5), [], {}, 17),
    ("identity", "Identity", (2, 5), [], {}, 17),
    ("dropout", "Dropout", (2, 5), [], {}, 17),
    ("leaky_relu", "LeakyRelu", (2, 5), [], {"alpha": 0.3}, 17),
    ("hard_sigmoid", "HardSigmoid", (2, 5), [], {"alpha": 0.25, "beta": 0.4}, 17),
    ("hard_swish", "HardSwish", (2, 5), [], {}, 17),
    ("gelu", "Gelu", (2, 5), [], {}, 20),
    ("gelu_tanh", "Gelu", (2, 5), [], {"approximate": "tanh"}, 20),
    ("clip", "Clip", (2, 5), [np.array(-0.5, np.float32), np.array(0.5, np.float32)], {}, 17),
    ("clip_min_only", "Clip", (2, 5), [np.array(0.0, np.float32)], {}, 17),
    ("clip_max_only", "Clip", (2, 5), [None, np.array(0.2, np.float32)], {}, 17),
    ("matmul_weight", "MatMul", (2, 4), [f32(4, 3)], {}, 17),
    ("matmul_batched", "MatMul", (2, 3, 4), [f32(1, 4, 5)], {}, 17),
    ("gemm_linear", "Gemm", (2, 4), [f32(3, 4), f32(3)], {"transB": 1}, 17),
    ("gemm_general", "Gemm", (2, 4), [f32(4, 3), f32(1, 3)], {"alpha": 0.5, "beta": 2.0}, 17),
    ("gemm_no_bias", "Gemm", (2, 4), [f32(4, 3)], {}, 17),
    ("conv", "Conv", (2, 3, 7, 7), [f32(4, 3, 3, 3), f32(4)], {"pads": [1, 1, 1, 1], "strides": [2, 2]}, 17),
    ("conv_depthwise", "Conv", (2, 4, 6, 6), [f32(4, 1, 3, 3)], {"group": 4, "dilations": [2, 2]}, 17),
    ("conv_same_upper", "Conv", (2, 3, 6, 6), [f32(2, 3, 3, 3)], {"auto_pad": "SAME_UPPER"}, 17),
    ("conv1d", "Conv", (2, 3, 9), [f32(4, 3, 3), f32(4)], {"pads": [1, 1], "strides": [2]}, 17),
    ("max_pool", "MaxPool", (2, 3, 8, 8), [], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, 17),
    ("max_pool_ceil_same", "MaxPool", (2, 3, 8, 8), [], {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1},
     17),
    ("avg_pool", "AveragePool", (2, 3, 8, 8), [], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, 17),
    ("avg_pool_include_pad", "AveragePool", (2, 3, 8, 8), [],
     {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1}, 17),
    ("global_avg_pool", "GlobalAveragePool", (2, 3, 5, 5), [], {}, 17),
    ("global_max_pool", "GlobalMaxPool", (2, 3, 5, 5), [], {}, 17),
    ("batch_norm", "BatchNormalization", (2, 3, 4, 4),
     [f32(3), f32(3), f32(3), rng.uniform(0.5, 2, 3).astype(np.float32)], {"epsilon": 1e-3}, 17),
    ("layer_norm", "LayerNormalization", (2, 3, 8), [f32(8), f32(8)], {"epsilon": 1e-5}, 17),
    ("instance_norm", "InstanceNormalization", (2, 3, 4, 4), [f32(3), f32(3)], {}, 17),
    ("softmax", "Softmax", (2, 3, 4), [], {"axis": 1}, 17),
    ("log_softmax", "LogSoftmax", (2, 6), [], {}, 17),
    ("softmax_opset11", "Softmax", (2, 6), [], {}, 11),
    ("reduce_mean_attr", "ReduceMean", (2, 3, 4), [], {"axes": [1]}, 17),
    ("reduce_mean_input", "ReduceMean", (2, 3, 4), [i64(-1)], {"keepdims": 0}, 18),
    ("reduce_sum", "ReduceSum", (2, 3, 4), [i64(1, 2)], {}, 17),
    ("reduce_max", "ReduceMax", (2, 3, 4), [], {"axes": [2], "keepdims": 0}, 17),
    ("reduce_min", "ReduceMin", (2, 3, 4), [i64(1, -1)], {}, 18),
    ("reduce_prod", "ReduceProd", (2, 3, 4), [i64(2)], {"keepdims": 0}, 18),
    ("reduce_l1", "ReduceL1", (2, 3, 4), [], {"axes": [1]}, 17),
    ("reduce_l2", "ReduceL2", (2, 3, 4), [i64(2)], {}, 18),
    ("reduce_sum_square", "ReduceSumSquare", (2, 3, 4), [i64(1)], {"keepdims": 0}, 18),
    ("reduce_log_sum_exp", "ReduceLogSumExp", (2, 3, 4), [i64(-1)], {}, 18),
    ("reduce_log_sum", "ReduceLogSum", (2, 3, 4), [i64(1)], {}, 18),  # NaN where a sum is negative, on both sides
    ("argmin_last", "ArgMin", (2, 5), [], {"axis": -1, "select_last_index": 1}, 17),
    ("cumsum_reverse_exclusive", "CumSum", (2, 5), [np.array(1, np.int64)], {"reverse": 1, "exclusive": 1}, 17),
    ("cumprod", "CumProd", (2, 5), [np.array(-1, np.int64)], {}, 26),
    ("hardmax", "Hardmax", (2, 5), [], {"axis": 1}, 17),
    ("flatten", "Flatten", (2, 3, 4), [], {}, 17),
    ("flatten_axis2", "Flatten", (2, 3, 4), [], {"axis": 2}, 17),
    ("reshape", "Reshape", (2, 3, 4), [i64(0, -1)], {}, 17),
    ("transpose", "Transpose", (2, 3, 4), [], {"perm": [0, 2, 1]}, 17),
    ("concat", "Concat", (2, 3), [f32(2, 2)], {"axis": 1}, 17),
    ("unsqueeze", "Unsqueeze", (2, 3), [i64(1, -1)], {}, 17),
    ("unsqueeze_attr", "Unsqueeze", (2, 3), [], {"axes": [2]}, 11),
    ("squeeze", "Squeeze", (2, 1, 3), [i64(1)], {}, 17),
    ("slice", "Slice", (2, 6, 4), [i64(1, 3), i64(5, -2**63), i64(1, 2), i64(2, -1)], {}, 17),
    ("slice_past_the_end", "Slice", (2, 6, 4), [i64(-2), i64(2**63 - 1), i64(1)], {}, 17),
    ("gather_index", "Gather", (2, 5), [np.array(3, np.int64)], {"axis": 1}, 17),
    ("expand", "Expand", (2, 1, 3), [i64(1, 4, 3)], {}, 17),
    ("where", "Where", (2, 3), [], {}, 17),  # built specially: Where(x > 0, x, 0.5)
    ("split", "Split", (2, 6), [i64(2, 4)], {"axis": 1}, 17),
    ("cast", "Cast", (2, 3), [], {"to": 11}, 17),
    ("log", "Log", (2, 5), [], {}, 17),  # NaN for negative inputs on both sides
    ("sqrt", "Sqrt", (2, 5), [], {}, 17),
    ("argmax", "ArgMax", (2, 5), [], {"axis": 1, "keepdims": 0}, 17),
    ("equal", "Equal", (2, 3), [np.zeros(3, np.float32)], {}, 17),
    ("less", "Less", (2, 3), [f32(3)], {}, 17),
    ("less_equal", "LessOrEqual", (2, 3), [f32(3)], {}, 17),
    ("greater_equal", "GreaterOrEqual", (2, 3), [f32(3)], {}, 17),
    ("not", "Not", (2, 3), [], {}, 17),  # built specially: Not(x > 0)
]


FIXED_BATCH = {"concat"}  # its initializer has the example's batch size: x is declared with that size


def one_node_model(op, x_shape, others, attrs, opset):
    inits, names = [], ["x"]
    for i, value in enumerate(others):
        if value is None:
            names.append("")
            continue
        names.append(f"in{i}")
        inits.append(numpy_helper.from_array(value, f"in{i}"))
    outputs = ["y0", "y1"] if op == "Split" else ["y"]
    nodes = [helper.make_node(op, names, outputs, name=f"the_{op}", **attrs)]
    if op in ("Where", "Not"):  # a condition computed from x (and a constant branch)
        inits.append(numpy_helper.from_array(np.array(0.0, np.float32), "zero"))
        inits.append(numpy_helper.from_array(np.array(0.5, np.float32), "half"))
        nodes = [helper.make_node("Greater", ["x", "zero"], ["cond"]),
                 helper.make_node(op, ["cond", "x", "half"] if op == "Where" else ["cond"], ["y"])]
    batch = x_shape[0] if op == "Concat" else "batch"
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [batch, *x_shape[1:]])
    ys = [helper.make_tensor_value_info(name, onnx.TensorProto.UNDEFINED, None) for name in outputs]
    graph = helper.make_graph(nodes, "case", [x], ys, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # Log/Sqrt of negatives: NaN both sides
def test_each_imported_op_matches_onnx_reference(case, tmp_path):
    _, op, x_shape, others, attrs, opset = case
    model = one_node_model(op, x_shape, others, attrs, opset)
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    plan = gc.load(path)
    batches = (x_shape[0],) if case[0] in FIXED_BATCH else (x_shape[0], 3)
    for batch in batches:  # the named batch dim is graphc's dynamic one
        x = rng.standard_normal((batch, *x_shape[1:])).astype(np.float32)
        want = ReferenceEvaluator(model).run(None, {"x": x})
        got = plan(x)
        got = list(got) if isinstance(got, tuple) else [got]
        assert len(got) == len(want)
        for g, w in zip(got, want):
            g = np.asarray(g)
            assert g.shape == w.shape and g.dtype == w.dtype
            scale = max(1.0, float(np.abs(w).max()))
            np.testing.assert_allclose(g, w, rtol=RTOL, atol=RTOL * scale, err_msg=f"{op} at batch {batch}")


def test_every_reader_has_a_case():
    from graphc.onnx.control_import import CONTROL_READERS
    from graphc.onnx.importer import NODE_READERS

    covered = {c[1] for c in CASES} | {"Greater"}
    shape_chain = {"Constant", "ConstantOfShape", "Shape", "Range"}  # the next test
    # If, Loop and Scan read subgraphs, not single nodes: tests/test_onnx_control.py runs them; the
    # recurrent ops, Attention and the ops around it: tests/test_onnx_recurrent_import.py
    from graphc.onnx.attention_import import ATTENTION_READERS
    from graphc.onnx.logic_readers import LOGIC_READERS
    from graphc.onnx.recurrent_import import RECURRENT_READERS

    control = set(CONTROL_READERS) | set(RECURRENT_READERS) | set(ATTENTION_READERS) | set(LOGIC_READERS)
    from graphc.onnx.conv_transpose_readers import CONV_TRANSPOSE_READERS  # test_onnx_conv_transpose_import.py
    control |= set(CONV_TRANSPOSE_READERS)
    from graphc.onnx.resample_readers import RESAMPLE_READERS  # tests/test_onnx_resample_import.py
    control |= set(RESAMPLE_READERS)
    from graphc.onnx.vision_readers import VISION_READERS  # tests/test_onnx_vision_import.py
    control |= set(VISION_READERS)
    from graphc.onnx.grid_readers import GRID_READERS  # tests/test_onnx_grid_scatter_import.py
    control |= set(GRID_READERS)
    from graphc.onnx.math_readers import MATH_READERS  # tests/test_onnx_math_import.py
    control |= set(MATH_READERS) | {"TopK"}  # TopK's two outputs: onnx's backend cases (test_onnx_backend_suite.py)
    from graphc.onnx.quant_readers import QUANT_READERS  # tests/test_onnx_quant_import.py
    control |= set(QUANT_READERS)
    from graphc.onnx.state_readers import STATE_READERS  # tests/test_onnx_state_import.py
    control |= set(STATE_READERS)
    from graphc.onnx.spectral_readers import SPECTRAL_READERS  # tests/test_onnx_math_import.py
    control |= set(SPECTRAL_READERS)
    from graphc.onnx.sequence_readers import SEQUENCE_READERS  # tests/test_onnx_sequence_import.py
    from graphc.onnx.ml_readers import ML_READERS  # tests/test_onnx_sequence_import.py
    control |= set(SEQUENCE_READERS) | set(ML_READERS) | {"Col2Im"}  # Col2Im: tests/test_onnx_pool_import.py, onnx_edge_cases
    from graphc.onnx.index_readers import INDEX_READERS  # tests/test_onnx_index_import.py
    control |= set(INDEX_READERS)
    from graphc.onnx.loss_readers import LOSS_READERS  # tests/test_onnx_losses_import.py, with these norms
    control |= set(LOSS_READERS) | {"RMSNormalization", "GroupNormalization", "LpNormalization",
                                    "MeanVarianceNormalization", "RotaryEmbedding"}
    assert set(NODE_READERS) - covered - shape_chain - control == set()


def test_shape_arithmetic_is_done_while_importing(tmp_path):
    """``x.view(x.size(0), -1) + pos`` as PyTorch writes it: Shape -> Gather -> Unsqueeze ->
    Concat -> Reshape, plus a Range and a ConstantOfShape; only tensor ops reach the plan."""
    def const(name, value):
        return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value), name))

    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]), const("zero", np.array(0, np.int64)),
        helper.make_node("Gather", ["shape", "zero"], ["n"]), const("axes", i64(0)),
        helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]), const("minus1", i64(-1)),
        helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["flat"]),
        const("start", np.array(0.0, np.float32)), const("limit", np.array(12.0, np.float32)),
        const("step", np.array(1.0, np.float32)), helper.make_node("Range", ["start", "limit", "step"], ["pos"]),
        helper.make_node("Add", ["flat", "pos"], ["shifted"]), const("width", i64(1, 12)),
        helper.make_node("ConstantOfShape", ["width"], ["twos"], value=numpy_helper.from_array(
            np.array([2.0], np.float32))),
        helper.make_node("Mul", ["shifted", "twos"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 3, 4])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", 12])
    model = helper.make_model(helper.make_graph(nodes, "chain", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 17)])
    (tmp_path / "m.onnx").write_bytes(model.SerializeToString())
    plan = gc.load(tmp_path / "m.onnx")
    assert [n.op for n in plan.graph.nodes] == ["reshape", "add", "mul"]
    assert plan.graph.nodes[0].attrs["shape"] == ("N", -1)
    for batch in (1, 5):
        xb = rng.standard_normal((batch, 3, 4)).astype(np.float32)
        np.testing.assert_allclose(plan(xb), (xb.reshape(batch, 12) + np.arange(12)) * 2, rtol=1e-6)
