"""ONNX import of the losses (graphc/onnx/loss_readers.py), the normalizations and RotaryEmbedding
(graphc/onnx/norm_readers.py) and Dropout's mask, on what onnx's backend suite does not cover:
a symbolic batch dim, int32 targets, float16 and float64 inputs, negative axes, partial and
interleaved rotations, GroupNormalization-18's per-group scale. Each one-node model is checked
against onnx's ReferenceEvaluator, or onnxruntime where the reference departs from the ONNX spec
(NegativeLogLikelihoodLoss's 'mean' with ignore_index=-1, LpNormalization's p=1, the float32 Mean of a
float16 or float64 LayerNormalization). (onnx's own cases run in tests/test_onnx_backend_suite.py.)
"""
from __future__ import annotations

import numpy as np
import pytest

from graphc.ir.errors import GraphcError

onnx = pytest.importorskip("onnx")
from onnx import helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from graphc.onnx.importer import import_model  # noqa: E402

_CODES = {np.dtype(np.float32): 1, np.dtype(np.float16): 10, np.dtype(np.float64): 11,
          np.dtype(np.int32): 6, np.dtype(np.int64): 7}


def _model(op, feeds: dict, outputs: list, opset: int, batch=("x",), **attrs):
    """A one-node model over ``feeds`` (name -> array); dim 0 of the inputs named in ``batch`` is
    the symbolic "N"."""
    infos = [helper.make_tensor_value_info(k, _CODES[v.dtype], (["N"] if k in batch else list(v.shape[:1]))
                                           + list(v.shape[1:])) for k, v in feeds.items()]
    node = helper.make_node(op, list(feeds), outputs, **attrs)
    graph = helper.make_graph([node], "g", infos, [helper.make_empty_tensor_value_info(o) for o in outputs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _check(model, feeds: dict, reference: str = "onnx", rtol=1e-5, atol=1e-6):
    """The imported plan against the reference, at the feeds' batch size and at one more."""
    plan = import_model(model)
    batched = {i.name for i in model.graph.input if i.type.tensor_type.shape.dim[0].dim_param == "N"}
    _compare(plan, model, feeds, reference, rtol, atol)
    if batched:
        _compare(plan, model, {k: np.concatenate([v, v[:1]]) if k in batched else v for k, v in feeds.items()},
                 reference, rtol, atol)


def _compare(plan, model, feeds: dict, reference: str, rtol, atol):
    if reference == "onnx":
        want = ReferenceEvaluator(model).run(None, feeds)
    else:
        ort = pytest.importorskip("onnxruntime")
        want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
    got = plan(*feeds.values())
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g = np.asarray(g)
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol)


RNG = np.random.default_rng(5)


def _normal(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# ---- losses ------------------------------------------------------------------------------------
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_nll_loss_int32_targets_weights_ignore_index_batch_dim(reduction):
    x = _normal(3, 4, 2)
    target = np.array([[0, 3], [2, 2], [1, 0]], np.int32)
    weight = np.array([0.5, 1.0, 2.0, 0.25], np.float32)
    feeds = {"x": x, "t": target, "w": weight}
    model = _model("NegativeLogLikelihoodLoss", feeds, ["y"], 22, ("x", "t"), reduction=reduction, ignore_index=2)
    _check(model, feeds)


def test_nll_loss_mean_ignoring_minus_one_divides_by_the_kept_targets():
    # onnx's reference divides by every target here (its ignore_index != -1 slip); onnxruntime
    # and the spec by the kept ones
    x, target = _normal(4, 3), np.array([1, -1, 2, -1], np.int64)
    feeds = {"x": x, "t": target}
    _check(_model("NegativeLogLikelihoodLoss", feeds, ["y"], 13, ("x", "t"), ignore_index=-1), feeds, reference="ort")


@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_softmax_cross_entropy_float64_k_dim_with_log_prob(reduction):
    x, target = _normal(2, 5, 3, 2, dtype=np.float64), RNG.integers(0, 5, (2, 3, 2)).astype(np.int64)
    weight = RNG.uniform(0.5, 2.0, 5)
    feeds = {"x": x, "t": target, "w": weight}
    _check(_model("SoftmaxCrossEntropyLoss", feeds, ["y", "logp"], 13, ("x", "t"), reduction=reduction), feeds)


# ---- normalizations ----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype,tol", [(np.float16, 2e-3), (np.float64, 1e-6)])
def test_layer_norm_gives_float32_mean_and_inv_std_dev(dtype, tol):
    x, scale, bias = _normal(2, 3, 4, dtype=dtype), _normal(3, 4, dtype=dtype), _normal(4, dtype=dtype)
    feeds = {"x": x, "s": scale, "b": bias}
    _check(_model("LayerNormalization", feeds, ["y", "mean", "inv"], 17, axis=-2), feeds, reference="ort",
           rtol=tol, atol=tol)


def test_layer_norm_axis_0_normalizes_everything():
    feeds = {"x": _normal(2, 3), "s": _normal(2, 3)}
    _check(_model("LayerNormalization", feeds, ["y", "mean", "inv"], 17, (), axis=0), feeds)


def test_rms_norm_negative_axis_and_batch_dim():
    feeds = {"x": _normal(3, 2, 5), "s": _normal(5)}
    _check(_model("RMSNormalization", feeds, ["y"], 23, axis=-2, epsilon=1e-3), feeds)


@pytest.mark.parametrize("opset", [18, 21])
def test_group_norm_per_group_scale_at_18_per_channel_at_21(opset):
    per = 2 if opset == 18 else 6
    feeds = {"x": _normal(2, 6, 3, 2), "s": _normal(per), "b": _normal(per)}
    _check(_model("GroupNormalization", feeds, ["y"], opset, num_groups=2), feeds, rtol=1e-4, atol=1e-5)


def test_lp_norm_l1_of_negative_values_and_zero_rows():
    x = _normal(3, 4)
    x[1] = 0.0  # a zero norm gives 0
    feeds = {"x": x}
    _check(_model("LpNormalization", feeds, ["y"], 22, p=1, axis=-1), feeds, reference="ort")


def test_lp_norm_l2_axis_0_float64():
    feeds = {"x": _normal(3, 4, dtype=np.float64)}
    _check(_model("LpNormalization", feeds, ["y"], 22, (), p=2, axis=0), feeds)


def test_mean_variance_norm_custom_axes():
    feeds = {"x": _normal(2, 3, 4)}
    _check(_model("MeanVarianceNormalization", feeds, ["y"], 13, axes=[-1, 1]), feeds, rtol=1e-4, atol=1e-5)


# ---- RotaryEmbedding, Dropout's mask --------------------------------------------------------------
@pytest.mark.parametrize("interleaved", [0, 1])
def test_rotary_embedding_3d_partial_with_position_ids(interleaved):
    positions = np.array([[3, 0, 7], [1, 1, 2]], np.int64)
    feeds = {"x": _normal(2, 3, 2 * 8), "cos": _normal(10, 3), "sin": _normal(10, 3), "pos": positions}
    _check(_model("RotaryEmbedding", feeds, ["y"], 23, ("x", "pos"), num_heads=2, rotary_embedding_dim=6,
                  interleaved=interleaved), feeds)


def test_rotary_embedding_4d_without_position_ids():
    feeds = {"x": _normal(2, 3, 4, 6), "cos": _normal(2, 4, 3), "sin": _normal(2, 4, 3)}
    _check(_model("RotaryEmbedding", feeds, ["y"], 23, ("x", "cos", "sin"), interleaved=1), feeds)


def test_dropout_mask_is_all_true_with_a_batch_dim():
    feeds = {"x": _normal(3, 2), "ratio": np.array(0.3, np.float32)}
    model = _model("Dropout", feeds, ["y", "mask"], 13)
    out, mask = import_model(model)(*feeds.values())
    np.testing.assert_array_equal(np.asarray(out), feeds["x"])
    assert np.asarray(mask).dtype == np.bool_ and np.asarray(mask).all() and np.asarray(mask).shape == (3, 2)


# ---- refusals ------------------------------------------------------------------------------------
@pytest.mark.parametrize("op,feeds,attrs,words", [
    ("LayerNormalization", {"x": np.zeros((2, 3), np.float32), "s": np.ones(3, np.float32)}, {"stash_type": 0},
     "stash_type 0"),
    ("LpNormalization", {"x": np.zeros((2, 3), np.float32)}, {"p": 3}, "p=3"),
    ("MeanVarianceNormalization", {"x": np.zeros((2, 3), np.float64)}, {"axes": [1]}, "of float64"),
    ("SoftmaxCrossEntropyLoss", {"x": np.zeros((2, 3), np.float32), "t": np.zeros(2, np.int64)},
     {"reduction": "max"}, "reduction 'max'"),
])
def test_unsupported_forms_are_refused_by_name(op, feeds, attrs, words):
    with pytest.raises(GraphcError, match=words):
        import_model(_model(op, feeds, ["y"], 23, **attrs))
