"""Pooling and convolution of any rank and padding (graphc/onnx/pool_readers.py, the general
Conv and ConvTranspose paths) against onnxruntime, on what onnx's
backend cases leave out: a symbolic batch, SAME_LOWER with strides and ceil mode, average pools
with dilations and the padding counted or not, integer max pools, 3-D transposed convolutions."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import graphc as gc  # noqa: E402
from graphc.onnx.importer import import_model  # noqa: E402

_RNG = np.random.default_rng(351)


def _model(op, shape, attrs, elem=TensorProto.FLOAT, weights=(), opset=22):
    inits = [numpy_helper.from_array(w, f"w{i}") for i, w in enumerate(weights)]
    node = helper.make_node(op, ["x"] + [f"w{i}" for i in range(len(weights))], ["y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", elem, shape)],
                              [helper.make_tensor_value_info("y", elem, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _check(model, x, rtol=1e-5):
    """graphc against onnxruntime; float32 sums over windows of at most 27 cells: a few
    roundings, well inside 1e-5. onnxruntime is the oracle here, not onnx's reference: the
    reference's 3-D MaxPool ignores auto_pad (SAME_LOWER over 5 cells with stride 2 gives 2
    where the spec's ceil(5 / 2) is 3), its LpPool with ceil_mode differs from its own
    AveragePool's windows, and it cannot pad integers (NaN) or build 3-D ConvTranspose with
    output_shape; where it runs, the backend suite compares graphc with it."""
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, {"x": x})[0]
    got = np.asarray(import_model(model)(x))
    assert got.dtype == want.dtype and got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-6)
    return got


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool", "LpPool"])
@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [3, 2, 2], "strides": [2, 1, 2], "pads": [1, 0, 1, 1, 0, 1]},
    {"kernel_shape": [2, 2, 2], "auto_pad": "SAME_LOWER", "strides": [2, 2, 2]},
    {"kernel_shape": [2, 3, 2], "dilations": [2, 1, 2], "ceil_mode": 1, "strides": [2, 2, 2]},
])
def test_3d_pools_on_a_symbolic_batch(op, attrs):
    model = _model(op, ["N", 2, 5, 6, 7], attrs)
    for batch in (1, 3):
        _check(model, _RNG.standard_normal((batch, 2, 5, 6, 7)).astype(np.float32))


@pytest.mark.parametrize("include", [0, 1])
@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER", "strides": [2, 2]},
    {"kernel_shape": [2, 3], "pads": [0, 1, 1, 0], "ceil_mode": 1, "strides": [2, 2]},
    {"kernel_shape": [2, 2], "dilations": [2, 3], "pads": [1, 1, 1, 1]},
])
def test_2d_average_pools_count_the_padding_as_asked(include, attrs):
    x = _RNG.standard_normal((2, 3, 7, 8)).astype(np.float32)
    _check(_model("AveragePool", [2, 3, 7, 8], {**attrs, "count_include_pad": include}), x)


def test_integer_max_pool_keeps_its_type_and_pads_with_the_least_value():
    x = _RNG.integers(-128, 127, (1, 2, 5, 5)).astype(np.int8)
    got = _check(_model("MaxPool", [1, 2, 5, 5], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, TensorProto.INT8), x)
    assert got.dtype == np.int8


def test_the_common_2d_case_still_runs_on_graphcs_pool_kernels():
    model = _model("MaxPool", ["N", 3, 8, 8], {"kernel_shape": [2, 2], "strides": [2, 2]})
    plan = import_model(model)
    assert "max_pool2d" in {n.op for n in plan.graph.nodes}
    _check(model, _RNG.standard_normal((2, 3, 8, 8)).astype(np.float32))


@pytest.mark.parametrize("attrs", [{"auto_pad": "SAME_UPPER", "strides": [2, 2]},
                                   {"pads": [0, 1, 2, 0]}, {"auto_pad": "SAME_LOWER"}])
def test_asymmetric_2d_convolutions(attrs):
    w = _RNG.standard_normal((4, 3, 2, 3)).astype(np.float32)
    _check(_model("Conv", ["N", 3, 7, 8], attrs, weights=(w,)), _RNG.standard_normal((2, 3, 7, 8)).astype(np.float32))


def test_3d_convolution_with_groups_on_a_symbolic_batch_matches_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    w = _RNG.standard_normal((4, 1, 3, 2, 2)).astype(np.float32)
    b = _RNG.standard_normal(4).astype(np.float32)
    model = _model("Conv", ["N", 2, 5, 6, 6], {"group": 2, "strides": [1, 2, 2], "pads": [1, 0, 1, 1, 1, 0]},
                   weights=(w, b), opset=17)
    x = _RNG.standard_normal((3, 2, 5, 6, 6)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(np.asarray(import_model(model)(x)), want, rtol=1e-5, atol=1e-5)


def test_3d_transposed_convolution_with_output_shape():
    w = _RNG.standard_normal((2, 3, 2, 3, 2)).astype(np.float32)
    model = _model("ConvTranspose", [1, 2, 3, 4, 4], {"strides": [2, 2, 2], "output_shape": [6, 8, 7]}, weights=(w,))
    _check(model, _RNG.standard_normal((1, 2, 3, 4, 4)).astype(np.float32))


def test_max_pool_indices_off_the_2d_path_are_refused_by_name():
    model = _model("MaxPool", [1, 1, 4, 4, 4], {"kernel_shape": [2, 2, 2]})
    model.graph.node[0].output.append("indices")
    with pytest.raises(gc.GraphcError, match="MaxPool's Indices"):
        import_model(model)


def test_col2im_with_uneven_pads_on_a_symbolic_batch():
    """Against onnx's reference (onnxruntime has no CPU Col2Im here)."""
    from onnx.reference import ReferenceEvaluator

    image, block = np.array([5, 6], np.int64), np.array([2, 3], np.int64)
    node = helper.make_node("Col2Im", ["x", "image", "block"], ["y"], pads=[1, 0, 0, 2], strides=[2, 1],
                            dilations=[1, 2])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 12, 12])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(image, "image"), numpy_helper.from_array(block, "block")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    plan = import_model(model)
    for batch in (1, 3):
        x = _RNG.standard_normal((batch, 12, 12)).astype(np.float32)
        want = ReferenceEvaluator(model).run(None, {"x": x})[0]
        np.testing.assert_allclose(np.asarray(plan(x)), want, rtol=1e-6, atol=1e-6)  # sums of at most 6 cells
