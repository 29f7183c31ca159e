"""CausalConvWithState and LinearAttention (graphc/onnx/state_readers.py) against onnx's
reference on what its backend cases leave out: a symbolic batch, a carried state with grouped
KV heads and per-key-dim decay, float64 inputs; and the refusal of a symbolic sequence length."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import graphc as gc  # noqa: E402
from graphc.onnx.importer import import_model  # noqa: E402

_RNG = np.random.default_rng(27)


def _model(op, inputs, outputs, attrs):
    node = helper.make_node(op, [n for n, _, _ in inputs], outputs, **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outputs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 27)])


def _check(model, arrays, rtol):
    feed = {i.name: a for i, a in zip(model.graph.input, arrays)}
    want = ReferenceEvaluator(model).run(None, feed)
    got = import_model(model)(*arrays)
    for g, w in zip(got, want):
        g = np.asarray(g)
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("batch", [1, 3])
def test_causal_conv_with_a_carried_window_on_a_symbolic_batch(batch):
    f = TensorProto.DOUBLE
    model = _model("CausalConvWithState", [("x", f, ["N", 4, 5]), ("w", f, [4, 1, 3]), ("b", f, [4]),
                                           ("s", f, ["N", 4, 2])], ["y", "state"], {"activation": "silu"})
    arrays = [_RNG.standard_normal((batch, 4, 5)), _RNG.standard_normal((4, 1, 3)), _RNG.standard_normal(4),
              _RNG.standard_normal((batch, 4, 2))]
    _check(model, arrays, 1e-6)  # the reference (and graphc) take SiLU in float32 even of float64 inputs


@pytest.mark.parametrize("rule", ["linear", "gated", "delta", "gated_delta"])
def test_linear_attention_with_grouped_heads_and_a_past_state(rule):
    f = TensorProto.FLOAT
    heads_q, heads_kv, d_k, d_v, steps = 4, 2, 3, 2, 4
    inputs = [("q", f, ["N", steps, heads_q * d_k]), ("k", f, ["N", steps, heads_kv * d_k]),
              ("v", f, ["N", steps, heads_kv * d_v]), ("s", f, ["N", heads_kv, d_k, d_v])]
    arrays = [_RNG.standard_normal((2, steps, w)).astype(np.float32) * 0.5 for w in (heads_q * d_k, heads_kv * d_k,
                                                                                     heads_kv * d_v)]
    arrays.append(_RNG.standard_normal((2, heads_kv, d_k, d_v)).astype(np.float32))
    names = ["q", "k", "v", "s"]
    if rule in ("gated", "gated_delta"):
        inputs.append(("g", f, ["N", steps, heads_kv * d_k]))  # per key dim
        arrays.append(-_RNG.uniform(0.0, 1.0, (2, steps, heads_kv * d_k)).astype(np.float32))
        names.append("g")
    else:
        names.append("")
    if rule in ("delta", "gated_delta"):
        inputs.append(("beta", f, ["N", steps, heads_kv]))
        arrays.append(_RNG.uniform(0.0, 1.0, (2, steps, heads_kv)).astype(np.float32))
        names.append("beta")
    node = helper.make_node("LinearAttention", names, ["y", "state"], q_num_heads=heads_q, kv_num_heads=heads_kv,
                            update_rule=rule)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in ("y", "state")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 27)])
    _check(model, arrays, 1e-5)  # float32 recurrences of 4 steps over sums of 3: a few roundings each


def test_linear_attention_over_a_symbolic_sequence_is_refused_by_name():
    f = TensorProto.FLOAT
    model = _model("LinearAttention", [("q", f, [1, "T", 4]), ("k", f, [1, "T", 4]), ("v", f, [1, "T", 4])],
                   ["y"], {"q_num_heads": 2, "kv_num_heads": 2, "update_rule": "linear"})
    with pytest.raises(gc.GraphcError, match="symbolic sequence length"):
        import_model(model)
