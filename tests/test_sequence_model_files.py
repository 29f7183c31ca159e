"""Acceptance (issue 32): sequence-model files in public PyTorch idiom run on graphc with only
their imports changed, and match PyTorch from the same weights.

The files in ``tests/models`` (loaded twice by ``load_model_file``, as PyTorch and as graphc;
see tests/test_pytorch_models.py):

- ``word_language_model``: pytorch/examples' word-level language model, an RNN (LSTM, GRU,
  ``RNN_TANH``) and a Transformer encoder with a positional-encoding buffer and a causal mask
  built from ``torch.log(torch.tril(torch.ones(sz, sz)))``, trained by the example's loop
  (``get_batch`` with a shorter last batch, ``repackage_hidden``, ``clip_grad_norm_``, the
  hand-written SGD update ``p.data.add_(p.grad, alpha=-lr)``);
- ``row_lstm``: 28x28 images read row by row by a two-layer batch-first LSTM, Adam;
- ``seq2seq_attention``: the PyTorch translation tutorial's GRU encoder, Bahdanau attention
  and attention decoder stepped in a Python loop (teacher forcing while training, greedy
  ``topk(1)`` decoding otherwise), two Adam optimizers, NLL loss;
- ``time_series_lstmcell``: pytorch/examples' time_sequence_prediction, two ``LSTMCell``s
  stepped over ``input.split(1, dim=1)`` and ``future`` self-fed steps, double precision,
  trained by ``optim.LBFGS.step(closure)``.

For every model: (a) the same ``state_dict`` keys, shapes and dtypes as PyTorch's construction,
and graphc's weights load into PyTorch's twin with ``strict=True``; (b) the eval forward
(dropout on in the constructors: eval removes it) eager, compiled and exported
(``gc.export`` -> ``gc.load``; ONNX -> onnxruntime where onnxruntime is installed) matches
PyTorch; (c) three training steps of the file's own step function match PyTorch eagerly and
through ``gc.compile(train_step, ...)`` (the word LM compiled once, its time dim symbolic,
over a stream whose last batch is shorter); losses and every parameter. The L-BFGS model runs
``optimizer.step(closure)`` eagerly and with ``gc.compile(closure, ())`` as the closure.

PyTorch's side goes through the ``torch_ref`` fixture (recorded in
tests/data/torch_test_sequence_model_files.npz for machines without torch). Dropout is 0 in
the training comparisons (the two libraries' random streams differ).
"""
from __future__ import annotations

import ast
import importlib.util

import numpy as np
import pytest

import graphc as gc
from conftest import HAVE_TORCH
from test_pytorch_models import ALLOWED_IMPORTS, ATOL, MODELS_DIR, RTOL, assert_forward_close, load_model_file, snapshot, torch_state

if HAVE_TORCH:
    import torch

HAVE_ORT = importlib.util.find_spec("onnxruntime") is not None
SEED = 0
# (b) forward: FWD_RTOL of tests/test_pytorch_models.py, |graphc - torch| <= 1e-5 max|torch| (float32
# GEMMs summed in other orders, carried through the recurrences). (c) training: the bar,
# 1e-4 relative (ATOL 1e-6 for entries near zero), for losses and every parameter after 3 steps.
NTOK, BSZ, BPTT, EMSIZE = 20, 3, 4, 8
SRC_VOCAB, TGT_VOCAB, HIDDEN, SRC_LEN = 12, 14, 16, 5
LM_LR = 5.0  # the example's lr is 20, with clip 0.25


def word_lm(kind):
    def build(m, p):
        if kind == "transformer":
            return m.TransformerModel(NTOK, EMSIZE, 2, 16, 2, dropout=p)
        return m.RNNModel(kind, NTOK, EMSIZE, EMSIZE, 2, dropout=p)
    return "word_language_model", build


CASES = {  # case: (file, build(module, dropout p))
    "lm_lstm": word_lm("LSTM"), "lm_gru": word_lm("GRU"), "lm_rnn_tanh": word_lm("RNN_TANH"),
    "lm_transformer": word_lm("transformer"),
    "row_lstm": ("row_lstm", lambda m, p: m.make_model()),
    "seq2seq": ("seq2seq_attention", lambda m, p: m.Translator(m.EncoderRNN(SRC_VOCAB, HIDDEN, dropout_p=p),
                                                                  m.AttnDecoderRNN(HIDDEN, TGT_VOCAB, dropout_p=p))),
    "time_series": ("time_series_lstmcell", lambda m, p: m.make_model()),
}
RNN_LM = {"lm_lstm", "lm_gru", "lm_rnn_tanh"}


