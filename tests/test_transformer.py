"""graphc.nn's TransformerDecoderLayer, TransformerDecoder and Transformer against PyTorch
(outputs, input and parameter gradients; masks, norm_first, batch_first, train and eval mode;
PyTorch state dicts; compiled forward; compiled SGD steps; saved and reloaded plans). torch's
side goes through the ``torch_ref`` fixture (live with torch installed, else PyTorch 2.13's
recording in tests/data/torch_test_transformer.npz).

Tolerances: float64 comparisons use 1e-10 (the two libraries sum the same products in other
orders, about 1e-15 apart, grown a little by the LayerNorms of a few layers; a wrong mask,
norm order or residual moves results by ~1e-1). float32 training steps use 1e-5, the repo's
float32 tolerance (tests/test_modules_torch.py).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import graphc as gc
import graphc.nn.functional as F
from graphc import nn, optim
from graphc.ir.errors import GraphcError
from graphc.nn.transformer import Transformer, TransformerEncoder, TransformerEncoderLayer
from graphc.nn.transformer_decoder import TransformerDecoder, TransformerDecoderLayer
from conftest import HAVE_TORCH

if HAVE_TORCH:
    import torch

TOL64 = 1e-10
TOL32 = 1e-5

pytestmark = [pytest.mark.filterwarnings("ignore:enable_nested_tensor is True"),
              pytest.mark.filterwarnings("ignore:Support for mismatched")]


class GLib:  # graphc's classes under torch.nn's names
    TransformerDecoderLayer, TransformerDecoder, Transformer, LayerNorm = (
        TransformerDecoderLayer, TransformerDecoder, Transformer, nn.LayerNorm)


def _fp(obj):
    """``obj`` for the reference fingerprint: -inf in float masks as -1e9 (see test_attention)."""
    if isinstance(obj, dict):
        return {k: _fp(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_fp(v) for v in obj]
    if isinstance(obj, np.ndarray) and obj.dtype.kind == "f":
        return np.where(np.isinf(obj), -1e9, obj)
    return obj


def _close(got, want, tol, what):
    got = got.numpy() if isinstance(got, gc.Tensor) else np.asarray(got)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != torch {want.shape}"
    assert np.array_equal(np.isnan(got), np.isnan(want)), f"{what}: NaNs differ"
    diff = float(np.max(np.abs(np.nan_to_num(got) - np.nan_to_num(want)), initial=0.0))
    assert diff <= tol, f"{what}: max |graphc - torch| = {diff:.3g} > {tol}"


def _torch_kw(kw):
    return {a: torch.tensor(b) if isinstance(b, np.ndarray) else b for a, b in kw.items()}


def _gc_kw(kw):
    return {a: gc.tensor(b) if isinstance(b, np.ndarray) else b for a, b in kw.items()}


def _state(ref):
    return {k[len("state."):]: v for k, v in ref.items() if k.startswith("state.")}


def _causal(n):
    return np.triu(np.full((n, n), -np.inf), 1)  # nn.Transformer.generate_square_subsequent_mask(n)


# ---- generate_square_subsequent_mask --------------------------------------------------------------
def test_generate_square_subsequent_mask_matches_torch(torch_ref):
    ref = torch_ref([1, 4], lambda: {
        "m1": torch.nn.Transformer.generate_square_subsequent_mask(1).numpy(),
        "m4": torch.nn.Transformer.generate_square_subsequent_mask(4).numpy(),
        "m4_f64": torch.nn.Transformer.generate_square_subsequent_mask(4, dtype=torch.float64).numpy()})
    for key, got in (("m1", Transformer.generate_square_subsequent_mask(1)),
                     ("m4", Transformer.generate_square_subsequent_mask(4)),
                     ("m4_f64", Transformer.generate_square_subsequent_mask(4, dtype=gc.float64))):
        assert got.numpy().dtype == ref[key].dtype, key
        np.testing.assert_array_equal(got.numpy(), ref[key])
    np.testing.assert_array_equal(Transformer(8, 2, 1, 1, 16).generate_square_subsequent_mask(3).numpy(),
                                  _causal(3).astype(np.float32))


# ---- TransformerDecoderLayer, TransformerDecoder ---------------------------------------------------
DECODER_CONFIGS = {
    "post_norm_relu": {},
    "pre_norm_gelu_batch_first": {"norm_first": True, "activation": "gelu", "batch_first": True},
    "no_bias_eps": {"bias": False, "layer_norm_eps": 1e-3},
    "callable_silu_pre_norm": {"activation": "silu", "norm_first": True},  # a callable: F.silu on each side
}
DECODER_MASKS = ["none", "tgt_causal", "key_padding", "memory_mask", "all"]


def _decoder(lib, functional, config, final_norm=True):
    kw = dict(DECODER_CONFIGS[config])
    if kw.get("activation") == "silu":
        kw["activation"] = functional.silu
    layer = lib.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0, **kw)
    return lib.TransformerDecoder(layer, 2, norm=lib.LayerNorm(8) if final_norm else None)


def _mask_kw(rng, masks, n, t, s):
    tkpm = rng.random((n, t)) > 0.6
    tkpm[:, 0] = False  # (with the causal mask, query 0 sees key 0 only)
    mkpm = rng.random((n, s)) > 0.6
    mkpm[:, 1] = False
    memory_mask = rng.standard_normal((t, s))
    memory_mask[rng.random((t, s)) > 0.7] = -np.inf
    memory_mask[:, 1] = 0.0
    causal = _causal(t)
    return {"none": {},
            "tgt_causal": {"tgt_mask": causal, "tgt_is_causal": True},
            "key_padding": {"tgt_key_padding_mask": tkpm, "memory_key_padding_mask": mkpm},
            "memory_mask": {"memory_mask": memory_mask > 0.5},  # a bool mask: True = left out
            "all": {"tgt_mask": causal, "memory_mask": memory_mask, "tgt_key_padding_mask": tkpm,
                    "memory_key_padding_mask": mkpm}}[masks]


def _decoder_inputs(config, masks):
    rng = np.random.default_rng(sum(map(ord, config + masks)))
    bf = DECODER_CONFIGS[config].get("batch_first", False)
    n, t, s = 3, 5, 6
    tgt = rng.standard_normal((n, t, 8) if bf else (t, n, 8))
    memory = rng.standard_normal((n, s, 8) if bf else (s, n, 8))
    return tgt, memory, _mask_kw(rng, masks, n, t, s)


def _torch_decoder(config, mode, tgt, memory, kw, cot):
    torch.manual_seed(0)
    td = _decoder(torch.nn, torch.nn.functional, config).double().train(mode == "train")
    state = {k: v.detach().numpy().copy() for k, v in td.state_dict().items()}
    tt, tm = torch.tensor(tgt, requires_grad=True), torch.tensor(memory, requires_grad=True)
    out = td(tt, tm, **_torch_kw(kw))
    (out * torch.tensor(cot)).sum().backward()
    return {"out": out.detach().numpy(), "dtgt": tt.grad.numpy(), "dmemory": tm.grad.numpy(),
            **{f"state.{k}": v for k, v in state.items()},
            **{f"grad.{k}": p.grad.numpy() for k, p in td.named_parameters()}}


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("masks", DECODER_MASKS)
@pytest.mark.parametrize("config", list(DECODER_CONFIGS))
def test_transformer_decoder_matches_torch(config, masks, mode, torch_ref):
    """PyTorch's state_dict loaded; output, tgt/memory and parameter gradients in float64
    (dropout 0, so train and eval compute the same formula in both libraries)."""
    tgt, memory, kw = _decoder_inputs(config, masks)
    cot = np.random.default_rng(7).standard_normal(tgt.shape)
    ref = torch_ref(_fp([config, masks, mode, tgt, memory, kw, cot]),
                    lambda: _torch_decoder(config, mode, tgt, memory, kw, cot))
    gd = _decoder(GLib, F, config).double().train(mode == "train")
    state = _state(ref)
    assert list(state) == list(gd.state_dict())
    gd.load_state_dict(state)
    gt, gm = gc.tensor(tgt, requires_grad=True), gc.tensor(memory, requires_grad=True)
    out = gd(gt, gm, **_gc_kw(kw))
    assert out.dtype == gc.float64
    _close(out, ref["out"], TOL64, "output")
    (out * gc.tensor(cot)).sum().backward()
    _close(gt.grad, ref["dtgt"], TOL64, "dtgt")
    _close(gm.grad, ref["dmemory"], TOL64, "dmemory")
    for k, p in gd.named_parameters():
        _close(p.grad, ref[f"grad.{k}"], TOL64, f"grad.{k}")


def _torch_decoder_layer_unbatched(tgt, memory, kw):
    torch.manual_seed(0)
    tl = torch.nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0).double()
    state = {k: v.detach().numpy().copy() for k, v in tl.state_dict().items()}
    out = tl(torch.tensor(tgt), torch.tensor(memory), **_torch_kw(kw))
    return {"out": out.detach().numpy(), **{f"state.{k}": v for k, v in state.items()}}


def test_transformer_decoder_layer_unbatched_matches_torch(torch_ref):
    """One layer on unbatched (T, E) / (S, E) inputs with a causal mask and key padding."""
    rng = np.random.default_rng(1)
    tgt, memory = rng.standard_normal((5, 8)), rng.standard_normal((6, 8))
    mkpm = np.array([False, False, True, False, True, False])
    kw = {"tgt_mask": _causal(5), "memory_key_padding_mask": mkpm}
    ref = torch_ref(_fp([tgt, memory, kw]), lambda: _torch_decoder_layer_unbatched(tgt, memory, kw))
    gl = TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0).double()
    gl.load_state_dict(_state(ref))
    _close(gl(gc.tensor(tgt), gc.tensor(memory), **_gc_kw(kw)), ref["out"], TOL64, "output")


# ---- Transformer ----------------------------------------------------------------------------------
TRANSFORMER_CONFIGS = {
    "post_norm": {},
    "pre_norm_gelu_batch_first": {"norm_first": True, "activation": "gelu", "batch_first": True},
}
TRANSFORMER_MASKS = ["none", "all"]


def _transformer(lib, config):
    return lib.Transformer(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=16,
                           dropout=0.0, **TRANSFORMER_CONFIGS[config])


def _transformer_inputs(config, masks):
    rng = np.random.default_rng(sum(map(ord, config + masks)))
    bf = TRANSFORMER_CONFIGS[config].get("batch_first", False)
    n, t, s = 3, 5, 6
    src = rng.standard_normal((n, s, 8) if bf else (s, n, 8))
    tgt = rng.standard_normal((n, t, 8) if bf else (t, n, 8))
    kw = _mask_kw(rng, masks, n, t, s)
    if masks == "all":
        src_mask = rng.standard_normal((s, s))
        src_mask[:, 0] = 0.0
        kw = {**kw, "src_mask": src_mask, "src_key_padding_mask": kw["memory_key_padding_mask"]}
    return src, tgt, kw


def _torch_transformer(config, mode, src, tgt, kw, cot):
    torch.manual_seed(0)
    tm = _transformer(torch.nn, config).double().train(mode == "train")
    state = {k: v.detach().numpy().copy() for k, v in tm.state_dict().items()}
    ts, tt = torch.tensor(src, requires_grad=True), torch.tensor(tgt, requires_grad=True)
    out = tm(ts, tt, **_torch_kw(kw))
    (out * torch.tensor(cot)).sum().backward()
    return {"out": out.detach().numpy(), "dsrc": ts.grad.numpy(), "dtgt": tt.grad.numpy(),
            **{f"state.{k}": v for k, v in state.items()},
            **{f"grad.{k}": p.grad.numpy() for k, p in tm.named_parameters()}}


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("masks", TRANSFORMER_MASKS)
@pytest.mark.parametrize("config", list(TRANSFORMER_CONFIGS))
def test_transformer_matches_torch(config, masks, mode, torch_ref):
    """The whole model, PyTorch's state_dict loaded: output, src/tgt and parameter gradients in
    float64 (gradients on: PyTorch's plain path, not its eval fast path)."""
    src, tgt, kw = _transformer_inputs(config, masks)
    cot = np.random.default_rng(9).standard_normal(tgt.shape)
    ref = torch_ref(_fp([config, masks, mode, src, tgt, kw, cot]),
                    lambda: _torch_transformer(config, mode, src, tgt, kw, cot))
    gm = _transformer(GLib, config).double().train(mode == "train")
    state = _state(ref)
    assert list(state) == list(gm.state_dict())
    gm.load_state_dict(state)
    gs, gt = gc.tensor(src, requires_grad=True), gc.tensor(tgt, requires_grad=True)
    out = gm(gs, gt, **_gc_kw(kw))
    _close(out, ref["out"], TOL64, "output")
    (out * gc.tensor(cot)).sum().backward()
    _close(gs.grad, ref["dsrc"], TOL64, "dsrc")
    _close(gt.grad, ref["dtgt"], TOL64, "dtgt")
    for k, p in gm.named_parameters():
        _close(p.grad, ref[f"grad.{k}"], TOL64, f"grad.{k}")


def _torch_layout(config):
    tm = _transformer(torch.nn, config)
    return {k: np.zeros(v.shape, v.detach().numpy().dtype) for k, v in tm.state_dict().items()}


def test_transformer_initial_state_layout_matches_torch(torch_ref):
    """Keys, order, shapes, dtypes as torch's; every matrix xavier-uniform (Transformer's
    _reset_parameters), LayerNorms ones and zeros, attention biases zero."""
    for config in TRANSFORMER_CONFIGS:
        tsd = torch_ref([config], lambda config=config: _torch_layout(config), name=config)
        gc.manual_seed(0)
        gsd = _transformer(GLib, config).state_dict()
        assert list(gsd) == list(tsd), config
        for k in tsd:
            assert gsd[k].shape == tsd[k].shape and gsd[k].dtype == tsd[k].dtype, (config, k)
        for k, v in gsd.items():
            if v.ndim > 1:
                fan_out, fan_in = v.shape
                assert np.abs(v).max() <= math.sqrt(6 / (fan_in + fan_out)) and v.std() > 0.1, k
            elif "norm" in k:
                np.testing.assert_array_equal(v, 1.0 if k.endswith("weight") else 0.0, err_msg=k)
            elif k.endswith("in_proj_bias") or k.endswith("out_proj.bias"):
                assert not v.any(), k
        w = [gsd[f"decoder.layers.{i}.linear1.weight"] for i in range(2)]
        assert not np.array_equal(w[0], w[1])  # each clone drawn anew by _reset_parameters


def test_transformer_custom_parts_and_errors():
    enc = TransformerEncoder(TransformerEncoderLayer(8, 2, 16, dropout=0.0), 1)
    dec = TransformerDecoder(TransformerDecoderLayer(8, 2, 16, dropout=0.0), 1)
    model = Transformer(8, 2, custom_encoder=enc, custom_decoder=dec)
    assert model.encoder is enc and model.decoder is dec and enc.norm is None
    assert model(gc.randn(6, 2, 8), gc.randn(4, 2, 8)).shape == (4, 2, 8)
    with pytest.raises(GraphcError, match="batch number"):
        model(gc.randn(6, 2, 8), gc.randn(4, 3, 8))
    with pytest.raises(GraphcError, match="d_model"):
        model(gc.randn(6, 2, 4), gc.randn(4, 2, 4))
    with pytest.raises(GraphcError, match="relu/gelu"):
        TransformerDecoderLayer(8, 2, activation="tanh")
    with pytest.raises(GraphcError, match="is_causal"):  # the hint needs the mask, as torch's
        dec(gc.randn(4, 2, 8), gc.randn(6, 2, 8), tgt_is_causal=True)


def test_transformer_decoder_layers_are_independent_copies_and_dropout_trains_only():
    gc.manual_seed(0)
    layer = TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.5, activation=nn.GELU())
    dec = TransformerDecoder(layer, 2)
    w0, w1 = dec.layers[0].linear1.weight, dec.layers[1].linear1.weight
    assert w0 is not w1 and w0 is not layer.linear1.weight
    np.testing.assert_array_equal(w0.numpy(), w1.numpy())  # copies of one layer, as PyTorch's _get_clones
    assert "layers.0.activation" not in dec.state_dict()
    tgt, memory = gc.randn(5, 3, 8), gc.randn(4, 3, 8)
    assert not np.allclose(dec(tgt, memory).numpy(), dec(tgt, memory).numpy())  # dropout draws anew
    dec.eval()
    np.testing.assert_array_equal(dec(tgt, memory).numpy(), dec(tgt, memory).numpy())


