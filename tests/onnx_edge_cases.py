"""The cases of tests/test_onnx_edge_cases.py: one small model per case, for every ONNX op
graphc imports, on integer, bool, float64, negative-axis, empty and 0-d inputs."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Case:
    id: str
    op: str
    inputs: list  # arrays; None for an omitted optional input
    attrs: dict = field(default_factory=dict)
    opset: int = 17
    static: tuple = ()  # inputs ONNX needs known (shapes, axes): initializers in both runs
    outputs: int = 1


def i64(*values):
    return np.array(values, np.int64)


def f32(*values):
    return np.array(values, np.float32)


def f64(*values):
    return np.array(values, np.float64)


def b(*values):
    return np.array(values, np.bool_)


INTS = np.array([[7, -7, 8], [-8, 0, 5]], np.int64)
DIVISORS = np.array([2, 2, -3], np.int64)  # no zero: integer division by zero is undefined in ONNX
FLOATS = np.array([[1.5, -2.25, 0.0], [3.0, -0.5, 4.0]], np.float32)
EMPTY = np.zeros((2, 0), np.float32)
MATRIX = np.arange(24, dtype=np.int64).reshape(2, 3, 4) - 11
SCALAR = np.array(-2.5, np.float32)
SCALAR64 = np.array(-3, np.int64)
BOOLS = np.array([[True, False, True], [False, False, True]])
X4 = np.linspace(-2, 2, 2 * 3 * 4 * 4).astype(np.float64).reshape(2, 3, 4, 4)

CASES = [
    # ---- arithmetic: integer kinds keep their dtype, integer Div truncates toward zero
    Case("add_int", "Add", [INTS, DIVISORS]),
    Case("sub_int_0d", "Sub", [SCALAR64, INTS]),
    Case("mul_uint8", "Mul", [np.array([3, 250], np.uint8), np.array([2, 1], np.uint8)]),
    Case("add_float64", "Add", [X4, np.float64(0.25)]),
    Case("div_int", "Div", [INTS, DIVISORS]),
    Case("div_int_issue", "Div", [i64(7, -7), np.array(2, np.int64)]),
    Case("div_int_large", "Div", [i64(2**62 + 1, -(2**62) - 3, 2**53 + 1), i64(1, 2, 3)]),  # past float64's 2**53
    Case("div_int_0d", "Div", [np.array(-9, np.int64), np.array(4, np.int64)]),
    Case("div_uint8", "Div", [np.array([7, 200, 3], np.uint8), np.array([2, 3, 5], np.uint8)]),
    Case("div_float_empty", "Div", [EMPTY, f32(2.0)]),
    Case("pow_int", "Pow", [i64(2, -3, 0, 5, 7), i64(3, 3, 2, 0, 1)]),
    Case("pow_int_float_exponent", "Pow", [i64(2, 3, 4, 9), f32(0.5, 2.0, 1.5, 0.5)]),
    Case("pow_float_int_exponent", "Pow", [f32(1.5, -2.0, 4.0), i64(2, 3, -1)]),
    Case("pow_float_float64_exponent", "Pow", [f32(1.5, -2.0, 4.0), f64(2.0, 3.0, 0.5)]),
    Case("pow_0d", "Pow", [SCALAR, np.array(2.0, np.float32)]),
    Case("max_int", "Max", [INTS, DIVISORS, SCALAR64]),
    Case("min_int_one_input", "Min", [INTS]),
    Case("min_float64", "Min", [X4, np.float64(0.0)]),
    Case("sum_0d", "Sum", [SCALAR, f32(1.0, 2.0)]),
    Case("sum_float64", "Sum", [X4, X4]),
    # ---- comparisons and logic
    Case("equal_int", "Equal", [INTS, i64(7, 0, 5)]),
    Case("equal_bool", "Equal", [BOOLS, b(True, False, False)]),
    Case("less_int", "Less", [INTS, DIVISORS]),
    Case("greater_0d", "Greater", [SCALAR64, INTS]),
    Case("less_equal_int", "LessOrEqual", [INTS, DIVISORS]),
    Case("greater_equal_float64", "GreaterOrEqual", [X4, np.float64(0.0)]),
    Case("where_int", "Where", [BOOLS, INTS, SCALAR64]),
    Case("where_bool", "Where", [BOOLS, b(True, True, False), BOOLS]),
    Case("where_empty", "Where", [np.zeros((0, 3), bool), np.zeros((0, 3), np.float32), f32(1.0)]),
    Case("not", "Not", [BOOLS]),
    Case("not_0d", "Not", [np.array(True)]),
    # ---- unary
    Case("relu_int", "Relu", [INTS], opset=14),
    Case("relu_float64", "Relu", [X4]),
    Case("neg_int", "Neg", [INTS]),
    Case("abs_int", "Abs", [INTS]),
    Case("sign_int", "Sign", [INTS]),
    Case("sign_float_0d", "Sign", [SCALAR]),
    Case("sigmoid_float64", "Sigmoid", [X4]),
    Case("tanh_0d", "Tanh", [SCALAR]),
    Case("exp_float64", "Exp", [X4]),
    Case("log_float64", "Log", [np.abs(X4) + 0.5]),
    Case("sqrt_empty", "Sqrt", [EMPTY]),
    Case("erf_float64", "Erf", [X4]),
    Case("reciprocal_float64", "Reciprocal", [X4 + 3]),
    Case("reciprocal_0d", "Reciprocal", [SCALAR]),
    Case("identity_int", "Identity", [INTS]),
    Case("identity_bool", "Identity", [BOOLS]),
    Case("dropout_float64", "Dropout", [X4]),
    Case("leaky_relu_float64", "LeakyRelu", [X4], {"alpha": 0.1}),
    Case("hard_sigmoid_float64", "HardSigmoid", [X4], {"alpha": 0.3, "beta": 0.6}),
    Case("hard_swish_0d", "HardSwish", [SCALAR]),
    Case("gelu_float64", "Gelu", [X4], opset=20),
    Case("gelu_tanh_float64", "Gelu", [X4], {"approximate": "tanh"}, opset=20),
    Case("clip_int", "Clip", [INTS, np.array(-5, np.int64), np.array(6, np.int64)], opset=13),
    Case("clip_int_min_only", "Clip", [INTS, np.array(-1, np.int64)], opset=13),
    Case("clip_float64", "Clip", [X4, np.float64(-0.5), np.float64(0.75)], opset=13),
    Case("clip_0d", "Clip", [SCALAR, None, np.array(-3.0, np.float32)], opset=13),
    # ---- casts
    Case("cast_float_to_int", "Cast", [f32(-1.7, 2.9, -0.5, 3.0)], {"to": 7}),
    Case("cast_int_to_float", "Cast", [INTS], {"to": 1}),
    Case("cast_float_to_bool", "Cast", [f32(0.0, -0.5, 2.0)], {"to": 9}),
    Case("cast_bool_to_float64", "Cast", [BOOLS], {"to": 11}),
    Case("cast_int_to_bool", "Cast", [INTS], {"to": 9}),
    Case("cast_int_to_uint8", "Cast", [i64(0, 7, 255)], {"to": 2}),
    Case("cast_float64_to_float16", "Cast", [f64(0.1, -2.5, 1000.0)], {"to": 10}),
    Case("cast_empty", "Cast", [EMPTY], {"to": 7}),
    # ---- products
    Case("matmul_int", "MatMul", [MATRIX, np.arange(8, dtype=np.int64).reshape(4, 2) - 3]),
    Case("matmul_1d_2d", "MatMul", [f32(1.0, -2.0, 0.5), FLOATS.T.copy()]),
    Case("matmul_2d_1d", "MatMul", [FLOATS, f32(1.0, -2.0, 0.5)]),
    Case("matmul_1d_1d", "MatMul", [f32(1.0, -2.0, 0.5), f32(3.0, 1.0, 2.0)]),
    Case("matmul_float64", "MatMul", [X4, X4]),
    Case("matmul_empty", "MatMul", [np.zeros((2, 0), np.float32), np.zeros((0, 3), np.float32)]),
    Case("gemm_int", "Gemm", [INTS, np.arange(12, dtype=np.int64).reshape(4, 3) - 5, i64(1, 2, 3, 4)],
         {"transB": 1}, opset=13),
    Case("gemm_int_fractional_scales", "Gemm", [INTS.T.copy(), INTS, i64(5, -5, 1)], {"alpha": 0.5, "beta": 1.5}),
    Case("gemm_int_scales", "Gemm", [INTS.T.copy(), INTS], {"alpha": -2.0}),
    Case("gemm_float64", "Gemm", [X4[0, 0], X4[1, 1], f64(1.0)], {"alpha": 0.5, "beta": 2.0, "transA": 1}),
    # ---- windows and normalizations (float kinds only, in ONNX too)
    Case("conv_float64", "Conv", [X4, X4[:2, :, :3, :3], f64(0.5, -0.5)], {"pads": [1, 1, 1, 1]}),
    Case("conv1d_float64", "Conv", [X4[:, :, 0], X4[:2, :, 0, :3]], {"strides": [2]}),
    Case("max_pool_float64", "MaxPool", [X4], {"kernel_shape": [2, 2], "strides": [2, 2]}),
    Case("avg_pool_float64", "AveragePool", [X4], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    Case("global_avg_pool_float64", "GlobalAveragePool", [X4]),
    Case("global_avg_pool_1d", "GlobalAveragePool", [X4[:, :, 0]]),
    Case("global_max_pool_float64", "GlobalMaxPool", [X4]),
    Case("batch_norm_float64", "BatchNormalization", [X4, f64(1, 2, 3), f64(0, 1, -1), f64(0.5, 0, 1), f64(1, 2, 3)]),
    Case("layer_norm_negative_axis", "LayerNormalization", [X4, X4[0, 0], X4[1, 1]], {"axis": -2}),
    Case("layer_norm_float64", "LayerNormalization", [X4, X4[0, 0, 0], X4[1, 1, 1]]),
    Case("instance_norm_float64", "InstanceNormalization", [X4, f64(1, 2, 3), f64(0, 1, -1)]),
    Case("rms_norm_float64_negative_axis", "RMSNormalization", [X4, X4[0, 0]], {"axis": -2}, opset=23),
    Case("group_norm_float64", "GroupNormalization", [X4, f64(1, 2, 3), f64(0, 1, -1)], {"num_groups": 3},
         opset=21),
    Case("lp_norm_float64_axis_0", "LpNormalization", [X4], {"axis": 0}, opset=22),
    Case("mvn_negative_axes", "MeanVarianceNormalization", [X4.astype(np.float32)], {"axes": [-1, -2]}, opset=13),
    Case("rotary_embedding_3d_interleaved", "RotaryEmbedding",
         [X4[0].astype(np.float32), X4[1, :, :, :1].astype(np.float32), X4[0, :, :, 3:].astype(np.float32)],
         {"num_heads": 2, "interleaved": 1}, opset=23),
    Case("softmax_negative_axis", "Softmax", [X4], {"axis": -3}),
    Case("softmax_float64", "Softmax", [X4]),
    Case("log_softmax_negative_axis", "LogSoftmax", [X4], {"axis": -2}),
    # ---- reductions: negative axes, integer inputs, empty axes, 0-d inputs
    Case("reduce_sum_int", "ReduceSum", [MATRIX, i64(-1)], static=(1,)),
    Case("reduce_sum_empty_axis", "ReduceSum", [EMPTY, i64(1)], static=(1,)),
    Case("reduce_sum_0d", "ReduceSum", [SCALAR], {"keepdims": 0}),
    Case("reduce_sum_noop", "ReduceSum", [MATRIX, i64()], {"noop_with_empty_axes": 1}, static=(1,)),
    Case("reduce_sum_int_all_axes", "ReduceSum", [INTS], {"keepdims": 0}),
    Case("reduce_mean_int", "ReduceMean", [MATRIX], {"axes": [-2, 0]}),
    Case("reduce_mean_float64", "ReduceMean", [X4, i64(-1, 1)], opset=18, static=(1,)),
    Case("reduce_mean_empty_axis", "ReduceMean", [EMPTY], {"axes": [1]}),
    Case("reduce_max_int", "ReduceMax", [MATRIX], {"axes": [-1], "keepdims": 0}),
    Case("reduce_max_empty_axis", "ReduceMax", [EMPTY, i64(-1)], opset=18, static=(1,)),
    Case("reduce_max_empty_axis_int", "ReduceMax", [np.zeros((3, 0, 2), np.int64)], {"axes": [1], "keepdims": 0}),
    Case("reduce_max_uint8", "ReduceMax", [np.array([[3, 250], [7, 0]], np.uint8)], {"axes": [0]}),
    Case("reduce_max_bool", "ReduceMax", [BOOLS, i64(1)], opset=20, static=(1,)),
    Case("reduce_max_0d", "ReduceMax", [SCALAR], opset=18),
    Case("argmax_int_ties", "ArgMax", [np.array([[3, 7, 7], [-1, -1, -2]], np.int64)], {"axis": -1}),
    Case("argmax_float64_keepdims0", "ArgMax", [X4], {"axis": -3, "keepdims": 0}),
    Case("argmax_0d", "ArgMax", [SCALAR64]),
    Case("col2im_float64_strided", "Col2Im", [np.arange(8 * 10, dtype=np.float64).reshape(1, 8, 10) - 20,
                                              i64(4, 5), i64(2, 2)], {"strides": [2, 1], "pads": [0, 1, 0, 0]},
         opset=18, static=(1, 2)),
    # ---- the reductions read through graphc's functions: ONNX keeps integer types, empty axes give identities
    Case("reduce_min_uint8", "ReduceMin", [np.array([[3, 250], [7, 0]], np.uint8)], {"axes": [1]}),
    Case("reduce_min_bool", "ReduceMin", [BOOLS, i64(-1)], opset=20, static=(1,)),
    Case("reduce_min_empty_axis_int", "ReduceMin", [np.zeros((3, 0, 2), np.int32)], {"axes": [1], "keepdims": 0}),
    Case("reduce_prod_int", "ReduceProd", [INTS], {"axes": [0, 1], "keepdims": 0}),
    Case("reduce_prod_empty", "ReduceProd", [EMPTY, i64(1)], opset=18, static=(1,)),
    Case("reduce_l1_int", "ReduceL1", [INTS], {"axes": [-1]}),
    Case("reduce_l2_int", "ReduceL2", [INTS], {"axes": [1], "keepdims": 0}),
    Case("reduce_l2_float64_all", "ReduceL2", [X4], {"keepdims": 0}),
    Case("reduce_sum_square_noop", "ReduceSumSquare", [FLOATS, np.zeros(0, np.int64)],
         {"noop_with_empty_axes": 1}, opset=18, static=(1,)),
    Case("reduce_log_sum_exp_empty", "ReduceLogSumExp", [EMPTY, i64(1)], opset=18, static=(1,)),
    Case("reduce_log_sum_float64", "ReduceLogSum", [np.abs(X4)], {"axes": [2, 3]}),
    Case("argmin_last_ties", "ArgMin", [np.array([[3, 1, 1], [-1, -2, -2]], np.int64)],
         {"axis": 1, "select_last_index": 1}),
    Case("argmax_last_ties_keepdims0", "ArgMax", [np.array([[7, 7, 2], [0, 5, 5]], np.int32)],
         {"axis": -1, "keepdims": 0, "select_last_index": 1}),
    Case("cumsum_int32_exclusive_reverse", "CumSum", [INTS.astype(np.int32), np.array(1, np.int64)],
         {"exclusive": 1, "reverse": 1}, opset=14, static=(1,)),
    Case("cumsum_float64_axis0", "CumSum", [X4, np.array(-4, np.int32)], opset=14, static=(1,)),
    Case("cumprod_int_exclusive", "CumProd", [INTS, np.array(0, np.int64)], {"exclusive": 1}, opset=26, static=(1,)),
    Case("topk_ties_uint64", "TopK", [np.array([[3, 9, 9, 1]], np.uint64), i64(3)], {"axis": 1}, opset=11,
         static=(1,), outputs=2),
    Case("topk_smallest_float64", "TopK", [X4, i64(2)], {"axis": -2, "largest": 0}, opset=11, static=(1,), outputs=2),
    Case("hardmax_ties", "Hardmax", [f32(1.0, 3.0, 3.0, -1.0).reshape(2, 2)], {"axis": 0}, opset=13),
    # ---- shape and data movement
    Case("flatten_axis_minus1", "Flatten", [MATRIX], {"axis": -1}),
    Case("flatten_axis_minus3", "Flatten", [MATRIX], {"axis": -3}),
    Case("flatten_axis_0", "Flatten", [MATRIX], {"axis": 0}),
    Case("flatten_axis_rank", "Flatten", [MATRIX], {"axis": 3}),
    Case("flatten_bool_minus2", "Flatten", [BOOLS], {"axis": -2}),
    Case("flatten_0d", "Flatten", [SCALAR], {"axis": 0}),
    Case("reshape_int", "Reshape", [MATRIX, i64(0, -1)], static=(1,)),
    Case("reshape_to_0d", "Reshape", [f32(4.0), i64()], static=(1,)),
    Case("reshape_empty", "Reshape", [EMPTY, i64(0, 4, -1)], static=(1,)),
    Case("transpose_bool", "Transpose", [BOOLS]),
    Case("transpose_int", "Transpose", [MATRIX], {"perm": [2, 0, 1]}),
    Case("concat_negative_axis", "Concat", [MATRIX, MATRIX[:, :1]], {"axis": -2}),
    Case("concat_empty", "Concat", [EMPTY, FLOATS], {"axis": -1}),
    Case("concat_bool", "Concat", [BOOLS, BOOLS], {"axis": 0}),
    Case("unsqueeze_negative", "Unsqueeze", [INTS, i64(-1, 0)], static=(1,)),
    Case("unsqueeze_0d", "Unsqueeze", [SCALAR64, i64(0)], static=(1,)),
    Case("unsqueeze_attr_negative", "Unsqueeze", [BOOLS], {"axes": [-2]}, opset=11),
    Case("squeeze_negative", "Squeeze", [INTS[:1], i64(-2)], static=(1,)),
    Case("squeeze_to_0d", "Squeeze", [np.ones((1, 1), np.int64)]),
    Case("slice_int_negative_steps", "Slice", [MATRIX, i64(-1, 3), i64(-2**63, 0), i64(-1, 1), i64(-1, -2)],
         static=(1, 2, 3, 4)),
    Case("slice_empty_result", "Slice", [INTS, i64(2), i64(1), i64(1)], static=(1, 2, 3)),
    Case("slice_bool", "Slice", [BOOLS, i64(1), i64(3)], static=(1, 2)),
    Case("gather_negative_index", "Gather", [INTS, np.array(-1, np.int64)], {"axis": -1}, static=(1,)),
    Case("gather_bool", "Gather", [BOOLS, np.array(0, np.int64)], static=(1,)),
    Case("gather_embedding", "Gather", [np.arange(12, dtype=np.float32).reshape(4, 3), i64(3, 1, 0)], static=(0,)),
    Case("gather_negative_indices_known", "Gather", [np.arange(12, dtype=np.int64).reshape(4, 3), i64(-1, 0, -4)],
         static=(0, 1)),
    Case("expand_int", "Expand", [i64(1, 2, 3), i64(2, 1)], static=(1,)),
    Case("expand_bool_0d", "Expand", [np.array(True), i64(2, 3)], static=(1,)),
    Case("split_negative_axis", "Split", [MATRIX, i64(1, 3)], {"axis": -1}, static=(1,), outputs=2),
    Case("split_bool", "Split", [BOOLS], {"axis": 1, "num_outputs": 3}, opset=18, outputs=3),
    Case("shape_negative_start", "Shape", [MATRIX], {"start": -2}, opset=15),
    Case("shape_0d", "Shape", [SCALAR]),
    Case("size_of_empty", "Shape", [EMPTY], {"end": -1}, opset=15),
    # graphc's Range takes known bounds (its output's size is static): initializers in both runs
    Case("range_int_negative", "Range", [np.int64(5), np.int64(-4), np.int64(-3)], static=(0, 1, 2)),
    Case("range_empty", "Range", [np.int64(2), np.int64(2), np.int64(1)], static=(0, 1, 2)),
    Case("range_float64", "Range", [np.float64(0.5), np.float64(2.0), np.float64(0.5)], static=(0, 1, 2)),
    Case("constant_of_shape_int", "ConstantOfShape", [i64(2, 3)],
         {"value": np.array([-4], np.int64)}, static=(0,)),
    Case("constant_of_shape_empty", "ConstantOfShape", [i64(0, 3)], static=(0,)),
    Case("constant_of_shape_0d", "ConstantOfShape", [i64()], {"value": np.array([True])}, static=(0,)),
    Case("constant_ints", "Constant", [], {"value_ints": [3, -1]}),
    Case("constant_int_0d", "Constant", [], {"value_int": -7}),
    Case("constant_tensor_bool", "Constant", [], {"value": np.array([[True], [False]])}),
]

KNOWN: set = set()  # readers without an edge case here: none