def build(case, lib, p=0.0, state=None):
    """``(file module, model)``: graphc's from the seed; PyTorch's holding ``state`` (strict)."""
    file, builder = CASES[case]
    m = load_model_file(file, lib)
    (gc if lib == "graphc" else torch).manual_seed(SEED)
    model = builder(m, p)
    if state is not None:
        model.load_state_dict({k: torch.from_numpy(np.array(v, copy=True)) for k, v in state.items()}, strict=True)
    return m, model


def assert_close(got, want, what, rtol=RTOL, atol=ATOL):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    err = np.abs(got - want)
    print(f"measured {what}: max rel {float((err / np.maximum(np.abs(want), atol)).max(initial=0)):.2g}, "
          f"{float((err / (atol + rtol * np.abs(want))).max(initial=0)):.2g} of the tolerance")
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=what)


# Bahdanau attention's Va bias adds one number to all of a query's scores, which softmax removes:
# its gradient is mathematically zero, computed as float32 rounding noise that Adam divides by
# its own root-mean-square into steps of up to lr (1e-3) each. Any two implementations disagree
# there (measured: 9.5e-5 after 3 steps), so it is compared within 3 steps of lr; every other
# parameter at the 1e-4.
NOISE_ONLY = {"decoder.attention.Va.bias": 3 * 1e-3}


def assert_state_close(model, ref, what):
    bad = []
    for key, value in model.state_dict().items():
        try:
            if key in NOISE_ONLY:
                np.testing.assert_allclose(value, ref[f"state.{key}"], rtol=0, atol=NOISE_ONLY[key], err_msg=key)
                continue
            assert_close(value, ref[f"state.{key}"], f"{what}: {key}")
        except AssertionError as e:
            bad.append(str(e).splitlines()[:6])
    assert not bad, bad


# ---- the models' inputs ---------------------------------------------------------------------------
def eval_inputs(case, rng):
    """numpy inputs of the eval forward (the RNN LMs' hidden state as the file's init_hidden)."""
    if case in RNN_LM or case == "lm_transformer":
        x = rng.integers(0, NTOK, (5, BSZ))
        if case == "lm_transformer":
            return (x,)
        hidden = [(0.1 * rng.standard_normal((2, BSZ, EMSIZE))).astype(np.float32) for _ in range(2)]
        return x, (tuple(hidden) if case == "lm_lstm" else hidden[0])  # as init_hidden's: (h, c) for LSTM
    if case == "row_lstm":
        return (rng.standard_normal((4, 28, 28)).astype(np.float32),)
    if case == "seq2seq":
        return (rng.integers(0, SRC_VOCAB, (4, SRC_LEN)),)
    return (np.sin((np.arange(20)[None, :] + rng.integers(-40, 40, (3, 1))) / 20.0),)


def to_lib(value, lib):
    if isinstance(value, tuple):
        return tuple(to_lib(v, lib) for v in value)
    return (gc if lib == "graphc" else torch).from_numpy(np.array(value, copy=True))


def outputs(out):
    """A forward's outputs as a flat list of numpy arrays."""
    if isinstance(out, (tuple, list)):
        return [a for o in out for a in outputs(o)]
    return [out.detach().numpy() if hasattr(out, "detach") else np.asarray(out)]


def dynamic_dims(case, inputs):
    if case in RNN_LM:
        hidden = {"hidden_0": {1: "N"}, "hidden_1": {1: "N"}} if isinstance(inputs[1], tuple) else {"hidden": {1: "N"}}
        return {"input": {0: "T", 1: "N"}, **hidden}
    # the Transformer LM's causal mask is torch.ones(len(src), len(src)): len() is a plain int (Python
    # makes it one), so its plans hold one sequence length each; its batch dim (1) stays symbolic
    return {"src": {1: "N"}} if case == "lm_transformer" else None