# ---- compiled forward, training, plans -------------------------------------------------------------
def _torch_eval(state, src, tgt, kw):
    tm = torch.nn.Transformer(8, 2, 2, 2, 16, batch_first=True).double().eval()
    tm.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in state.items()})
    ts = torch.tensor(src, requires_grad=True)  # gradients on: the plain path (no nested tensors)
    return {"out": tm(ts, torch.tensor(tgt), **_torch_kw(kw)).detach().numpy()}


def test_transformer_compiled_forward_matches_torch(torch_ref, tmp_path):
    """``gc.compile(model, (src, tgt))`` of an eval-mode model (dropout 0.1 off) in float64, and
    a compiled function passing a causal tgt mask and key padding masks (inputs sharing the
    symbolic batch dim); both run at another batch size, and reload from a saved plan."""
    gc.manual_seed(0)
    model = Transformer(8, 2, 2, 2, 16, batch_first=True).double().eval()
    state = {k: np.array(v, copy=True) for k, v in model.state_dict().items()}
    rng = np.random.default_rng(4)
    src, tgt = rng.standard_normal((3, 6, 8)), rng.standard_normal((3, 5, 8))
    skpm = rng.random((3, 6)) > 0.6
    skpm[:, 0] = False
    masked = {"tgt_mask": _causal(5), "src_key_padding_mask": skpm, "memory_key_padding_mask": skpm}
    ref = torch_ref(_fp([state, src, tgt, masked]), lambda: {
        "plain": _torch_eval(state, src, tgt, {})["out"], "masked": _torch_eval(state, src, tgt, masked)["out"]})
    plan = gc.compile(model, (src, tgt))
    _close(plan(src, tgt), ref["plain"], TOL64, "compiled output")
    _close(plan(src[:2], tgt[:2]), ref["plain"][:2], TOL64, "compiled output, batch 2")

    causal = Transformer.generate_square_subsequent_mask(5, dtype=gc.float64)

    def run(s, t, kpm):
        return model(s, t, tgt_mask=causal, src_key_padding_mask=kpm, memory_key_padding_mask=kpm)

    masked_plan = gc.compile(run, (src, tgt, skpm))
    _close(masked_plan(src, tgt, skpm), ref["masked"], TOL64, "compiled masked output")
    path = str(tmp_path / "transformer.graphc")
    masked_plan.save(path)
    loaded = gc.load(path)
    _close(loaded(src, tgt, skpm), ref["masked"], TOL64, "reloaded masked output")
    _close(loaded(src[1:], tgt[1:], skpm[1:]), ref["masked"][1:], TOL64, "reloaded masked output, batch 2")


