"""Every ONNX op graphc imports against onnx's reference evaluator (``onnx.reference``) on the
inputs float32 tables miss: integers, bools, float64, negative axes, empty tensors and 0-d
tensors. Values and dtypes must both agree (issue 29 item 6: integer Div computed as true
division, Flatten with a negative axis, int64 Pow and ReduceMax over an empty axis were
silent wrong answers or errors).

Each case runs twice: with its data inputs as graph inputs (the plan's kernels compute) and
as initializers (the importer computes on known arrays, as it does for shape arithmetic, and
the plan returns a folded constant). Inputs that ONNX requires to be known (shapes, axes)
are initializers in both.

Tolerance for floats: 1e-6 of the output's scale. Both sides compute in numpy at the input's
precision, through different formulas for a few ops (the evaluator's Gelu, LayerNormalization);
integers and bools are compared exactly.
"""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc

onnx = pytest.importorskip("onnx", reason="the onnx extra is part of the test extra; pip install 'graphc[onnx]'")
from onnx import helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from onnx_edge_cases import CASES, KNOWN  # noqa: E402

RTOL = 1e-6  # module docstring


def build(case, folded: bool):
    """The one-node model of ``case`` and the feed for its graph inputs."""
    names, inits, graph_inputs, feed = [], [], [], {}
    for i, value in enumerate(case.inputs):
        if value is None:
            names.append("")
            continue
        name = f"in{i}"
        names.append(name)
        value = np.asarray(value)
        if folded or i in case.static:
            inits.append(numpy_helper.from_array(value, name))
        else:
            elem = helper.np_dtype_to_tensor_dtype(value.dtype)
            graph_inputs.append(helper.make_tensor_value_info(name, elem, list(value.shape)))
            feed[name] = value
    outputs = [f"y{k}" for k in range(case.outputs)]
    attrs = {k: numpy_helper.from_array(v) if isinstance(v, np.ndarray) else v for k, v in case.attrs.items()}
    node = helper.make_node(case.op, names, outputs, name=f"the_{case.op}", **attrs)
    ys = [helper.make_tensor_value_info(name, onnx.TensorProto.UNDEFINED, None) for name in outputs]
    graph = helper.make_graph([node], "case", graph_inputs, ys, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", case.opset)]), feed


def assert_same(got, want, label: str) -> None:
    got = np.asarray(got)
    assert got.dtype == want.dtype, f"{label}: dtype {got.dtype}, the reference gives {want.dtype}"
    assert got.shape == want.shape, f"{label}: shape {got.shape}, the reference gives {want.shape}"
    if want.dtype.kind == "f":
        scale = max(1.0, float(np.nanmax(np.abs(np.where(np.isinf(want), 0, want)), initial=0)))
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=RTOL * scale, err_msg=label)
    else:
        np.testing.assert_array_equal(got, want, err_msg=label)


@pytest.mark.parametrize("folded", [False, True], ids=["graph", "folded"])
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NaN from log/sqrt/mean of nothing, on both sides
def test_op_matches_the_reference_in_values_and_dtype(case, folded, tmp_path):
    model, feed = build(case, folded)
    want = ReferenceEvaluator(model).run(None, feed)
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    plan = gc.load(path)
    got = plan(**feed)
    got = list(got) if isinstance(got, tuple) else [got]
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        assert_same(g, np.asarray(w), f"{case.id} output {k}")


def test_every_reader_has_an_edge_case():
    from graphc.onnx.readers import READERS

    assert set(READERS) - {c.op for c in CASES} - KNOWN == set()


@pytest.mark.parametrize("fill", [np.int64(2**62 + 1), np.int64(-(2**53) - 1), np.float32(-0.75), np.bool_(True)])
def test_constant_of_a_batch_dependent_shape_keeps_its_exact_value(fill, tmp_path):
    """ConstantOfShape of ``Shape(x)``: the shape holds the batch dim, so the plan builds the
    tensor at run time; an int64 fill past 2**53 must not pass through a float."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("ConstantOfShape", ["s"], ["y"], value=numpy_helper.from_array(np.array([fill])))]
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 2])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.UNDEFINED, None)
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    (tmp_path / "m.onnx").write_bytes(model.SerializeToString())
    plan = gc.load(tmp_path / "m.onnx")
    for batch in (1, 3):
        feed = {"x": np.zeros((batch, 2), np.float32)}
        assert_same(plan(**feed), ReferenceEvaluator(model).run(None, feed)[0], f"fill {fill!r} at batch {batch}")