@pytest.mark.parametrize("file", sorted({file for file, _ in CASES.values()}))
def test_model_files_import_only_torch(file):
    """Plain PyTorch files: only ``import torch`` (``.nn``, ``.nn.functional``, ``.optim``) and ``math``."""
    tree = ast.parse((MODELS_DIR / f"{file}.py").read_text())
    assert not any(isinstance(node, ast.ImportFrom) for node in ast.walk(tree)), f"{file}: 'from ... import'"
    imports = {(a.name, a.asname) for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
    assert imports and imports <= ALLOWED_IMPORTS, f"{file} imports {imports}"
    assert "graphc" not in (MODELS_DIR / f"{file}.py").read_text()


# ---- (a) construction ------------------------------------------------------------------------------
@pytest.mark.parametrize("case", list(CASES))
def test_state_dict_matches_torch_construction(case, torch_ref):
    _, gm = build(case, "graphc", p=0.2)
    state = snapshot(gm)

    def run():
        _, tm = build(case, "torch", p=0.2)
        layout = {k: (str(v.dtype), tuple(v.shape)) for k, v in torch_state(tm).items()}
        tm.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()}, strict=True)
        return {"keys": np.array(list(layout)), "layout": np.array([f"{d}{s}" for d, s in layout.values()]),
                "params": np.array([n for n, _ in tm.named_parameters()])}

    ref = torch_ref([case, state], run)
    assert list(state) == ref["keys"].tolist()
    assert [f"{v.dtype}{v.shape}" for v in state.values()] == ref["layout"].tolist()
    assert [n for n, _ in gm.named_parameters()] == ref["params"].tolist()
    if case.startswith("lm_"):  # init_weights: uniform_(-0.1, 0.1) and zeros_
        assert 0.05 < np.abs(state["encoder.weight"]).max() <= 0.1 and not state["decoder.bias"].any()
    if case == "time_series":
        assert all(v.dtype == np.float64 for v in state.values())  # model.double()


# ---- (b) eval forward: eager, compiled, exported ------------------------------------------------
@pytest.mark.parametrize("case", list(CASES))
def test_eval_forward_compiled_and_exported_match_torch(case, torch_ref, tmp_path):
    m, gm = build(case, "graphc", p=0.3)
    state, inputs = snapshot(gm), eval_inputs(case, np.random.default_rng(1))

    def run():
        tm = build(case, "torch", p=0.3, state=state)[1].eval()
        with torch.no_grad():
            out = {f"out{i}": v for i, v in enumerate(outputs(tm(*to_lib(inputs, "torch"))))}
            if case == "time_series":
                out["future"] = tm(to_lib(inputs[0], "torch"), future=3)
        return out

    ref = torch_ref([case, state, inputs], run)
    want = [ref[f"out{i}"] for i in range(len(ref) - (case == "time_series"))]
    gm.eval()
    with gc.no_grad():
        got = outputs(gm(*to_lib(inputs, "graphc")))
        if case == "time_series":
            assert_forward_close(gm(to_lib(inputs[0], "graphc"), future=3), ref["future"], "future=3")
    for what, result in (("eager", got), ("compiled", gc.compile(gm, inputs, dynamic_dims=dynamic_dims(case, inputs)))):
        result = result if isinstance(result, list) else outputs(result(*inputs))
        for i, (g, w) in enumerate(zip(result, want, strict=True)):
            assert_forward_close(g, w, f"{case} {what} output {i}")
    path = tmp_path / f"{case}.graphc"
    gc.export(gm, inputs, path, dynamic_dims=dynamic_dims(case, inputs))
    for i, (g, w) in enumerate(zip(outputs(gc.load(path)(*inputs)), want, strict=True)):
        assert_forward_close(g, w, f"{case} exported output {i}")
    if case in RNN_LM:  # and the other sequence length of the stream's last batch
        short = tuple(a[:2] if j == 0 else a for j, a in enumerate(inputs))
        with gc.no_grad():
            eager = outputs(gm(*to_lib(short, "graphc")))
        for g, w in zip(outputs(gc.load(path)(*short)), eager, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)  # the same kernels: float32 rounding


