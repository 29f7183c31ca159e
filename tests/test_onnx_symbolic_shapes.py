"""Shape arithmetic on a symbolic batch while importing (graphc/onnx/symbolic_shapes.py): the
patterns exporters write around a dynamic batch dim import as one plan for every batch size, and
what depends on the batch's size is refused clearly. Checked against onnx's reference evaluator
at several batch sizes (exact: only data movement and a few float32 adds)."""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc

onnx = pytest.importorskip("onnx", reason="the onnx extra is part of the test extra; pip install 'graphc[onnx]'")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

I64 = TensorProto.INT64


def const(name, values):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(values, np.int64)))


def model(nodes, inits, x_shape, out="y"):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def vit_class_token():
    """torchvision ViT's TorchScript export: the class token expanded to [N, -1, -1] by way of
    Where(Equal(shape, -1), 1, shape), then concatenated to the patch tokens."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]), const("zero", 0),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0), const("ax", [0]),
             helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]), const("rest", [-1, -1]),
             helper.make_node("Concat", ["n1", "rest"], ["shape"], axis=0), const("minus", [-1, -1, -1]),
             helper.make_node("Equal", ["shape", "minus"], ["eq"]), const("ones", [1, 1, 1]),
             helper.make_node("Where", ["eq", "ones", "shape"], ["target"]),
             helper.make_node("Expand", ["token", "target"], ["tokens"]),
             helper.make_node("Concat", ["tokens", "x"], ["y"], axis=1)]
    return model(nodes, {"token": np.arange(4, dtype=np.float32).reshape(1, 1, 4)}, ["N", 3, 4])


def window_partition():
    """Swin's export: the batch multiplied by the number of windows, and divided back."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]), const("zero", 0),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0), const("four", 4),
             helper.make_node("Mul", ["n", "four"], ["nw"]), const("ax", [0]),
             helper.make_node("Unsqueeze", ["nw", "ax"], ["nw1"]), const("win", [2, 3]),
             helper.make_node("Concat", ["nw1", "win"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["windows"]),
             helper.make_node("Div", ["nw", "four"], ["back"]),
             helper.make_node("Unsqueeze", ["back", "ax"], ["back1"]), const("flat", [-1]),
             helper.make_node("Concat", ["back1", "flat"], ["shape2"], axis=0),
             helper.make_node("Reshape", ["windows", "shape2"], ["y"])]
    return model(nodes, {}, ["N", 4, 2, 3])


@pytest.mark.parametrize("make", [vit_class_token, window_partition], ids=["vit_class_token", "swin_windows"])
def test_exported_batch_arithmetic_is_one_plan_for_every_batch(make, tmp_path):
    proto = make()
    path = tmp_path / "m.onnx"
    path.write_bytes(proto.SerializeToString())
    plan = gc.load(path)
    assert plan.graph.inputs[0].type.shape[0] == "N"  # no specialization on the batch size
    reference = ReferenceEvaluator(proto)
    shape = [d.dim_value for d in proto.graph.input[0].type.tensor_type.shape.dim][1:]
    for batch in (1, 2, 5):
        x = np.random.default_rng(batch).standard_normal((batch, *shape)).astype(np.float32)
        np.testing.assert_array_equal(plan(x), reference.run(None, {"x": x})[0])


def test_arithmetic_that_depends_on_the_batch_size_is_refused(tmp_path):
    nodes = [helper.make_node("Shape", ["x"], ["s"]), const("one", [1, 0]),
             helper.make_node("Add", ["s", "one"], ["grown"]),
             helper.make_node("Reshape", ["x", "grown"], ["y"])]
    path = tmp_path / "m.onnx"
    path.write_bytes(model(nodes, {}, ["N", 4]).SerializeToString())
    with pytest.raises(gc.GraphcError, match="add on a shape that holds the batch dim"):
        gc.load(path)
