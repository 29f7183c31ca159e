"""The math readers (graphc/onnx/math_readers.py, Mod in logic_readers, PRelu in vision_readers)
against onnx's reference evaluator on inputs onnx's backend cases do not cover: a symbolic batch
dim, integer inputs, attribute combinations, one-point windows."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import graphc as gc  # noqa: E402
from graphc.onnx.importer import import_model  # noqa: E402

_RNG = np.random.default_rng(35)


def _model(op, inputs, attrs=None, opset=24, outputs=1, out_type=TensorProto.FLOAT):
    """One ``op`` node over graph inputs ``[(name, elem_type, shape), ...]``."""
    names = [f"y{i}" for i in range(outputs)]
    node = helper.make_node(op, [name for name, _, _ in inputs], names, **(attrs or {}))
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info(n, out_type, None) for n in names])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _check(model, *arrays, rtol=1e-6):
    """graphc's plan against onnx's reference; float32 elementwise math (one rounding each way)."""
    want = ReferenceEvaluator(model).run(None, {i.name: a for i, a in zip(model.graph.input, arrays)})
    got = import_model(model)(*arrays)
    got = got if isinstance(got, (list, tuple)) else [got]
    for g, w in zip(got, want):
        g = np.asarray(g)
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-7, equal_nan=True)


@pytest.mark.parametrize("op", ["Cos", "Sin", "Tan", "Acos", "Asin", "Atan", "Cosh", "Sinh", "Asinh", "Ceil", "IsNaN"])
def test_unary_ops_on_a_symbolic_batch(op):
    x = _RNG.uniform(-0.9, 0.9, (5, 3)).astype(np.float32)
    x[0, 0] = np.nan
    _check(_model(op, [("x", TensorProto.FLOAT, ["N", 3])],
                  out_type=TensorProto.BOOL if op == "IsNaN" else TensorProto.FLOAT), x)


@pytest.mark.parametrize("negative,positive", [(1, 1), (0, 1), (1, 0), (0, 0)])
def test_isinf_detects_the_signs_asked_for(negative, positive):
    x = np.array([[np.inf, -np.inf, 0.0, np.nan, 1e38]], np.float32)
    _check(_model("IsInf", [("x", TensorProto.FLOAT, ["N", 5])], {"detect_negative": negative,
                                                                  "detect_positive": positive},
                  out_type=TensorProto.BOOL), x)


def test_size_of_a_symbolic_batch_feeds_arithmetic():
    """Size of an [N, 3] input is N*3 while importing; dividing a Reshape target by it works."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])
    nodes = [helper.make_node("Size", ["x"], ["n"]),
             helper.make_node("Constant", [], ["three"], value=helper.make_tensor("c", TensorProto.INT64, [], [3])),
             helper.make_node("Div", ["n", "three"], ["rows"]),
             helper.make_node("Unsqueeze", ["rows", "zero"], ["rows1"]),
             helper.make_node("Concat", ["rows1", "minus"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["y0"])]
    inits = [helper.make_tensor("zero", TensorProto.INT64, [1], [0]),
             helper.make_tensor("minus", TensorProto.INT64, [1], [-1])]
    graph = helper.make_graph(nodes, "g", [x], [helper.make_tensor_value_info("y0", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    for batch in (1, 4):
        _check(model, _RNG.standard_normal((batch, 3)).astype(np.float32))


def test_shrink_keeps_integers_integer_and_mean_divides_in_the_inputs_type():
    x = np.arange(-4, 5, dtype=np.int32).reshape(1, 9)
    _check(_model("Shrink", [("x", TensorProto.INT32, ["N", 9])], {"lambd": 1.5, "bias": 1.0},
                  out_type=TensorProto.INT32), x)
    a, b, c = (_RNG.standard_normal((2, 3)).astype(np.float64) for _ in range(3))
    _check(_model("Mean", [(n, TensorProto.DOUBLE, [2, 3]) for n in "abc"], out_type=TensorProto.DOUBLE), a, b, c)


def test_swish_and_swiglu_with_alpha():
    a, b = (_RNG.standard_normal((3, 4)).astype(np.float32) for _ in range(2))
    _check(_model("Swish", [("a", TensorProto.FLOAT, ["N", 4])], {"alpha": 1.702}), a)
    _check(_model("SwiGLU", [("a", TensorProto.FLOAT, ["N", 4]), ("b", TensorProto.FLOAT, ["N", 4])],
                  {"alpha": 0.5}, opset=28), a, b)


def test_einsum_with_ellipsis_and_a_symbolic_batch():
    a = _RNG.standard_normal((2, 3, 4)).astype(np.float32)
    b = _RNG.standard_normal((2, 4, 5)).astype(np.float32)
    _check(_model("Einsum", [("a", TensorProto.FLOAT, ["N", 3, 4]), ("b", TensorProto.FLOAT, ["N", 4, 5])],
                  {"equation": "...ij, ...jk -> ...ik"}, opset=12), a, b, rtol=1e-5)  # float32 sums of 4


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("size,periodic", [(1, 1), (7, 0), (8, 1)])
def test_windows(op, size, periodic):
    model = _model(op, [("n", TensorProto.INT64, [])], {"periodic": periodic, "output_datatype": TensorProto.DOUBLE},
                   opset=17, out_type=TensorProto.DOUBLE)
    _check(model, np.array(size, np.int64))


def test_float_mod_with_fmod_0_takes_the_divisors_sign():
    a = np.array([[-4.5, 4.5, -0.0, 3.0, np.inf]], np.float32)
    b = np.array([[2.0, -2.0, 3.0, np.inf, 2.0]], np.float32)
    _check(_model("Mod", [("a", TensorProto.FLOAT, ["N", 5]), ("b", TensorProto.FLOAT, ["N", 5])], {"fmod": 0}), a, b)


def test_legacy_prelu_slope_per_channel():
    x = _RNG.standard_normal((2, 3, 4)).astype(np.float32)
    slope = np.array([0.1, 0.2, 0.3], np.float32)
    model = _model("PRelu", [("x", TensorProto.FLOAT, [2, 3, 4]), ("s", TensorProto.FLOAT, [3])], opset=6)
    got = import_model(model)(x, slope)
    np.testing.assert_allclose(got, np.where(x < 0, x * slope[:, None], x), rtol=1e-6)


def test_unequal_swiglu_shapes_are_refused_by_name():
    model = _model("SwiGLU", [("a", TensorProto.FLOAT, [2, 4]), ("b", TensorProto.FLOAT, [1, 4])], opset=28)
    with pytest.raises(gc.GraphcError, match="SwiGLU of shapes"):
        import_model(model)


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bit_shift_of_unsigned_integers_past_the_width(direction):
    x = np.array([[1, 200, 255, 16]], np.uint8)
    amounts = np.array([[7, 1, 8, 2]], np.uint8)
    _check(_model("BitShift", [("x", TensorProto.UINT8, ["N", 4]), ("s", TensorProto.UINT8, ["N", 4])],
                  {"direction": direction}, opset=11, out_type=TensorProto.UINT8), x, amounts)


@pytest.mark.parametrize("op", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
def test_bitwise_ops_broadcast_signed_integers(op):
    a = _RNG.integers(-2**31, 2**31 - 1, (3, 4)).astype(np.int32)
    b = _RNG.integers(-2**31, 2**31 - 1, (4,)).astype(np.int32)
    _check(_model(op, [("a", TensorProto.INT32, ["N", 4]), ("b", TensorProto.INT32, [4])], opset=18,
                  out_type=TensorProto.INT32), a, b)


@pytest.mark.parametrize("inverse,onesided,length", [(0, 0, 6), (0, 1, 9), (1, 0, 4), (1, 1, 10)])
def test_dft_of_a_symbolic_batch_in_float64(inverse, onesided, length):
    channels = 1 if onesided and not inverse else 2
    x = _RNG.standard_normal((3, 7, 5, channels))
    model = _model("DFT", [("x", TensorProto.DOUBLE, ["N", 7, 5, channels])],
                   {"inverse": inverse, "onesided": onesided}, opset=20, out_type=TensorProto.DOUBLE)
    n = helper.make_tensor("n", TensorProto.INT64, [], [length])
    axis = helper.make_tensor("axis", TensorProto.INT64, [], [1])
    model.graph.initializer.extend([n, axis])
    model.graph.node[0].input.extend(["n", "axis"])
    _check(model, x, rtol=1e-10)  # float64 FFTs of at most 10 points


def test_stft_with_a_window_of_a_real_signal():
    x = _RNG.standard_normal((2, 40, 1)).astype(np.float32)
    window = np.hanning(8).astype(np.float32)
    node = helper.make_node("STFT", ["x", "step", "w"], ["y0"], onesided=1)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 40, 1])],
                              [helper.make_tensor_value_info("y0", TensorProto.FLOAT, None)],
                              [helper.make_tensor("step", TensorProto.INT64, [], [5]),
                               helper.make_tensor("w", TensorProto.FLOAT, [8], window)])
    _check(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), x, rtol=1e-5)  # float32 8-point FFTs