@pytest.mark.skipif(not HAVE_ORT, reason="onnxruntime is not installed (CI installs it)")
@pytest.mark.parametrize("case", list(CASES))
def test_onnx_export_runs_in_onnxruntime(case, tmp_path):
    """The exported ONNX model runs in onnxruntime to graphc's eval outputs (float32 kernels
    of another library: FWD_RTOL of the outputs' scale)."""
    import onnxruntime

    _, gm = build(case, "graphc", p=0.3)
    inputs = eval_inputs(case, np.random.default_rng(1))
    path = tmp_path / f"{case}.onnx"
    gc.export(gm, inputs, path, dynamic_dims=dynamic_dims(case, inputs))
    session = onnxruntime.InferenceSession(str(path))
    flat = [a for v in inputs for a in (v if isinstance(v, tuple) else (v,))]
    got = session.run(None, {i.name: a for i, a in zip(session.get_inputs(), flat, strict=True)})
    with gc.no_grad():
        want = outputs(gm.eval()(*to_lib(inputs, "graphc")))
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert_forward_close(g.astype(w.dtype) if g.dtype.kind == w.dtype.kind else g, w, f"{case} onnx output {i}")


# ---- (c) training: the files' own steps, eagerly and compiled ----------------------------------------
def lm_stream():
    """A token stream that batchify cuts into 11 rows of BSZ: get_batch gives 4, 4 and then 2 steps."""
    return np.random.default_rng(5).integers(0, NTOK, 11 * BSZ + 2)


def lm_train(m, model, lib, compiled=False):
    """The example's train() loop over the stream; graphc's compiled run calls one plan for every
    batch (the RNNs' time dim symbolic), or, for the Transformer, one plan per sequence length."""
    source = m.batchify(to_lib(lm_stream(), lib), BSZ)
    step = m.make_train_step(model, LM_LR)
    transformer = isinstance(model, m.TransformerModel)
    hidden = None if transformer else model.init_hidden(BSZ)
    plans, losses = {}, []
    for i in range(0, source.size(0) - 1, BPTT):
        data, targets = m.get_batch(source, i, BPTT)
        if compiled and transformer:
            t = data.shape[0]
            if t not in plans:
                plans[t] = gc.compile(step, (data, targets), dynamic_dims={"data": {1: "N"}, "targets": {0: f"N*{t}"}})
            run = plans[t]
        elif compiled:
            if not plans:
                dims = {"data": {0: "T", 1: "N"}, "targets": {0: "T*N"}}
                dims.update({"hidden_0": {1: "N"}, "hidden_1": {1: "N"}} if isinstance(hidden, tuple) else
                            {"hidden": {1: "N"}})
                plans[0] = gc.compile(step, (data, targets, hidden), dynamic_dims=dims)
            run = plans[0]
        else:
            run = step
            hidden = None if transformer else m.repackage_hidden(hidden)  # a plan's hidden are arrays already
        if transformer:
            loss = run(data, targets)
        else:
            loss, hidden = run(data, targets, hidden)
        losses.append(float(loss.item() if hasattr(loss, "item") else loss))
    return losses, plans


def batches(case):
    rng = np.random.default_rng(6)
    if case == "row_lstm":
        return [(rng.standard_normal((8, 1, 28, 28)).astype(np.float32), rng.integers(0, 10, 8)) for _ in range(3)]
    return [(rng.integers(0, SRC_VOCAB, (4, SRC_LEN)), rng.integers(0, TGT_VOCAB, (4, 6))) for _ in range(3)]


def step_train(case, m, model, lib, compiled=False):
    """row_lstm, seq2seq: the file's train_step(x, y), three batches; returns the losses."""
    if case == "row_lstm":
        step = m.make_train_step(model, m.make_optimizer(model))
    else:
        step = m.make_train_step(model.encoder, model.decoder, *m.make_optimizers(model.encoder, model.decoder))
    if compiled:
        step = gc.compile(step, batches(case)[0])
        return [float(step(x, y)) for x, y in batches(case)]
    return [step(to_lib(x, lib), to_lib(y, lib)).item() for x, y in batches(case)]


def sine_data():
    """The example's data (sine waves with random shifts), small: 3 sequences of 20 steps and targets."""
    data = np.sin((np.arange(21)[None, :] + np.random.default_rng(7).integers(-80, 80, (3, 1))) / 20.0)
    return data[:, :-1].copy(), data[:, 1:].copy()


def lbfgs_train(m, model, lib, compiled=False, steps=3):
    """The example's loop: optimizer.step(closure); the closure compiled by gc.compile(closure, ())."""
    optimizer = m.make_optimizer(model)
    x, y = sine_data()
    closure = m.make_closure(model, optimizer, to_lib(x, lib), to_lib(y, lib))
    if compiled:
        closure = gc.compile(closure, ())
    return [float(optimizer.step(closure)) for _ in range(steps)]


