"""ONNX import of ``RNN``/``GRU``/``LSTM`` (as one scan per direction) and ``Attention``
(graphc/onnx/recurrent_import.py, attention_import.py, logic_readers.py): hand-built models
compared with onnxruntime, and PyTorch's exports. (onnx's own cases run in
tests/test_onnx_backend_suite.py.)

Tolerances (float32): onnxruntime runs MLAS's own tanh/sigmoid approximations and GEMMs, and
PyTorch its own kernels; through at most 9 recurrent steps (or two Transformer layers) they
differ by at most 1e-6 (measured): checked at 1e-5 of the output's scale.
"""
from __future__ import annotations


import numpy as np
import pytest

import graphc as gc

onnx = pytest.importorskip("onnx", reason="the onnx extra is part of the test extra; pip install 'graphc[onnx]'")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

RTOL = 1e-5  # module docstring


def close(got, want, what="", atol=None):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.shape, want.shape, got.dtype, want.dtype)
    finite = want[np.isfinite(want)]
    scale = max(1.0, float(np.abs(finite).max())) if finite.size else 1.0
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=RTOL,
                               atol=RTOL * scale if atol is None else atol, err_msg=what)


def outputs(result) -> list:
    return list(result) if isinstance(result, tuple) else [result]


# ---- hand-built models against onnxruntime -------------------------------------------------------
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def rnn_model(op: str, *, hidden=4, features=3, time=6, batch=3, direction="forward", layout=0, lens=None,
              peepholes=False, time_dim=None, **attrs):
    """An ``op`` node reading X and the initial states as graph inputs, W/R/B (and
    sequence_lens, P) as initializers; returns (model, feeds)."""
    rng = np.random.default_rng(len(op) + len(direction))  # the same weights in either layout
    dirs, g = (2 if direction == "bidirectional" else 1), GATES[op]
    weights = {"W": rng.normal(0, 0.5, (dirs, g * hidden, features)),
               "R": rng.normal(0, 0.5, (dirs, g * hidden, hidden)),
               "B": rng.normal(0, 0.3, (dirs, 2 * g * hidden))}
    if peepholes:
        weights["P"] = rng.normal(0, 0.5, (dirs, 3 * hidden))
    init = [numpy_helper.from_array(v.astype(np.float32), k) for k, v in weights.items()]
    if lens is not None:
        init.append(numpy_helper.from_array(np.asarray(lens, np.int32), "sequence_lens"))
    x_shape = [batch, time, features] if layout else [time, batch, features]
    state_shape = [batch, dirs, hidden] if layout else [dirs, batch, hidden]
    states = ["initial_h", "initial_c"] if op == "LSTM" else ["initial_h"]
    names = ["X", "W", "R", "B", "sequence_lens" if lens is not None else "", *states]
    if peepholes:
        names += ["P"]
    outs = ["Y", "Y_h", "Y_c"] if op == "LSTM" else ["Y", "Y_h"]
    node = helper.make_node(op, names, outs, hidden_size=hidden, direction=direction, layout=layout, **attrs)
    declared = list(x_shape)
    if time_dim:
        declared[1 if layout else 0] = time_dim
    graph = helper.make_graph(
        [node], "rnn", [helper.make_tensor_value_info("X", TensorProto.FLOAT, declared)] +
        [helper.make_tensor_value_info(s, TensorProto.FLOAT, state_shape) for s in states],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs], init)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    feeds = {"X": rng.normal(0, 1, x_shape).astype(np.float32),
             **{s: rng.normal(0, 0.5, state_shape).astype(np.float32) for s in states}}
    return model, feeds


def ort_run(model, feeds: dict) -> list:
    onnxruntime = pytest.importorskip("onnxruntime")
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def graphc_run(model, feeds: dict, tmp_path) -> tuple:
    path = tmp_path / "model.onnx"
    path.write_bytes(model.SerializeToString())
    plan = gc.load(path)
    return plan, outputs(plan(**feeds))


def _time_major(op: str, config: dict, feeds: dict) -> tuple:
    """onnxruntime runs only layout 0: the same node (same weights) time-major, with the
    batch-major inputs transposed to it."""
    if not config.get("layout", 0):
        return rnn_model(op, **config)[0], feeds
    twin, _ = rnn_model(op, **{**config, "layout": 0})
    return twin, {k: np.ascontiguousarray(np.swapaxes(v, 0, 1)) for k, v in feeds.items()}