def _torch_time_major(state, pairs):
    tm = torch.nn.Transformer(8, 2, 1, 2, 16, norm_first=True).double().eval()
    tm.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in state.items()})
    return {f"out{i}": tm(torch.tensor(src, requires_grad=True), torch.tensor(tgt)).detach().numpy()
            for i, (src, tgt) in enumerate(pairs)}


def test_transformer_compiled_time_major_matches_torch(torch_ref):
    """A time-major (batch_first=False) pre-norm model compiled with its batch and both sequence
    lengths symbolic (``dynamic_dims``), run at the traced sizes and at smaller ones, vs torch."""
    gc.manual_seed(0)
    model = Transformer(8, 2, 1, 2, 16, norm_first=True).double().eval()
    state = {k: np.array(v, copy=True) for k, v in model.state_dict().items()}
    rng = np.random.default_rng(5)
    src, tgt = rng.standard_normal((6, 3, 8)), rng.standard_normal((5, 3, 8))
    pairs = [(src, tgt), (src[:4, :2], tgt[:3, :2])]
    ref = torch_ref([state, pairs], lambda: _torch_time_major(state, pairs))
    plan = gc.compile(model, (src, tgt), dynamic_dims={0: {0: "S", 1: "N"}, 1: {0: "T", 1: "N"}})
    for i, (s, t) in enumerate(pairs):
        _close(plan(s, t), ref[f"out{i}"], TOL64, f"compiled output {i}")


