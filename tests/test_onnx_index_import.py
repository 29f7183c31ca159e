"""ONNX import of the indexing family (graphc/onnx/index_readers.py, index_shapes.py): one-node
models checked against onnx's reference implementation on inputs onnx's backend suite lacks
(a symbolic batch dim, integer dtypes, negative axes and indices, run-time index operands), and
refusals. (onnx's own cases run in tests/test_onnx_backend_suite.py.)"""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc

onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from graphc.onnx.importer import import_model  # noqa: E402

RNG = np.random.default_rng(7)


def _model(op, inputs: dict, attrs: dict | None = None, *, constants: dict | None = None, outputs=1, opset=21,
           batch=()):
    """A one-node model; ``inputs`` name -> array (graph inputs, the dims in ``batch`` named N),
    ``constants`` name -> array (initializers); an input named '' is an omitted optional one."""
    constants = constants or {}
    infos = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype),
                                           ["N" if (k, d) in batch else s for d, s in enumerate(v.shape)])
             for k, v in inputs.items() if k]
    names = [f"y{i}" for i in range(outputs)]
    node = helper.make_node(op, list(inputs) + list(constants), names, **(attrs or {}))
    graph = helper.make_graph([node], "g", infos, [helper.make_tensor_value_info(n, 0, None) for n in names],
                              [numpy_helper.from_array(v, k) for k, v in constants.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _check(model, feeds: dict, ort=False):
    """graphc against onnx's reference (onnxruntime with ``ort``: the reference's Unique with
    sorted=0 reads a multi-dim input along axis 0 where ONNX flattens it)."""
    if ort:
        runtime = pytest.importorskip("onnxruntime")
        model = onnx.shape_inference.infer_shapes(model)  # onnxruntime wants the outputs' types
        for out, info in zip(model.graph.output, model.graph.value_info):
            out.type.CopyFrom(info.type)
        want = runtime.InferenceSession(model.SerializeToString()).run(None, feeds)
    else:
        want = ReferenceEvaluator(model).run(None, feeds)
    got = import_model(model)(*[v for k, v in feeds.items()])
    got = got if isinstance(got, (list, tuple)) else [got]
    for g, w in zip(got, want):
        g = np.asarray(g)
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


def test_gather_by_graph_indices_over_a_symbolic_batch():
    x = RNG.standard_normal((3, 5, 4)).astype(np.float32)
    idx = np.array([[4, -1], [0, -5]], np.int32)
    _check(_model("Gather", {"x": x, "i": idx}, {"axis": -2}, batch={("x", 0)}), {"x": x, "i": idx})


def test_gather_from_a_known_3d_tensor_by_run_time_indices():
    table = RNG.standard_normal((6, 3, 2)).astype(np.float32)
    idx = np.array([[-1, 2], [0, -6]], np.int64)
    _check(_model("Gather", {"i": idx}, {"axis": 0}, constants={"t": table}), {"i": idx})


def test_gather_elements_int32_indices_negative_axis():
    x = RNG.integers(-50, 50, (2, 4, 3)).astype(np.int16)
    idx = RNG.integers(-4, 4, (2, 2, 3)).astype(np.int32)
    _check(_model("GatherElements", {"x": x, "i": idx}, {"axis": -2}, batch={("x", 0), ("i", 0)}),
           {"x": x, "i": idx})


@pytest.mark.parametrize("batch_dims,index_shape", [(0, (2, 2)), (1, (3, 2, 1)), (2, (3, 4, 1))])
def test_gather_nd(batch_dims, index_shape):
    x = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    limits = x.shape[batch_dims:batch_dims + index_shape[-1]]
    idx = np.stack([RNG.integers(-n, n, index_shape[:-1]) for n in limits], -1).astype(np.int64)
    _check(_model("GatherND", {"x": x, "i": idx}, {"batch_dims": batch_dims}), {"x": x, "i": idx})


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_nd_integers_with_a_symbolic_trailing_dim(reduction):
    data = RNG.integers(-9, 9, (4, 3, 2)).astype(np.int32)
    idx = np.array([[[0, 1]], [[-1, 2]], [[0, 1] if reduction != "none" else [2, 0]]], np.int64)
    upd = RNG.integers(-9, 9, (3, 1, 2)).astype(np.int32)
    model = _model("ScatterND", {"d": data, "i": idx, "u": upd}, {"reduction": reduction},
                   batch={("d", 2), ("u", 2)})
    _check(model, {"d": data, "i": idx, "u": upd})


@pytest.mark.parametrize("reduction", ["none", "mul"])
def test_scatter_and_gather_nd_of_known_arrays_fold_at_import(reduction):
    """Swin's attention mask is slice writes (ScatterND) into a known zeros: computed while importing."""
    data = np.zeros((4, 6), np.float32)
    idx = np.array([[[1, 2], [-1, 0]], [[0, 5], [1, 2 if reduction == "mul" else 3]]], np.int64)
    upd = RNG.standard_normal((2, 2)).astype(np.float32)
    model = _model("ScatterND", {}, {"reduction": reduction}, constants={"d": data, "i": idx, "u": upd})
    assert not import_model(model).graph.nodes
    _check(model, {})
    x = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    idx = np.array([[[1, -1]], [[0, 2]], [[3, 4]]])
    _check(_model("GatherND", {}, {"batch_dims": 1}, constants={"x": x, "i": idx}), {})


@pytest.mark.parametrize("mode", ["linear", "circular"])
def test_tensor_scatter_with_run_time_write_indices(mode):
    cache = RNG.standard_normal((2, 3, 5, 4)).astype(np.float32)
    new = RNG.standard_normal((2, 3, 2, 4)).astype(np.float32)
    at = np.array([3 if mode == "linear" else 4, 0], np.int64)
    model = _model("TensorScatter", {"c": cache, "u": new, "w": at}, {"mode": mode, "axis": 2}, opset=24)
    _check(model, {"c": cache, "u": new, "w": at})


def test_one_hot_of_float_indices_integer_values_leading_axis():
    idx = np.array([[1.0, -1.0, 7.0], [0.0, 2.0, -4.0]], np.float32)
    _check(_model("OneHot", {"i": idx}, {"axis": 0}, constants={"d": np.array(4.0, np.float32),
                                                                "v": np.array([3, 9], np.int64)}), {"i": idx})


def test_reverse_sequence_batch_first_with_symbolic_batch():
    x = RNG.standard_normal((3, 4, 2)).astype(np.float32)
    lens = np.array([4, 0, 2], np.int64)
    model = _model("ReverseSequence", {"x": x, "l": lens}, {"batch_axis": 0, "time_axis": 1},
                   batch={("x", 0), ("l", 0)})
    _check(model, {"x": x, "l": lens})


def test_compress_by_a_run_time_condition_specializes_the_plan():
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    model = _model("Compress", {"x": x, "c": np.zeros(3, bool)}, {"axis": -1})
    plan = import_model(model)
    for cond in (np.array([True, False, True]), np.array([False, True, True])):
        want = ReferenceEvaluator(model).run(None, {"x": x, "c": cond})[0]
        np.testing.assert_array_equal(plan(x, cond), want)
    assert plan.value_inputs == ["c"]


@pytest.mark.parametrize("attrs", [{"sorted": 1, "axis": 1}, {"sorted": 0}, {"sorted": 1}])
def test_unique_and_nonzero_of_run_time_values(attrs):
    x = np.array([[3, 1, 3, 1], [2, 0, 2, 0], [3, 1, 3, 1]], np.int64)
    _check(_model("Unique", {"x": x}, attrs, outputs=4), {"x": x}, ort=not attrs["sorted"])
    _check(_model("NonZero", {"x": x}), {"x": x})


def test_tile_trilu_eyelike_center_crop_pad_over_a_symbolic_batch():
    x = RNG.integers(0, 9, (2, 3, 5)).astype(np.int64)
    feeds, batch = {"x": x}, {("x", 0)}
    _check(_model("Tile", {"x": x}, constants={"r": np.array([2, 1, 3], np.int64)}, batch=batch), feeds)
    _check(_model("Trilu", {"x": x}, {"upper": 0}, constants={"k": np.array(-1, np.int64)}, batch=batch), feeds)
    _check(_model("CenterCropPad", {"x": x}, {"axes": [-1, 1]}, constants={"s": np.array([2, 6], np.int64)},
                  batch=batch), feeds)
    m = RNG.standard_normal((3, 5)).astype(np.float32)
    _check(_model("EyeLike", {"m": m}, {"k": -1, "dtype": onnx.TensorProto.INT32}), {"m": m})


def test_split_into_uneven_parts_along_a_negative_axis():
    x = RNG.standard_normal((2, 10)).astype(np.float32)
    _check(_model("Split", {"x": x}, {"axis": -1, "num_outputs": 4}, outputs=4, opset=18, batch={("x", 0)}),
           {"x": x})


def test_refusals_name_what_is_not_supported():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(gc.GraphcError, match="ScatterND with reduction='sum'"):
        import_model(_model("ScatterND", {"x": x}, {"reduction": "sum"},
                            constants={"i": np.zeros((1, 1), np.int64), "u": np.zeros((1, 3), np.float32)}))
    with pytest.raises(gc.GraphcError, match="Split of a dim of 5 into 4 parts"):
        import_model(_model("Split", {"x": np.zeros((5,), np.float32)}, {"num_outputs": 4}, outputs=4, opset=18))
    with pytest.raises(gc.GraphcError, match="GatherND indexing the symbolic dim"):
        import_model(_model("GatherND", {"x": x}, constants={"i": np.zeros((1, 1), np.int64)}, batch={("x", 0)}))