RNN_CONFIGS = [
    ("RNN", dict(direction="bidirectional", lens=[6, 2, 4])),
    ("RNN", dict(direction="reverse", lens=[3, 6, 1], activations=["Relu"])),
    ("RNN", dict(layout=1, direction="bidirectional", lens=[5, 6, 2], clip=0.7)),
    ("GRU", dict(direction="bidirectional", lens=[6, 2, 4])),
    ("GRU", dict(direction="reverse", lens=[3, 6, 1], linear_before_reset=1)),
    ("GRU", dict(layout=1, direction="bidirectional", lens=[5, 6, 2], linear_before_reset=1, clip=1.5)),
    ("GRU", dict(activations=["HardSigmoid", "Softsign"], activation_alpha=[0.3], activation_beta=[0.4])),
    ("LSTM", dict(direction="bidirectional", lens=[6, 2, 4], peepholes=True)),
    ("LSTM", dict(direction="reverse", lens=[3, 6, 1], input_forget=1)),
    ("LSTM", dict(layout=1, direction="bidirectional", lens=[5, 6, 2], clip=0.9)),
    ("LSTM", dict(activations=["Sigmoid", "LeakyRelu", "ScaledTanh", "HardSigmoid", "Elu", "Softplus"],
                  activation_alpha=[0.2, 1.5, 0.3, 0.8], activation_beta=[0.6, 0.4], direction="bidirectional")),
    ("LSTM", dict(activations=["Affine", "ThresholdedRelu", "Tanh"], activation_alpha=[0.5, 0.1],
                  activation_beta=[0.5])),
]


@pytest.mark.parametrize("op, config", RNN_CONFIGS, ids=[f"{op}-{i}" for i, (op, _) in enumerate(RNN_CONFIGS)])
def test_recurrent_node_matches_onnxruntime(op, config, tmp_path):
    model, feeds = rnn_model(op, **config)
    plan, got = graphc_run(model, feeds, tmp_path)
    layout = config.get("layout", 0)
    twin, twin_feeds = _time_major(op, config, feeds)
    want = ort_run(twin, twin_feeds)
    if layout:  # back to batch-major: Y (T, D, N, H) -> (N, T, D, H), states (D, N, H) -> (N, D, H)
        want = [np.transpose(want[0], (2, 0, 1, 3))] + [np.swapaxes(s, 0, 1) for s in want[1:]]
    for k, (g, w) in enumerate(zip(got, want)):
        close(g, w, f"{op} output {k}")
    dirs = 2 if config.get("direction") == "bidirectional" else 1
    assert [n.op for n in plan.graph.nodes].count("scan") == dirs


def test_lengths_zero_the_outputs_past_each_sequence(tmp_path):
    """Y past a sequence's end is zero, Y_h is the state at its last element (read off Y)."""
    model, feeds = rnn_model("GRU", direction="bidirectional", lens=[6, 2, 4])
    _, (y, y_h) = graphc_run(model, feeds, tmp_path)
    assert np.all(y[2:, :, 1] == 0) and np.all(y[4:, :, 2] == 0) and np.any(y[:2, :, 1] != 0)
    np.testing.assert_array_equal(y_h[0, 1], y[1, 0, 1])  # forward: at t = len - 1
    np.testing.assert_array_equal(y_h[1, 1], y[0, 1, 1])  # reverse: at t = 0


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_symbolic_sequence_length_is_one_plan(op, tmp_path):
    """X declares its time dim as ``T``: one plan runs every length, its size the same."""
    model, _ = rnn_model(op, direction="bidirectional", time=2, lens=None, time_dim="T")
    path = tmp_path / "dynamic.onnx"
    path.write_bytes(model.SerializeToString())
    plan = gc.load(path)
    assert [n.op for n in plan.graph.nodes].count("scan") == 2
    for time in (2, 9):
        _, feeds = rnn_model(op, direction="bidirectional", time=time)
        for g, w in zip(outputs(plan(**feeds)), ort_run(model, feeds)):
            close(g, w, f"{op} at T={time}")


def test_symbolic_sequence_length_with_lengths(tmp_path):
    """A reverse scan over a symbolic length starts at T - 1 read at run time."""
    model, _ = rnn_model("LSTM", direction="bidirectional", time=4, batch=3, lens=[4, 1, 3], time_dim="T")
    path = tmp_path / "dynamic.onnx"
    path.write_bytes(model.SerializeToString())
    plan = gc.load(path)
    for time in (4, 7):
        _, feeds = rnn_model("LSTM", direction="bidirectional", time=time, batch=3)
        for g, w in zip(outputs(plan(**feeds)), ort_run(model, feeds)):
            close(g, w, f"LSTM with lengths at T={time}")