def _train_batches():
    rng = np.random.default_rng(12)
    out = []
    for _ in range(3):
        src = rng.standard_normal((4, 6, 8)).astype(np.float32)
        tgt = rng.standard_normal((4, 5, 8)).astype(np.float32)
        tkpm = rng.random((4, 5)) > 0.7
        tkpm[:, 0] = False
        y = rng.standard_normal((4, 5, 8)).astype(np.float32)
        out.append((src, tgt, tkpm, y))
    return out


def _torch_train(state, batches):
    tm = torch.nn.Transformer(8, 2, 1, 2, 16, dropout=0.0, batch_first=True, norm_first=True, activation="gelu")
    tm.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in state.items()})
    opt = torch.optim.SGD(tm.parameters(), lr=0.05, momentum=0.9)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(5)
    losses = []
    for src, tgt, tkpm, y in batches:
        opt.zero_grad()
        out = tm(torch.from_numpy(src), torch.from_numpy(tgt), tgt_mask=mask,
                 tgt_key_padding_mask=torch.from_numpy(tkpm), tgt_is_causal=True)
        loss = ((out - torch.from_numpy(y)) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": np.array(losses), **{f"state.{k}": v.detach().numpy().copy() for k, v in tm.state_dict().items()}}


def test_transformer_compiled_training_matches_torch(torch_ref, tmp_path):
    """3 compiled SGD steps (momentum) of a pre-norm GELU Transformer (batch first; causal tgt
    mask, tgt key padding mask as an input) vs torch's; every parameter trains; the saved plan
    resumes as the live one."""
    gc.manual_seed(0)
    model = Transformer(8, 2, 1, 2, 16, dropout=0.0, batch_first=True, norm_first=True, activation="gelu")
    state = {k: np.array(v, copy=True) for k, v in model.state_dict().items()}
    batches = _train_batches()
    ref = torch_ref([state, batches], lambda: _torch_train(state, batches))
    opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    mask = Transformer.generate_square_subsequent_mask(5)

    def train_step(src, tgt, tkpm, y):
        opt.zero_grad()
        out = model(src, tgt, tgt_mask=mask, tgt_key_padding_mask=tkpm, tgt_is_causal=True)
        loss = ((out - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    step = gc.compile(train_step, batches[0])
    losses = [float(step(*b)) for b in batches]
    np.testing.assert_allclose(losses, ref["losses"], rtol=TOL32, atol=TOL32)
    for key, v in model.state_dict().items():
        _close(v, ref[f"state.{key}"], TOL32, key)
        assert not np.array_equal(v, state[key]), f"{key} did not train"
    path = str(tmp_path / "transformer_train.graphc")
    step.save(path)
    loaded = gc.load(path)
    src, tgt, tkpm, y = batches[1]
    np.testing.assert_allclose(float(loaded(src[:2], tgt[:2], tkpm[:2], y[:2])),
                               float(step(src[:2], tgt[:2], tkpm[:2], y[:2])), rtol=1e-6)
