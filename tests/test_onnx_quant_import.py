"""ONNX import of the quantization ops and low-precision casts (graphc/onnx/quant_readers.py):
hand-built one-node models compared bit for bit with onnx's reference implementation on inputs
onnx's backend suite does not cover (overflow, ties, subnormals, NaN/inf, a symbolic batch dim,
negative axes, blocks that do not divide the axis, per-channel scales). (onnx's own cases run in
tests/test_onnx_backend_suite.py.)
"""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ml_dtypes = pytest.importorskip("ml_dtypes")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from graphc.ir.errors import GraphcError  # noqa: E402
from graphc.onnx.importer import import_model  # noqa: E402

F8 = [TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E4M3FNUZ, TensorProto.FLOAT8E5M2, TensorProto.FLOAT8E5M2FNUZ]
EDGES = np.array([0.0, -0.0, 1.0, -1.5, 0.3, 1e-3, 1e-6, 3e-8, 240.0, 250.0, 448.0, 464.0, 465.0, 500.0,
                  57344.0, 61440.0, 1e9, -1e9, np.inf, -np.inf, np.nan, 2.5, 3.5, -6.5, 6.25], np.float32)


def _model(op, inputs: dict, initializers: dict, attrs: dict, opset: int, outs: list, batch: bool = False):
    """A one-node model; ``outs`` are the outputs' element types; ``batch`` makes every graph
    input's first dim the symbolic ``N``."""
    ins = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype),
                                         ["N", *v.shape[1:]] if batch else list(v.shape)) for k, v in inputs.items()]
    names = [f"y{i}" for i in range(len(outs))]
    node = helper.make_node(op, [*inputs, *initializers], names, **attrs)
    graph = helper.make_graph([node], "g", ins, [helper.make_tensor_value_info(n, t, None) for n, t in zip(names, outs)],
                              [numpy_helper.from_array(v, k) for k, v in initializers.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _check(model, feeds: dict):
    """graphc's outputs are the reference's: same dtype, shape and bits (NaN payloads included)."""
    want = ReferenceEvaluator(model).run(None, feeds)
    got = import_model(model)(*feeds.values())
    got = got if isinstance(got, (list, tuple)) else [got]
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        if w.dtype.itemsize == 1 and w.dtype.kind not in "iub":  # float8/float4: compare the bytes
            np.testing.assert_array_equal(g.view(np.uint8), w.view(np.uint8))
        else:
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("to", F8 + [TensorProto.FLOAT4E2M1])
@pytest.mark.parametrize("saturate", [0, 1])
@pytest.mark.parametrize("source", [np.float32, np.float16, np.float64, ml_dtypes.bfloat16, ml_dtypes.float8_e5m2])
def test_cast_to_float8_and_float4_overflow_ties_and_nan(to, saturate, source):
    with np.errstate(over="ignore"):  # 1e9 is inf in float16
        x = EDGES.astype(source).reshape(5, 5)
    attrs = {"to": to} if to == TensorProto.FLOAT4E2M1 else {"to": to, "saturate": saturate}
    _check(_model("Cast", {"x": x}, {}, attrs, 21, [to], batch=True), {"x": x})


@pytest.mark.parametrize("to", F8)
def test_cast_of_integers_to_float8_saturates(to):
    x = np.array([[-100000, -300, 0, 7, 17, 300, 70000]], np.int32)
    _check(_model("Cast", {"x": x}, {}, {"to": to, "saturate": 1}, 21, [to]), {"x": x})


@pytest.mark.parametrize("round_mode", ["up", "down", "nearest"])
@pytest.mark.parametrize("saturate", [0, 1])
def test_cast_to_float8e8m0_round_modes(round_mode, saturate):
    x = np.array([0.0, -0.0, 1.0, 1.5, 1.75, 3.0, -5.0, 2.0 ** -127, 2.0 ** -149, 3 * 2.0 ** -128, 2.0 ** -126,
                  2.0 ** 127, 1.5 * 2.0 ** 127, 1.25 * 2.0 ** 127, np.inf, -np.inf, np.nan, 0.7, 1e-30, 6e37],
                 np.float32)
    attrs = {"to": TensorProto.FLOAT8E8M0, "saturate": saturate, "round_mode": round_mode}
    _check(_model("Cast", {"x": x}, {}, attrs, 25, [TensorProto.FLOAT8E8M0]), {"x": x})


def test_castlike_to_float8_without_saturation():
    x = EDGES.reshape(1, -1)
    like = np.zeros(1, ml_dtypes.float8_e5m2)
    _check(_model("CastLike", {"x": x}, {"like": like}, {"saturate": 0}, 21, [TensorProto.FLOAT8E5M2]), {"x": x})


@pytest.mark.parametrize("zp", [np.array([0, 100, 65000], np.uint16), np.array([-3, 0, 7], ml_dtypes.int4),
                                np.array([1, 0, 3], ml_dtypes.uint2)])
def test_quantize_per_axis_negative_axis_symbolic_batch(zp):
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.normal(0, 40, (3, 4, 3)), np.full((1, 4, 3), 0.5), np.full((1, 4, 3), -2.5)]
                       ).astype(np.float32)
    x[0, 0] = [1e5, -1e5, 1e6]  # saturated (the reference's int32 conversion of inf is platform behaviour)
    scale = np.array([0.5, 2.0, 0.01], np.float32)
    model = _model("QuantizeLinear", {"x": x}, {"s": scale, "zp": zp}, {"axis": -1}, 21,
                   [helper.np_dtype_to_tensor_dtype(zp.dtype)], batch=True)
    _check(model, {"x": x})


