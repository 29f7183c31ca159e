"""ONNX import of GridSample, AffineGrid and ScatterElements (graphc/onnx/grid_readers.py):
hand-built models compared with onnxruntime, and graphc's own export of max unpooling
(ScatterElements) imported back. (onnx's own cases run in tests/test_onnx_backend_suite.py.)

Tolerance: 1e-5 (rtol and atol; graphc contracts interpolation weights with matmuls, onnxruntime
with loops, both in float32).
"""
from __future__ import annotations


import numpy as np
import pytest

import graphc as gc

onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper  # noqa: E402

# ---- hand-built models against onnxruntime -----------------------------------------------------

def _model(op, inputs: dict, initializers: dict, attrs: dict, opset: int, out_rank: int):
    """A one-node model: ``inputs`` name -> array (graph inputs), ``initializers`` likewise."""
    from onnx import TensorProto
    elem = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64}
    ins = [helper.make_tensor_value_info(k, elem[v.dtype], list(v.shape)) for k, v in inputs.items()]
    node = helper.make_node(op, list(inputs) + list(initializers), ["y"], **attrs)
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None] * out_rank)
    graph = helper.make_graph([node], "g", ins, [out],
                              [numpy_helper.from_array(v, k) for k, v in initializers.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _compare_with_ort(model, feeds: dict, tmp_path, atol=1e-5):
    ort = pytest.importorskip("onnxruntime")
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    want = ort.InferenceSession(path).run(None, feeds)[0]
    got = gc.load(path)(*feeds.values())
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=atol)


GRID_SAMPLE_FORMS = [(mode, padding, align, opset)
                     for mode, opset in (("bilinear", 16), ("nearest", 16), ("linear", 20), ("nearest", 20))
                     for padding in ("zeros", "border", "reflection") for align in (0, 1)]


@pytest.mark.parametrize("mode,padding,align,opset", GRID_SAMPLE_FORMS)
def test_grid_sample_matches_onnxruntime(mode, padding, align, opset, tmp_path):
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 3, 5, 7)).astype(np.float32)
    grid = rng.uniform(-1.6, 1.6, (2, 4, 6, 2)).astype(np.float32)
    model = _model("GridSample", {"x": x, "grid": grid}, {}, {"mode": mode, "padding_mode": padding,
                                                                "align_corners": align}, opset, 4)
    _compare_with_ort(model, {"x": x, "grid": grid}, tmp_path)


def test_grid_sample_cubic_is_refused_naming_the_node(tmp_path):
    x = np.zeros((1, 1, 3, 3), np.float32)
    grid = np.zeros((1, 2, 2, 2), np.float32)
    model = _model("GridSample", {"x": x, "grid": grid}, {}, {"mode": "cubic"}, 20, 4)
    model.graph.node[0].name = "warp"
    path = tmp_path / "cubic.onnx"
    onnx.save(model, str(path))
    with pytest.raises(gc.GraphcError, match="warp.*cubic|cubic.*warp"):
        gc.load(path)


@pytest.mark.parametrize("spatial,align", [(2, 0), (2, 1), (3, 0), (3, 1)])
def test_affine_grid_matches_onnxruntime(spatial, align, tmp_path):
    rng = np.random.default_rng(5)
    theta = rng.standard_normal((2, spatial, spatial + 1)).astype(np.float32)
    size = np.array([2, 3, 4, 5] if spatial == 2 else [2, 3, 4, 5, 6], np.int64)
    model = _model("AffineGrid", {"theta": theta}, {"size": size}, {"align_corners": align}, 20, spatial + 2)
    _compare_with_ort(model, {"theta": theta}, tmp_path)


SCATTER_FORMS = [("none", 0, 16), ("none", 1, 11), ("add", -1, 16), ("mul", 1, 16), ("max", 0, 18),
                 ("min", -2, 18)]


@pytest.mark.parametrize("reduction,axis,opset", SCATTER_FORMS)
def test_scatter_elements_matches_onnxruntime(reduction, axis, opset, tmp_path):
    rng = np.random.default_rng(3)
    data = rng.standard_normal((4, 5)).astype(np.float32)
    size = data.shape[axis]
    if reduction == "none":  # distinct targets along the axis (duplicates: which write wins is unspecified)
        index = np.stack([rng.permutation(size)[:3] for _ in range(4 if axis % 2 else 5)])
        index = index if axis % 2 else index.T
    else:
        index = rng.integers(-size, size, (3, 5) if axis % 2 == 0 else (4, 3))
    updates = rng.standard_normal(index.shape).astype(np.float32)
    attrs = {"axis": axis} if reduction == "none" else {"axis": axis, "reduction": reduction}
    model = _model("ScatterElements", {"data": data}, {"indices": index.astype(np.int64), "updates": updates},
                   attrs, opset, 2)
    _compare_with_ort(model, {"data": data}, tmp_path)


def test_scatter_elements_out_of_range_index_is_refused(tmp_path):
    data = np.zeros((2, 3), np.float32)
    model = _model("ScatterElements", {"data": data}, {"indices": np.array([[3]], np.int64),
                                                        "updates": np.ones((1, 1), np.float32)}, {"axis": 1}, 16, 2)
    path = tmp_path / "bad.onnx"
    onnx.save(model, str(path))
    with pytest.raises(gc.GraphcError, match="out of range"):
        gc.load(path)(data)


def test_max_unpool_export_round_trip(tmp_path):
    """graphc writes max_unpool2d as ScatterElements (graphc/onnx/vision_export.py): the file
    runs in onnxruntime and, with its batch pinned, loads back, both matching graphc's eager output."""
    from graphc import nn

    class Unpool(nn.Module):
        def __init__(self):
            super().__init__()
            self.pool = nn.MaxPool2d(2, stride=2, return_indices=True)
            self.unpool = nn.MaxUnpool2d(2, stride=2)

        def forward(self, x):
            y, idx = self.pool(x)
            return self.unpool(y * 2.0, idx)

    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 3, 6, 8)).astype(np.float32)
    model = Unpool()
    path = str(tmp_path / "m.onnx")
    gc.export(model, (x,), path)
    want = model(gc.tensor(x)).numpy()
    with pytest.raises(gc.GraphcError, match="MaxPool's Indices over a symbolic batch"):
        gc.load(path)  # the file's batch is symbolic: vision_readers' MaxPool needs it for ONNX's indices
    pinned = onnx.load(path)
    pinned.graph.input[0].type.tensor_type.shape.dim[0].dim_value = x.shape[0]  # a static batch of 2
    onnx.save(pinned, path)
    np.testing.assert_allclose(np.asarray(gc.load(path)(x)), want, rtol=1e-6, atol=1e-6)
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(path)
    got = session.run(None, {session.get_inputs()[0].name: x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
