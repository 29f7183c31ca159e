"""Sequences and optional values inside an imported graph (graphc/onnx/sequence_readers.py) and
the ai.onnx.ml readers (ml_readers.py) against onnx's reference:
built, edited and read back with known positions over a symbolic batch, split and concatenated
again; and the refusals: a sequence as a graph output, a sequence given to a tensor op."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import graphc as gc  # noqa: E402
from graphc.onnx.importer import import_model  # noqa: E402

_RNG = np.random.default_rng(11)


def _const(name, values):
    return helper.make_node("Constant", [], [name], value=helper.make_tensor(name, TensorProto.INT64, [], [values]))


def _model(nodes, inputs, outputs=("y",)):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                              [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outputs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _check(model, *arrays):
    feed = {i.name: a for i, a in zip(model.graph.input, arrays)}
    want = ReferenceEvaluator(model).run(None, feed)
    got = import_model(model)(*arrays)
    got = got if isinstance(got, (list, tuple)) else [got]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), w)  # no arithmetic: the same numbers, moved


def test_build_edit_and_read_a_sequence_over_a_symbolic_batch():
    nodes = [helper.make_node("SequenceConstruct", ["a", "b"], ["s0"]),
             _const("front", 0), _const("last", -1),
             helper.make_node("SequenceInsert", ["s0", "c", "front"], ["s1"]),  # c, a, b
             helper.make_node("SequenceErase", ["s1", "last"], ["s2"]),  # c, a
             helper.make_node("SequenceLength", ["s2"], ["n"]),
             helper.make_node("SequenceAt", ["s2", "last"], ["y"]),  # a
             helper.make_node("ConcatFromSequence", ["s2"], ["z"], axis=1, new_axis=1)]
    model = _model(nodes, [("a", ["N", 3]), ("b", ["N", 3]), ("c", ["N", 3])], ("y", "n", "z"))
    for batch in (1, 4):
        _check(model, *(_RNG.standard_normal((batch, 3)).astype(np.float32) for _ in range(3)))


@pytest.mark.parametrize("split,keepdims", [(None, 0), (None, 1), (2, 1), ([1, 3, 1], 1)])
def test_split_to_sequence_then_concatenate(split, keepdims):
    nodes, inputs = [], ["x"]
    if split is not None:
        shape = [] if isinstance(split, int) else [len(split)]
        nodes.append(helper.make_node("Constant", [], ["split"], value=helper.make_tensor(
            "split", TensorProto.INT64, shape, [split] if isinstance(split, int) else split)))
        inputs.append("split")
    nodes += [helper.make_node("SplitToSequence", inputs, ["s"], axis=1, keepdims=keepdims),
              helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=1, new_axis=int(not keepdims))]
    _check(_model(nodes, [("x", ["N", 5, 2])]), _RNG.standard_normal((3, 5, 2)).astype(np.float32))


def test_a_sequence_output_is_refused_by_name():
    model = _model([helper.make_node("SequenceConstruct", ["a"], ["y"])], [("a", [2])])
    with pytest.raises(gc.GraphcError, match="graph output 'y' is a sequence"):
        import_model(model)


def test_a_sequence_given_to_a_tensor_op_is_refused_by_name():
    nodes = [helper.make_node("SequenceConstruct", ["a"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    with pytest.raises(gc.GraphcError, match="'Relu' is given a sequence or an optional value"):
        import_model(_model(nodes, [("a", [2])]))


def test_optional_values_are_known_while_importing():
    nodes = [helper.make_node("Optional", ["a"], ["o"]), helper.make_node("OptionalHasElement", ["o"], ["has"]),
             helper.make_node("OptionalGetElement", ["o"], ["y"]), helper.make_node("Optional", [], ["none"],
                                                                              type=helper.make_tensor_type_proto(1, [2])),
             helper.make_node("OptionalHasElement", ["none"], ["has_none"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2]),
                               helper.make_tensor_value_info("has", TensorProto.BOOL, []),
                               helper.make_tensor_value_info("has_none", TensorProto.BOOL, [])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    a = _RNG.standard_normal((3, 2)).astype(np.float32)
    y, has, has_none = import_model(model)(a)
    # onnx's reference gives Optional(a) as the list [a] and OptionalGetElement returns that list
    # (shape (1, 3, 2)); the spec, onnxruntime and graphc give a itself
    ort = pytest.importorskip("onnxruntime")
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"a": a})
    np.testing.assert_array_equal(np.asarray(y), want[0])
    assert bool(has) is bool(want[1]) is True and bool(has_none) is bool(want[2]) is False


def _ml_model(op, attrs, x_type, shape, extra=()):
    node = helper.make_node(op, ["x", *(n for n, _ in extra)], ["y"], domain="ai.onnx.ml", **attrs)
    inits = [helper.make_tensor(n, TensorProto.INT64, [len(v)], v) for n, v in extra]
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", x_type, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.UNDEFINED, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("ai.onnx.ml", 3)])


def test_ml_binarizer_and_array_feature_extractor_on_a_symbolic_batch():
    x = _RNG.standard_normal((4, 5)).astype(np.float32)
    _check(_ml_model("Binarizer", {"threshold": 0.25}, TensorProto.FLOAT, ["N", 5]), x)
    _check(_ml_model("ArrayFeatureExtractor", {}, TensorProto.FLOAT, ["N", 5], [("i", [4, 0, -1])]), x)