def test_quantize_saturates_infinities_as_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    x = np.array([[np.inf, -np.inf, 1e12, -1e12, 3.0]], np.float32)
    model = _model("QuantizeLinear", {"x": x}, {"s": np.array(0.5, np.float32), "zp": np.array(3, np.uint8)}, {},
                   21, [TensorProto.UINT8])
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    np.testing.assert_array_equal(import_model(model)(x), want)


@pytest.mark.parametrize("output_dtype", [TensorProto.INT8, TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT4E2M1])
def test_quantize_blocked_with_a_remainder_block_float16(output_dtype):
    rng = np.random.default_rng(2)
    x = (rng.normal(0, 30, (2, 7)) * [[1], [100]]).astype(np.float16)
    scale = np.array([[0.5, 0.25, 3.0], [2.0, 0.125, 1.0]], np.float16)
    attrs = {"axis": 1, "block_size": 3, "output_dtype": output_dtype, "saturate": 1}
    _check(_model("QuantizeLinear", {"x": x}, {"s": scale}, attrs, 21, [output_dtype]), {"x": x})


def test_dequantize_int32_per_axis_and_int16_blocked_to_float16():
    x = np.array([[2 ** 30 + 1, -5, 7], [3, -(2 ** 31), 2 ** 31 - 1]], np.int32)
    zp = np.array([1, -3], np.int32)
    model = _model("DequantizeLinear", {"x": x}, {"s": np.array([1e-3, 3.0], np.float32), "zp": zp}, {"axis": 0},
                   19, [TensorProto.FLOAT])
    _check(model, {"x": x})
    x = np.array([[-32768, 5, 32767, 100, -1]], np.int16)
    inits = {"s": np.array([[0.5, 1e-4]], np.float32), "zp": np.array([[7, -9]], np.int16)}
    model = _model("DequantizeLinear", {"x": x}, inits, {"axis": -1, "block_size": 3,
                                                         "output_dtype": TensorProto.FLOAT16}, 23, [TensorProto.FLOAT16])
    _check(model, {"x": x})


@pytest.mark.parametrize("x", [np.array([[1.0, 2.5, 7.0]], np.float32), np.array([[-3.0, -0.1, -7.0]], np.float32),
                               np.full((2, 3), 4.0, np.float32), np.zeros((2, 3), np.float32)])
def test_dynamic_quantize_one_signed_ranges_and_constants(x):
    x = np.concatenate([x, x * 0.5])
    model = _model("DynamicQuantizeLinear", {"x": x}, {}, {}, 11,
                   [TensorProto.UINT8, TensorProto.FLOAT, TensorProto.UINT8], batch=True)
    _check(model, {"x": x})


def test_matmul_integer_batched_with_per_column_zero_point():
    rng = np.random.default_rng(3)
    a = rng.integers(0, 256, (3, 2, 4, 5)).astype(np.uint8)
    b = rng.integers(-128, 128, (5, 6)).astype(np.int8)
    model = _model("MatMulInteger", {"a": a}, {"b": b, "azp": np.array(200, np.uint8),
                                               "bzp": rng.integers(-128, 128, 6).astype(np.int8)},
                   {}, 10, [TensorProto.INT32], batch=True)
    _check(model, {"a": a})