@pytest.mark.parametrize("bad, message", [
    (dict(activations=["Sigmoid", "Swish"]), r"activation 'Swish' is not an ONNX activation function"),
    (dict(direction="sideways"), r"direction='sideways'"),
    (dict(layout=2), r"layout=2"),
])
def test_unsupported_recurrent_attributes_are_refused_naming_the_node(bad, message, tmp_path):
    model, _ = rnn_model("GRU", **bad)
    model.graph.node[0].name = "enc_gru"
    path = tmp_path / "bad.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(gc.GraphcError, match=message) as info:
        gc.load(path)
    assert "enc_gru (GRU)" in str(info.value)


def attention_model(rank: int, *, past=False, mask=None, **attrs):
    """An opset-23 Attention reading graph inputs Q, K, V (and attn_mask, past_key/value)."""
    rng = np.random.default_rng(rank + 3 * past)
    b, s, length, size, q_heads, kv_heads, past_len = 2, 4, 5, 8, 6, 2, 3
    if rank == 3:
        attrs.update(q_num_heads=q_heads, kv_num_heads=kv_heads)
        shapes = {"Q": (b, s, q_heads * size), "K": (b, length, kv_heads * size), "V": (b, length, kv_heads * size)}
    else:
        shapes = {"Q": (b, q_heads, s, size), "K": (b, kv_heads, length, size), "V": (b, kv_heads, length, size)}
    feeds = {k: rng.normal(0, 1, v).astype(np.float32) for k, v in shapes.items()}
    total = length + (past_len if past else 0)
    names = ["Q", "K", "V"]
    if mask is not None:
        feeds["attn_mask"] = rng.random((s, total)) > 0.3 if mask == "bool" else \
            rng.normal(0, 1, (b, 1, s, total)).astype(np.float32)
        names.append("attn_mask")
    outs = ["Y"]
    if past:
        feeds.update(past_key=rng.normal(0, 1, (b, kv_heads, past_len, size)).astype(np.float32),
                     past_value=rng.normal(0, 1, (b, kv_heads, past_len, size)).astype(np.float32))
        names = (names + [""])[:4] + ["past_key", "past_value"]
        outs += ["present_key", "present_value"]
    kinds = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.bool_): TensorProto.BOOL}
    inputs = [helper.make_tensor_value_info(k, kinds[v.dtype], v.shape) for k, v in feeds.items()]
    graph = helper.make_graph([helper.make_node("Attention", names, outs, **attrs)], "attention", inputs,
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)]), feeds


ATTENTION_CONFIGS = [
    dict(rank=3, is_causal=1),
    dict(rank=3, mask="bool", past=True),
    dict(rank=4, mask="float", softcap=2.0, scale=0.2),
    dict(rank=4, past=True, is_causal=1, mask="float"),
]


@pytest.mark.parametrize("config", ATTENTION_CONFIGS, ids=[str(i) for i in range(len(ATTENTION_CONFIGS))])
def test_attention_matches_onnxruntime(config, tmp_path):
    model, feeds = attention_model(**config)
    _, got = graphc_run(model, feeds, tmp_path)
    for k, (g, w) in enumerate(zip(got, ort_run(model, feeds))):
        close(g, w, f"Attention output {k}")


def test_unsupported_attention_attributes_are_refused_naming_the_node(tmp_path):
    model, _ = attention_model(4, softmax_precision=10)
    model.graph.node[0].name = "block0_attn"
    path = tmp_path / "bad.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(gc.GraphcError, match=r"softmax_precision=10") as info:
        gc.load(path)
    assert "block0_attn (Attention)" in str(info.value)


# ---- PyTorch's exports ---------------------------------------------------------------------------
def _torch_export(module, example, path, **kwargs):
    torch = pytest.importorskip("torch")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (example,), str(path), **kwargs)
    return path


def _torch_outputs(result) -> list:
    flat = []
    for item in (result if isinstance(result, tuple) else (result,)):
        flat.extend(_torch_outputs(item) if isinstance(item, tuple) else [item.detach().numpy()])
    return flat


