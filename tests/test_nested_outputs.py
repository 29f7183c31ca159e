"""Nested outputs (``LSTM``'s ``(output, (h_n, c_n))``, dicts, ``None`` inside) come back from a
compiled plan as the traced function returned them, also from a saved plan; a plan file whose
output tree is malformed is refused at load."""
from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc import nn

from plan_edit import rewrite_body


def test_an_lstm_compiles_and_returns_its_nested_states(tmp_path):
    gc.manual_seed(0)
    lstm = nn.LSTM(3, 4, batch_first=True)
    x = np.random.default_rng(0).standard_normal((2, 5, 3)).astype(np.float32)
    plan = gc.compile(lstm, (x,))
    out, (h, c) = plan(x)
    want, (h_want, c_want) = lstm(gc.tensor(x))
    for got, ref in ((out, want), (h, h_want), (c, c_want)):
        np.testing.assert_array_equal(got, ref.numpy())  # the same kernels in the same order
    plan.save(tmp_path / "lstm.graphc")
    out2, (h2, c2) = gc.load(tmp_path / "lstm.graphc")(x)
    np.testing.assert_array_equal(c2, c_want.numpy())


def test_dicts_and_none_keep_their_places():
    plan = gc.compile(lambda x: {"double": x * 2.0, "pair": (x, None)}, (np.ones(3, np.float32),))
    result = plan(np.ones(3, np.float32))
    assert list(result) == ["double", "pair"] and result["pair"][1] is None
    assert result["double"].tolist() == [2.0] * 3


@pytest.mark.parametrize("tree", [[0, [5]], ["dict", ["a"], []], [[[[[[[[[[[[[[[[[[0]]]]]]]]]]]]]]]]]], "x", [-1]])
def test_a_malformed_output_tree_in_a_plan_file_is_refused(tmp_path, tree):
    plan = gc.compile(lambda x: (x * 2.0, (x, x + 1.0)), (np.ones(3, np.float32),))
    path = tmp_path / "p.graphc"
    plan.save(path)

    def edit(body):
        body["graph"]["meta"]["output_tree"] = tree
    rewrite_body(path, edit)
    with pytest.raises(gc.PlanFormatError, match="output_tree"):
        gc.load(path)


def test_tuple_inputs_are_one_plan_input_per_tensor_and_checked_at_the_call():
    plan = gc.compile(lambda x, pair: x * pair[0] + pair[1], (np.ones(3, np.float32), (np.ones(3, np.float32),
                                                                                         np.zeros(3, np.float32))))
    assert [v.name for v in plan.graph.inputs] == ["x", "pair_0", "pair_1"]
    assert plan(np.ones(3, np.float32), (np.full(3, 2.0, np.float32), np.ones(3, np.float32))).tolist() == [3.0] * 3
    with pytest.raises(gc.ShapeError, match=r"input 1: expected a tuple of 2, got a ndarray"):
        plan(np.ones(3, np.float32), np.ones(3, np.float32))


def test_a_product_of_symbols_can_be_declared_for_flattened_targets():
    plan = gc.compile(lambda x, y: (x.reshape(-1) * y), (np.ones((3, 2), np.float32), np.ones(6, np.float32)),
                      dynamic_dims={"x": {0: "T", 1: "N"}, "y": {0: "T*N"}})
    assert [str(v.type) for v in plan.graph.inputs] == ["f32[T,N]", "f32[N*T]"]
    assert plan(np.ones((4, 5), np.float32), np.full(20, 2.0, np.float32)).shape == (20,)
    with pytest.raises(gc.GraphcError, match="no input has alone"):
        gc.compile(lambda y: y * 2.0, (np.ones(6, np.float32),), dynamic_dims={"y": {0: "T*N"}})