def train(case, m, model, lib, compiled=False):
    if case.startswith("lm_"):
        return lm_train(m, model, lib, compiled)[0]
    if case == "time_series":
        return lbfgs_train(m, model, lib, compiled)
    return step_train(case, m, model, lib, compiled)


@pytest.mark.parametrize("case", list(CASES))
def test_training_eager_and_compiled_match_torch(case, torch_ref):
    """Three steps of the file's own training code: PyTorch eager, graphc eager, graphc compiled;
    losses and every parameter after the steps against PyTorch's."""
    m, gm = build(case, "graphc")
    state = snapshot(gm)

    def run():
        tm_module, tm = build(case, "torch", state=state)
        return {"losses": np.array(train(case, tm_module, tm.train(), "torch")),
                **{f"state.{k}": v for k, v in torch_state(tm).items()}}

    ref = torch_ref([case, state, lm_stream() if case.startswith("lm_") else None,
                     batches(case) if case in ("row_lstm", "seq2seq") else sine_data()], run)
    for compiled in (False, True):
        what = f"{case} {'compiled' if compiled else 'eager'}"
        _, gm = build(case, "graphc")
        assert_close(train(case, m, gm.train(), "graphc", compiled), ref["losses"], f"{what}: losses")
        assert_state_close(gm, ref, what)
        trained = snapshot(gm)
        assert all(not np.array_equal(trained[k], state[k]) for k, _ in gm.named_parameters()), f"{what}: untrained"


def test_word_lm_rnn_plan_is_compiled_once():
    """One plan serves every batch of the stream, the shorter last one too (T symbolic)."""
    m, gm = build("lm_lstm", "graphc")
    _, plans = lm_train(m, gm.train(), "graphc", compiled=True)
    assert len(plans) == 1 and sum(n.op == "scan" for n in plans[0].graph.nodes) == 4  # 2 layers, fwd and grad


def test_row_lstm_compiles_as_a_model_with_loss_and_optimizer(torch_ref):
    """``gc.compile(model, (x, y), loss_fn=..., optimizer=...)`` trains like the file's step."""
    m, gm = build("row_lstm", "graphc")
    state = snapshot(gm)
    eager = step_train("row_lstm", m, build("row_lstm", "graphc")[1], "graphc")
    optimizer = m.make_optimizer(gm)
    xs = [(x.reshape(-1, 28, 28), y) for x, y in batches("row_lstm")]
    step = gc.compile(gm, xs[0], loss_fn=gc.nn.CrossEntropyLoss(), optimizer=optimizer)
    assert_close([float(step(x, y)) for x, y in xs], eager, "row_lstm model-compiled vs eager losses")
    assert not np.array_equal(snapshot(gm)["fc.weight"], state["fc.weight"])


def test_seq2seq_compiled_with_one_optimizer_over_both_modules(torch_ref):
    """The tutorial's step with one Adam over the encoder's and decoder's parameters: the same
    update as its two Adams (Adam is per parameter), so PyTorch's two-optimizer run is the
    reference. (Two optimizer.step() calls in one compiled function are refused: see
    test_training_eager_and_compiled_match_torch[seq2seq].)"""
    m, gm = build("seq2seq", "graphc")
    state = snapshot(gm)

    def run():
        tm_module, tm = build("seq2seq", "torch", state=state)
        return {"losses": np.array(step_train("seq2seq", tm_module, tm.train(), "torch")),
                **{f"state.{k}": v for k, v in torch_state(tm).items()}}

    ref = torch_ref([state, batches("seq2seq")], run)
    optimizer = m.optim.Adam(list(gm.encoder.parameters()) + list(gm.decoder.parameters()), lr=0.001)
    criterion = m.nn.NLLLoss()

    def train_step(input_tensor, target_tensor):
        optimizer.zero_grad()
        encoder_outputs, encoder_hidden = gm.encoder(input_tensor)
        decoder_outputs, _, _ = gm.decoder(encoder_outputs, encoder_hidden, target_tensor)
        loss = criterion(decoder_outputs.view(-1, decoder_outputs.size(-1)), target_tensor.view(-1))
        loss.backward()
        optimizer.step()
        return loss

    step = gc.compile(train_step, batches("seq2seq")[0])
    assert_close([float(step(x, y)) for x, y in batches("seq2seq")], ref["losses"], "seq2seq one-optimizer losses")
    assert_state_close(gm, ref, "seq2seq one optimizer, compiled")