@pytest.mark.parametrize("kind, dynamo", [("LSTM", True), ("LSTM", False), ("GRU", True), ("RNN", False)])
def test_torch_recurrent_export_imports(kind, dynamo, tmp_path):
    """torch 2.x writes LSTM/GRU nodes with both exporters and RNN nodes with the TorchScript one
    (its dynamo exporter unrolls nn.RNN into MatMuls); two layers, both directions."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    extra = {"nonlinearity": "relu"} if kind == "RNN" else {}
    module = getattr(torch.nn, kind)(3, 5, num_layers=2, bidirectional=True, batch_first=dynamo, **extra).eval()
    x = torch.randn(2, 7, 3) if dynamo else torch.randn(7, 2, 3)
    path = _torch_export(module, x, tmp_path / "m.onnx", dynamo=dynamo)
    assert kind in {n.op_type for n in onnx.load(str(path)).graph.node}
    plan = gc.load(path)
    assert [n.op for n in plan.graph.nodes].count("scan") == 4
    for g, w in zip(outputs(plan(x.numpy())), _torch_outputs(module(x))):
        close(g, w, kind)


@pytest.mark.parametrize("options", [dict(dynamo=True), dict(dynamo=False), dict(dynamo=True, opset_version=23),
                                     dict(dynamo=True, opset_version=23, dynamic_time=True)],
                         ids=["dynamo", "torchscript", "dynamo-opset23-Attention", "opset23-symbolic-length"])
def test_torch_transformer_encoder_export_imports(options, tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=16, nhead=4, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False).eval()
    x = torch.randn(2, 5, 16)
    options = dict(options)
    if options.pop("dynamic_time", False):
        options["dynamic_shapes"] = ({1: torch.export.Dim("T")},)
    path = _torch_export(encoder, x, tmp_path / "encoder.onnx", **options)
    if options.get("opset_version") == 23:
        assert "Attention" in {n.op_type for n in onnx.load(str(path)).graph.node}
    plan = gc.load(path)
    for length in ((5, 9) if "dynamic_shapes" in options else (5,)):
        x = torch.randn(2, length, 16)
        with torch.no_grad():
            want = encoder(x).numpy()
        close(plan(x.numpy()), want, f"TransformerEncoder at length {length}")


# ---- the readers around attention exports: Mod, And/Or/Xor, CastLike, Pad -------------------------
LOGIC_CASES = [
    ("Mod", [np.array([7, -7, 5, -5], np.int64), np.array([3, 3, -2, -2], np.int64)], {}),
    ("Mod", [np.array([7, -7, 5, -5], np.int64), np.array([3, 3, -2, -2], np.int64)], {"fmod": 1}),
    ("Mod", [np.array([7.5, -7.5, 5.25], np.float32), np.array([2.0, 2.0, -1.5], np.float32)], {"fmod": 1}),
    ("And", [np.array([True, True, False]), np.array([True, False, False])], {}),
    ("Or", [np.array([True, True, False]), np.array([True, False, False])], {}),
    ("Xor", [np.array([True, True, False]), np.array([True, False, False])], {}),
    ("CastLike", [np.array([1.7, -2.2], np.float32), np.array([0], np.int64)], {}),
    ("Pad", [np.arange(6, dtype=np.float32).reshape(2, 3), np.array([0, 1, 1, 2], np.int64),
             np.array(-np.inf, np.float32)], {}),
]


@pytest.mark.parametrize("as_inputs", [True, False], ids=["graph-inputs", "initializers"])
@pytest.mark.parametrize("op, arrays, attrs", LOGIC_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(LOGIC_CASES)])
def test_logic_readers_match_onnx_reference(op, arrays, attrs, as_inputs, tmp_path):
    """Each reader on graph values (the plan's kernels) and on initializers (computed while
    importing), against onnx's reference evaluator. Pad's pads and value stay initializers."""
    from onnx.reference import ReferenceEvaluator

    names = [f"in{i}" for i in range(len(arrays))]
    fed = 1 if op == "Pad" else len(arrays)
    kinds = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64,
             np.dtype(np.bool_): TensorProto.BOOL}
    inputs = [helper.make_tensor_value_info(n, kinds[a.dtype], a.shape)
              for n, a in zip(names[:fed], arrays) if as_inputs]
    inits = [numpy_helper.from_array(a, n) for i, (n, a) in enumerate(zip(names, arrays)) if i >= fed or not as_inputs]
    nodes = [helper.make_node(op, names, ["y0"], **attrs), helper.make_node("Identity", ["y0"], ["y"])]
    graph = helper.make_graph(nodes, "logic", inputs, [helper.make_tensor_value_info("y", TensorProto.UNDEFINED, None)],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    feeds = dict(zip(names[:fed], arrays)) if as_inputs else {}
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    path = tmp_path / "logic.onnx"
    path.write_bytes(model.SerializeToString())
    got = np.asarray(gc.load(path)(**feeds))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