def test_qlinear_matmul_per_column_scale_and_zero_point():
    rng = np.random.default_rng(4)
    a = rng.integers(-128, 128, (2, 3, 8)).astype(np.int8)
    b = rng.integers(-128, 128, (8, 4)).astype(np.int8)
    inits = {"a_s": np.array(0.02, np.float32), "a_zp": np.array(-5, np.int8), "b": b,
             "b_s": np.array([0.01, 0.03, 0.002, 0.5], np.float32), "b_zp": np.array([0, 1, -2, 3], np.int8),
             "y_s": np.array(0.05, np.float32), "y_zp": np.array(10, np.int8)}
    model = helper.make_model(helper.make_graph(
        [helper.make_node("QLinearMatMul", ["a", "a_s", "a_zp", "b", "b_s", "b_zp", "y_s", "y_zp"], ["y0"])], "g",
        [helper.make_tensor_value_info("a", TensorProto.INT8, ["N", 3, 8])],
        [helper.make_tensor_value_info("y0", TensorProto.INT8, None)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()]), opset_imports=[helper.make_opsetid("", 21)])
    _check(model, {"a": a})


def test_qlinear_conv_per_channel_with_bias_and_conv_integer():
    rng = np.random.default_rng(5)
    x = rng.integers(0, 256, (2, 3, 7, 6)).astype(np.uint8)
    w = rng.integers(-128, 128, (4, 3, 3, 3)).astype(np.int8)
    inits = {"x_s": np.array(0.01, np.float32), "x_zp": np.array(128, np.uint8), "w": w,
             "w_s": np.array([0.01, 0.02, 0.005, 0.1], np.float32), "w_zp": np.zeros(4, np.int8),
             "y_s": np.array(0.2, np.float32), "y_zp": np.array(100, np.uint8),
             "bias": rng.integers(-5000, 5000, 4).astype(np.int32)}
    attrs = {"pads": [1, 1, 1, 1], "strides": [2, 1]}
    model = helper.make_model(helper.make_graph(
        [helper.make_node("QLinearConv", ["x", *inits], ["y0"], **attrs)], "g",
        [helper.make_tensor_value_info("x", TensorProto.UINT8, ["N", 3, 7, 6])],
        [helper.make_tensor_value_info("y0", TensorProto.UINT8, None)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()]), opset_imports=[helper.make_opsetid("", 10)])
    _check(model, {"x": x})
    wzp = np.array([1, -2, 3, 0], np.int8)
    model = _model("ConvInteger", {"x": x}, {"w": w, "xzp": np.array(3, np.uint8), "wzp": wzp},
                   {"pads": [0, 1, 0, 1], "dilations": [2, 1]}, 10, [TensorProto.INT32], batch=True)
    _check(model, {"x": x})


@pytest.mark.parametrize("source,to", [(np.int8, TensorProto.UINT8), (np.uint8, TensorProto.INT8),
                                       (np.int16, TensorProto.UINT16), (np.uint32, TensorProto.INT32),
                                       (np.int32, TensorProto.UINT32)])
def test_bitcast_between_integers_wraps(source, to):
    info = np.iinfo(source)
    x = np.array([info.min, info.min + 1, -1 if info.min else 1, 0, 1, info.max - 1, info.max], source)
    _check(_model("BitCast", {"x": x}, {}, {"to": to}, 26, [to]), {"x": x})


def test_refusals_name_what_is_not_supported():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(GraphcError, match="no op that views a float's bits"):
        import_model(_model("BitCast", {"x": x}, {}, {"to": TensorProto.INT32}, 26, [TensorProto.INT32]))
    with pytest.raises(GraphcError, match="nonzero zero point"):
        import_model(_model("QuantizeLinear", {"x": x}, {"s": np.array(1.0, np.float32),
                                                         "zp": np.array(1.0, ml_dtypes.float8_e4m3fn)},
                            {}, 21, [TensorProto.FLOAT8E4M3FN]))
    a = np.ones((3, 3), np.uint8)
    with pytest.raises(GraphcError, match="per-tensor one"):
        import_model(_model("MatMulInteger", {"a": a}, {"b": a, "azp": np.array([1, 2, 3], np.uint8)}, {}, 10,
                            [TensorProto.INT32]))
