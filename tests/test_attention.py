"""graphc.nn.attention against PyTorch: ``scaled_dot_product_attention`` and
``MultiheadAttention`` (outputs, attention weights and gradients, eager and compiled; masks,
layouts, kdim/vdim, add_bias_kv/add_zero_attn; PyTorch state dicts; compiled SGD steps; a
saved and reloaded plan). torch's side goes through the ``torch_ref`` fixture (live with
torch installed, else PyTorch 2.13's recording in tests/data/torch_test_attention.npz).

Tolerances: float64 comparisons use 1e-10 (the two libraries sum the same products in other
orders, about 1e-15 apart; a wrong mask, scale or head layout moves results by ~1e-1).
float32 training steps use 1e-5, the repo's float32 tolerance (tests/test_modules_torch.py).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import graphc as gc
from graphc import optim
from graphc.ir.errors import GraphcError
from graphc.nn.attention import MultiheadAttention, scaled_dot_product_attention
from conftest import HAVE_TORCH

if HAVE_TORCH:
    import torch

TOL64 = 1e-10
TOL32 = 1e-5


def _fp(obj):
    """``obj`` for the reference fingerprint: -inf in float masks (whose moments would be NaN) as
    -1e9, which changes the moments when the masked positions change."""
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


# ---- scaled_dot_product_attention ---------------------------------------------------------------
def _sdpa_case(name):
    """(q, k, v, kwargs with numpy masks) for one named case, float64."""
    rng = np.random.default_rng(sum(map(ord, name)))
    n = lambda *s: rng.standard_normal(s)  # noqa: E731
    q, k, v = n(2, 3, 4, 6), n(2, 3, 5, 6), n(2, 3, 5, 7)
    if name == "plain":
        return q, k, v, {}
    if name == "bool_mask":  # True takes part; query 1 has no key at all (torch: zeros)
        mask = rng.random((4, 5)) > 0.4
        mask[1] = False
        mask[:, 0] |= np.arange(4) != 1
        return q, k, v, {"attn_mask": mask}
    if name == "bool_mask_batched":  # per batch and head
        mask = rng.random((2, 3, 4, 5)) > 0.3
        mask[..., 2] = True
        return q, k, v, {"attn_mask": mask}
    if name == "float_mask":  # added to the scores, -inf included, one fully masked row
        mask = rng.standard_normal((4, 5))
        mask[rng.random((4, 5)) > 0.6] = -np.inf
        mask[:, 3] = 0.5
        mask[2] = -np.inf
        return q, k, v, {"attn_mask": mask}
    if name == "causal":
        return q, k, v, {"is_causal": True}
    if name == "causal_square":
        return q, k[:, :, :4], v[:, :, :4], {"is_causal": True}
    if name == "causal_tall":  # L > S
        return n(2, 3, 6, 6), k[:, :, :3], v[:, :, :3], {"is_causal": True}
    if name == "scale":
        return q, k, v, {"scale": 0.3}
    if name == "gqa":  # 6 query heads over 2 key/value heads
        return n(2, 6, 4, 6), k[:, :2], v[:, :2], {"enable_gqa": True}
    if name == "3d":
        return q[0], k[0], v[0], {"attn_mask": rng.random((4, 5)) > 0.2}
    raise KeyError(name)


SDPA_CASES = ["plain", "bool_mask", "bool_mask_batched", "float_mask", "causal", "causal_square", "causal_tall",
              "scale", "gqa", "3d"]


def _torch_sdpa(q, k, v, kwargs, cotangent):
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    kw = {a: torch.tensor(b) if isinstance(b, np.ndarray) else b for a, b in kwargs.items()}
    out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, **kw)
    (out * torch.tensor(cotangent)).sum().backward()
    return {"out": out.detach().numpy(), "dq": tq.grad.numpy(), "dk": tk.grad.numpy(), "dv": tv.grad.numpy()}


def _gc_kwargs(kwargs):
    return {a: gc.tensor(b) if isinstance(b, np.ndarray) else b for a, b in kwargs.items()}


@pytest.mark.parametrize("name", SDPA_CASES)
def test_sdpa_matches_torch_forward_and_gradient(name, torch_ref):
    q, k, v, kwargs = _sdpa_case(name)
    cot = np.random.default_rng(3).standard_normal(q.shape[:-1] + v.shape[-1:])
    ref = torch_ref(_fp([q, k, v, kwargs, cot]), lambda: _torch_sdpa(q, k, v, kwargs, cot))
    gq, gk, gv = (gc.tensor(a, requires_grad=True) for a in (q, k, v))
    out = scaled_dot_product_attention(gq, gk, gv, **_gc_kwargs(kwargs))
    assert out.dtype == gc.float64
    _close(out, ref["out"], TOL64, "output")
    (out * gc.tensor(cot)).sum().backward()
    for t, key in ((gq, "dq"), (gk, "dk"), (gv, "dv")):
        assert np.all(np.isfinite(t.grad.numpy())), key
        _close(t.grad, ref[key], TOL64, key)


@pytest.mark.parametrize("name", ["plain", "bool_mask", "float_mask", "causal", "gqa"])
def test_sdpa_compiled_matches_torch(name, torch_ref):
    """Compiled forward (batch dim symbolic; masks are constants of the function), run at the
    traced and at another batch size. (A plan differentiates parameters, not inputs: compiled
    gradients are checked through MultiheadAttention's parameters below.)"""
    q, k, v, kwargs = _sdpa_case(name)
    cot = np.random.default_rng(3).standard_normal(q.shape[:-1] + v.shape[-1:])
    ref = torch_ref(_fp([q, k, v, kwargs, cot]), lambda: _torch_sdpa(q, k, v, kwargs, cot))
    infer = gc.compile(lambda a, b, c: scaled_dot_product_attention(a, b, c, **_gc_kwargs(kwargs)), (q, k, v))
    _close(infer(q, k, v), ref["out"], TOL64, "compiled output")
    if name != "bool_mask":  # its mask has no batch dim, so another batch size runs too
        _close(infer(q[:1], k[:1], v[:1]), ref["out"][:1], TOL64, "compiled output, batch 1")



def test_sdpa_dropout_uses_graphc_dropout():
    """Weights are zeroed with probability p and the rest scaled by 1/(1-p): with value = I the
    output is the weights, so every entry is 0 or 2 * the undropped weight."""
    gc.manual_seed(0)
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((4, 8, 8)), rng.standard_normal((4, 8, 8))
    eye = np.broadcast_to(np.eye(8), (4, 8, 8)).copy()
    plain = scaled_dot_product_attention(gc.tensor(q), gc.tensor(k), gc.tensor(eye)).numpy()
    dropped = scaled_dot_product_attention(gc.tensor(q), gc.tensor(k), gc.tensor(eye), dropout_p=0.5).numpy()
    kept = dropped != 0
    np.testing.assert_allclose(dropped[kept], 2 * plain[kept], rtol=1e-12)
    assert 0.3 < kept.mean() < 0.7
    zero = scaled_dot_product_attention(gc.tensor(q), gc.tensor(k), gc.tensor(eye), dropout_p=1.0).numpy()
    assert not zero.any()


def test_sdpa_errors():
    x = gc.randn(2, 3, 4)
    with pytest.raises(GraphcError, match="is_causal"):
        scaled_dot_product_attention(x, x, x, attn_mask=gc.ones(3, 3) > 0, is_causal=True)
    with pytest.raises(GraphcError, match="multiple"):
        scaled_dot_product_attention(gc.randn(1, 3, 2, 4), gc.randn(1, 2, 2, 4), gc.randn(1, 2, 2, 4),
                                     enable_gqa=True)


# ---- MultiheadAttention -------------------------------------------------------------------------
MHA_CONFIGS = {
    "default": {},
    "batch_first": {"batch_first": True},
    "kdim_vdim": {"kdim": 3, "vdim": 5},
    "bias_kv_zero_attn": {"add_bias_kv": True, "add_zero_attn": True},
    "no_bias": {"bias": False},
    "bias_kv_kdim": {"add_bias_kv": True, "kdim": 4, "batch_first": True},
}
MASKS = ["none", "key_padding", "bool_attn", "float_attn", "both", "attn_3d", "causal"]


def _mha_inputs(config, masks, unbatched=False):
    kw = MHA_CONFIGS[config]
    rng = np.random.default_rng(sum(map(ord, config + masks)))
    kd, vd, bf = kw.get("kdim", 6), kw.get("vdim", 6), kw.get("batch_first", False)
    n, ln, s = 2, 4, 5

    def shape(length, dim):
        return (length, dim) if unbatched else (n, length, dim) if bf else (length, n, dim)

    x, y, z = rng.standard_normal(shape(ln, 6)), rng.standard_normal(shape(s, kd)), rng.standard_normal(shape(s, vd))
    kpm = rng.random((n, s)) > 0.6
    kpm[:, 1] = False
    kpm = kpm[0] if unbatched else kpm
    bool_attn = rng.random((ln, s)) > 0.7
    float_attn = rng.standard_normal((ln, s))
    float_attn[rng.random((ln, s)) > 0.7] = -np.inf
    float_attn[:, 1] = 0.0
    masks_kw = {
        "none": {}, "key_padding": {"key_padding_mask": kpm}, "bool_attn": {"attn_mask": bool_attn},
        "float_attn": {"attn_mask": float_attn}, "both": {"attn_mask": bool_attn, "key_padding_mask": kpm},
        "attn_3d": {"attn_mask": rng.random(((1 if unbatched else n) * 2, ln, s)) > 0.7},
        "causal": {"attn_mask": ~np.tri(ln, s, dtype=bool), "is_causal": True},
    }[masks]
    return x, y, z, masks_kw


def _torch_mha(config, x, y, z, masks_kw, flags, cot):
    torch.manual_seed(0)
    tm = torch.nn.MultiheadAttention(6, 2, **MHA_CONFIGS[config]).double()
    state = {k: v.detach().numpy().copy() for k, v in tm.state_dict().items()}
    tx, ty, tz = (torch.tensor(a, requires_grad=True) for a in (x, y, z))
    kw = {a: torch.tensor(b) if isinstance(b, np.ndarray) else b for a, b in masks_kw.items()}
    out, weights = tm(tx, ty, tz, **kw, **flags)
    (out * torch.tensor(cot)).sum().backward()
    res = {"out": out.detach().numpy(), "dx": tx.grad.numpy(), "dy": ty.grad.numpy(), "dz": tz.grad.numpy()}
    res.update({f"state.{k}": v for k, v in state.items()})
    res.update({f"grad.{k}": p.grad.numpy() for k, p in tm.named_parameters()})
    if weights is not None:
        res["weights"] = weights.detach().numpy()
    return res


def _check_mha(config, masks, flags, torch_ref, unbatched=False, compiled=False):
    x, y, z, masks_kw = _mha_inputs(config, masks, unbatched)
    cot_shape = x.shape
    cot = np.random.default_rng(5).standard_normal(cot_shape)
    ref = torch_ref(_fp([config, x, y, z, masks_kw, flags, cot]), lambda: _torch_mha(config, x, y, z, masks_kw, flags, cot))
    gm = MultiheadAttention(6, 2, **MHA_CONFIGS[config]).double()
    state = {k[len("state."):]: v for k, v in ref.items() if k.startswith("state.")}
    assert list(state) == list(gm.state_dict())
    gm.load_state_dict(state)
    gkw = _gc_kwargs(masks_kw)
    if not compiled:
        gx, gy, gz = (gc.tensor(a, requires_grad=True) for a in (x, y, z))
        out, weights = gm(gx, gy, gz, **gkw, **flags)
        (out * gc.tensor(cot)).sum().backward()
        grads = {"dx": gx.grad, "dy": gy.grad, "dz": gz.grad}
        grads.update({f"grad.{k}": p.grad for k, p in gm.named_parameters()})
    else:
        kpm = masks_kw.get("key_padding_mask")  # an input: its batch dim is the inputs' (symbolic)
        gkw.pop("key_padding_mask", None)

        def run(a, b, c, g, *mask):
            o, w = gm(a, b, c, key_padding_mask=mask[0] if mask else None, **gkw, **flags)
            (o * g).sum().backward()
            return (o, *(p.grad for p in gm.parameters())) + ((w,) if w is not None else ())

        inputs = (x, y, z, cot) + ((kpm,) if kpm is not None else ())
        dims = None if MHA_CONFIGS[config].get("batch_first") else {i: {1: "N"} for i in range(4)}
        got = gc.compile(run, inputs, dynamic_dims=dims)(*inputs)
        names = [f"grad.{k}" for k, _ in gm.named_parameters()]
        out, grads = got[0], dict(zip(names, got[1:1 + len(names)]))  # a plan differentiates parameters
        weights = got[1 + len(names)] if len(got) > 1 + len(names) else None
    _close(out, ref["out"], TOL64, "output")
    if flags.get("need_weights", True):
        _close(weights, ref["weights"], TOL64, "attn weights")
    else:
        assert weights is None and "weights" not in ref
    for key, g in grads.items():
        _close(g, ref[key], TOL64, key)


@pytest.mark.parametrize("masks", MASKS)
@pytest.mark.parametrize("config", list(MHA_CONFIGS))
def test_mha_matches_torch(config, masks, torch_ref):
    _check_mha(config, masks, {}, torch_ref)


@pytest.mark.parametrize("masks", ["none", "key_padding", "float_attn", "causal"])
@pytest.mark.parametrize("config", ["default", "batch_first", "bias_kv_zero_attn"])
@pytest.mark.parametrize("weights", ["none", "per_head"])
def test_mha_weight_options_match_torch(config, masks, weights, torch_ref):
    flags = {"need_weights": False} if weights == "none" else {"average_attn_weights": False}
    _check_mha(config, masks, flags, torch_ref)


@pytest.mark.parametrize("masks", ["none", "key_padding", "bool_attn"])
def test_mha_unbatched_matches_torch(masks, torch_ref):
    _check_mha("default", masks, {}, torch_ref, unbatched=True)


@pytest.mark.parametrize("config,masks", [("default", "key_padding"), ("batch_first", "both"),
                                          ("bias_kv_zero_attn", "float_attn"), ("kdim_vdim", "bool_attn"),
                                          ("batch_first", "none")])
def test_mha_compiled_matches_torch(config, masks, torch_ref):
    """One compiled function: forward and backward; time-major inputs compile with their
    sequence dim declared (``dynamic_dims``: dim 0 "T", dim 1 "N")."""
    _check_mha(config, masks, {}, torch_ref, compiled=True)


def test_mha_initial_state_layout_matches_torch(torch_ref):
    """Keys, order, shapes, dtypes as torch's; xavier-uniform projections within their bound,
    zero biases, xavier-normal bias_k/bias_v."""
    for config, kw in MHA_CONFIGS.items():
        tsd = torch_ref([config], lambda kw=kw: {
            k: np.zeros(v.shape, v.detach().numpy().dtype)
            for k, v in torch.nn.MultiheadAttention(6, 2, **kw).state_dict().items()}, name=config)
        gc.manual_seed(0)
        gsd = MultiheadAttention(6, 2, **kw).state_dict()
        assert list(gsd) == list(tsd), config
        for k in tsd:
            assert gsd[k].shape == tsd[k].shape and gsd[k].dtype == tsd[k].dtype, (config, k)
        for k, v in gsd.items():
            if k == "in_proj_weight":
                assert np.abs(v).max() <= math.sqrt(6 / (6 + 18)) and v.std() > 0.1
            elif k.endswith("proj_weight"):
                assert np.abs(v).max() <= math.sqrt(6 / (6 + v.shape[1])) and v.std() > 0.1
            elif k in ("in_proj_bias", "out_proj.bias"):
                assert not v.any()
            elif k == "out_proj.weight":
                assert np.abs(v).max() <= 1 / math.sqrt(6)
            elif k in ("bias_k", "bias_v"):
                assert v.any()


def test_mha_errors():
    with pytest.raises(GraphcError, match="divisible"):
        MultiheadAttention(6, 4)
    m = MultiheadAttention(4, 2)
    x = gc.randn(3, 2, 4)
    with pytest.raises(GraphcError, match="is_causal"):
        m(x, x, x, is_causal=True)


# ---- training and plans ---------------------------------------------------------------------------
def _train_batches(batch_first):
    rng = np.random.default_rng(11)
    out = []
    for _ in range(3):
        x = rng.standard_normal((4, 5, 8) if batch_first else (5, 4, 8)).astype(np.float32)
        kpm = rng.random((4, 5)) > 0.7
        kpm[:, 0] = False
        y = rng.standard_normal(x.shape).astype(np.float32)
        out.append((x, kpm, y))
    return out


TRAIN_KW = {"batch_first": {"batch_first": True, "add_bias_kv": True},
            "time_major": {"add_zero_attn": True}}


def _torch_train(name, state, batches):
    tm = torch.nn.MultiheadAttention(8, 2, **TRAIN_KW[name])
    tm.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in state.items()})
    opt = torch.optim.SGD(tm.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for x, kpm, y in batches:
        opt.zero_grad()
        tx = torch.from_numpy(x)
        out, w = tm(tx, tx, tx, key_padding_mask=torch.from_numpy(kpm))
        loss = ((out - torch.from_numpy(y)) ** 2).mean() + w.square().mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": np.array(losses), **{f"state.{k}": v.detach().numpy().copy()
                                           for k, v in tm.state_dict().items()}}


@pytest.mark.parametrize("name", list(TRAIN_KW))
def test_mha_compiled_training_steps_match_torch(name, torch_ref, tmp_path):
    """3 compiled SGD steps (momentum) with loss.backward(); opt.step() vs torch's, then the
    plan saved and reloaded runs its 4th step as the live plan does."""
    gc.manual_seed(0)
    gm = MultiheadAttention(8, 2, **TRAIN_KW[name])
    state = {k: np.array(v, copy=True) for k, v in gm.state_dict().items()}
    batches = _train_batches(name == "batch_first")
    ref = torch_ref([name, state, batches], lambda: _torch_train(name, state, batches))
    opt = optim.SGD(gm.parameters(), lr=0.1, momentum=0.9)

    def train_step(x, kpm, y):
        opt.zero_grad()
        out, w = gm(x, x, x, key_padding_mask=kpm)
        loss = ((out - y) ** 2).mean() + w.square().mean()
        loss.backward()
        opt.step()
        return loss

    dims = None if name == "batch_first" else {0: {1: "N"}, 2: {1: "N"}}  # time-major: the batch is dim 1
    step = gc.compile(train_step, batches[0], dynamic_dims=dims)
    losses = [float(step(*b)) for b in batches]
    np.testing.assert_allclose(losses, ref["losses"], rtol=TOL32, atol=TOL32)
    for key, v in gm.state_dict().items():
        _close(v, ref[f"state.{key}"], TOL32, key)
        assert not np.array_equal(v, state[key]), f"{key} did not train"
    path = str(tmp_path / "mha.graphc")
    step.save(path)
    loaded = gc.load(path)
    x, kpm, y = batches[0]
    np.testing.assert_allclose(float(loaded(x, kpm, y)), float(step(x, kpm, y)), rtol=1e-6)


def test_mha_inference_plan_saves_and_reloads(tmp_path):
    """An eval plan (need_weights=False, causal hint: the sdpa path) saved, loaded with no model
    code, run at another batch size: the same numbers as the eager module."""
    gc.manual_seed(0)
    m = MultiheadAttention(8, 2, batch_first=True, dropout=0.3).eval()
    causal = gc.tensor(~np.tri(5, 5, dtype=bool))

    def f(x):
        return m(x, x, x, attn_mask=causal, need_weights=False, is_causal=True)[0]

    x = np.random.default_rng(0).standard_normal((3, 5, 8)).astype(np.float32)
    plan = gc.compile(f, (x,))
    path = str(tmp_path / "mha_infer.graphc")
    plan.save(path)
    loaded = gc.load(path)
    for batch in (x, x[:2]):
        want = f(gc.tensor(batch)).numpy()
        np.testing.assert_allclose(loaded(batch), want, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(plan(batch), want, rtol=1e-6, atol=1e-6)


def test_mha_dropout_only_in_training():
    gc.manual_seed(0)
    m = MultiheadAttention(8, 2, dropout=0.5, batch_first=True)
    x = gc.randn(2, 6, 8)
    _, w_train = m(x, x, x, average_attn_weights=False)
    assert (w_train.numpy() == 0).any()
    m.eval()
    _, w_eval = m(x, x, x, average_attn_weights=False)
    assert not (w_eval.numpy() == 0).any()
    np.testing.assert_allclose(w_eval.numpy().sum(-1), 1.0, rtol=1e-6)
    m.train()  # and inside a compiled training step: a fresh mask each step
    opt = optim.SGD(m.parameters(), lr=0.0)

    def step(x):
        opt.zero_grad()
        out, w = m(x, x, x, average_attn_weights=False)
        out.sum().backward()
        opt.step()
        return w

    xb = np.random.default_rng(0).standard_normal((2, 6, 8)).astype(np.float32)
    plan = gc.compile(step, (xb,))
    w1, w2 = plan(xb), plan(xb)
    assert (w1 == 0).any() and not np.array_equal(w1 == 0, w2 == 0)


def test_float_masks_take_the_inputs_dtype():
    """A float64 numpy mask on float32 inputs: float32 results (PyTorch refuses the mix)."""
    rng = np.random.default_rng(0)
    mask = np.where(rng.random((4, 5)) > 0.7, -np.inf, 0.0)
    q, k = gc.randn(2, 4, 8), gc.randn(2, 5, 8)
    out = scaled_dot_product_attention(q, k, k, attn_mask=gc.tensor(mask))
    want = scaled_dot_product_attention(q, k, k, attn_mask=gc.tensor(mask.astype(np.float32)))
    assert out.dtype == gc.float32
    np.testing.assert_array_equal(out.numpy(), want.numpy())
    m = MultiheadAttention(8, 2, batch_first=True)
    out, w = m(q, k, k, attn_mask=gc.tensor(mask), key_padding_mask=gc.tensor(np.zeros((2, 5))))
    assert out.dtype == w.dtype == gc.float32


# ---- TransformerEncoderLayer, TransformerEncoder -------------------------------------------------
ENCODER_CONFIGS = {
    "post_norm_relu": {},
    "pre_norm_gelu_batch_first": {"norm_first": True, "activation": "gelu", "batch_first": True},
    "no_bias_eps": {"bias": False, "layer_norm_eps": 1e-3},
    "callable_silu": {"activation": "silu"},  # a callable: F.silu on each side
}
ENCODER_MASKS = ["none", "key_padding", "causal", "both"]


def _encoder(lib, functional, config, final_norm):
    kw = dict(ENCODER_CONFIGS[config])
    if kw.get("activation") == "silu":
        kw["activation"] = functional.silu
    layer = lib.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, **kw)
    return lib.TransformerEncoder(layer, 2, norm=lib.LayerNorm(8) if final_norm else None, enable_nested_tensor=False)


def _encoder_inputs(config, masks):
    rng = np.random.default_rng(sum(map(ord, config + masks)))
    bf = ENCODER_CONFIGS[config].get("batch_first", False)
    x = rng.standard_normal((3, 5, 8) if bf else (5, 3, 8))
    kpm = rng.random((3, 5)) > 0.6
    kpm[:, 0] = False
    causal = np.triu(np.full((5, 5), -np.inf), 1)  # nn.Transformer.generate_square_subsequent_mask(5)
    kw = {"none": {}, "key_padding": {"src_key_padding_mask": kpm},
          "causal": {"mask": causal, "is_causal": True},
          "both": {"mask": causal, "src_key_padding_mask": kpm}}[masks]
    return x, kw


def _torch_encoder(config, masks, mode, x, kw, cot):
    torch.manual_seed(0)
    te = _encoder(torch.nn, torch.nn.functional, config, final_norm=True).double().train(mode == "train")
    state = {k: v.detach().numpy().copy() for k, v in te.state_dict().items()}
    tx = torch.tensor(x, requires_grad=True)  # gradients on: PyTorch's plain path, not its eval fast path
    out = te(tx, **{a: torch.tensor(b) if isinstance(b, np.ndarray) else b for a, b in kw.items()})
    (out * torch.tensor(cot)).sum().backward()
    return {"out": out.detach().numpy(), "dx": tx.grad.numpy(), **{f"state.{k}": v for k, v in state.items()},
            **{f"grad.{k}": p.grad.numpy() for k, p in te.named_parameters()}}


@pytest.mark.filterwarnings("ignore:Support for mismatched src_key_padding_mask and mask is deprecated")
@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("masks", ENCODER_MASKS)
@pytest.mark.parametrize("config", list(ENCODER_CONFIGS))
def test_transformer_encoder_matches_torch(config, masks, mode, torch_ref):
    """PyTorch's state_dict loaded; output, input and parameter gradients in float64 (dropout 0,
    so train and eval compute the same formula in both libraries)."""
    import graphc.nn.functional as F
    from graphc import nn
    from graphc.nn import transformer

    x, kw = _encoder_inputs(config, masks)
    cot = np.random.default_rng(7).standard_normal(x.shape)
    ref = torch_ref(_fp([config, masks, mode, x, kw, cot]), lambda: _torch_encoder(config, masks, mode, x, kw, cot))

    class Lib:  # graphc's classes under torch.nn's names
        TransformerEncoderLayer, TransformerEncoder, LayerNorm = (transformer.TransformerEncoderLayer,
                                                                  transformer.TransformerEncoder, nn.LayerNorm)

    ge = _encoder(Lib, F, config, final_norm=True).double().train(mode == "train")
    state = {k[len("state."):]: v for k, v in ref.items() if k.startswith("state.")}
    assert list(state) == list(ge.state_dict())
    ge.load_state_dict(state)
    gx = gc.tensor(x, requires_grad=True)
    out = ge(gx, **_gc_kwargs(kw))
    _close(out, ref["out"], TOL64, "output")
    (out * gc.tensor(cot)).sum().backward()
    _close(gx.grad, ref["dx"], TOL64, "dx")
    for k, p in ge.named_parameters():
        _close(p.grad, ref[f"grad.{k}"], TOL64, f"grad.{k}")


def _torch_encoder_train(state, batches):
    layer = torch.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True,
                                             norm_first=True, activation="gelu")
    te = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    te.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in state.items()})
    opt = torch.optim.SGD(te.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for x, kpm, y in batches:
        opt.zero_grad()
        loss = ((te(torch.from_numpy(x), src_key_padding_mask=torch.from_numpy(kpm)) - torch.from_numpy(y)) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": np.array(losses), **{f"state.{k}": v.detach().numpy().copy() for k, v in te.state_dict().items()}}


def test_transformer_encoder_compiled_training_matches_torch(torch_ref, tmp_path):
    """3 compiled SGD steps of a pre-norm GELU encoder (batch first, key padding mask as an input
    sharing the symbolic batch dim) vs torch's; the saved plan resumes as the live one."""
    from graphc.nn.transformer import TransformerEncoder, TransformerEncoderLayer

    gc.manual_seed(0)
    layer = TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True, norm_first=True,
                                    activation="gelu")
    ge = TransformerEncoder(layer, 2, enable_nested_tensor=False)
    state = {k: np.array(v, copy=True) for k, v in ge.state_dict().items()}
    batches = _train_batches(True)
    ref = torch_ref([state, batches], lambda: _torch_encoder_train(state, batches))
    opt = optim.SGD(ge.parameters(), lr=0.05, momentum=0.9)

    def train_step(x, kpm, y):
        opt.zero_grad()
        loss = ((ge(x, src_key_padding_mask=kpm) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    step = gc.compile(train_step, batches[0])
    losses = [float(step(*b)) for b in batches]
    np.testing.assert_allclose(losses, ref["losses"], rtol=TOL32, atol=TOL32)
    for key, v in ge.state_dict().items():
        _close(v, ref[f"state.{key}"], TOL32, key)
        assert not np.array_equal(v, state[key]), f"{key} did not train"
    path = str(tmp_path / "encoder.graphc")
    step.save(path)
    loaded = gc.load(path)
    x, kpm, y = batches[1]
    np.testing.assert_allclose(float(loaded(x[:2], kpm[:2], y[:2])), float(step(x[:2], kpm[:2], y[:2])), rtol=1e-6)


def test_transformer_encoder_layers_are_independent_copies_and_dropout_trains_only():
    from graphc import nn
    from graphc.nn.transformer import TransformerEncoder, TransformerEncoderLayer

    gc.manual_seed(0)
    layer = TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.5, activation=nn.GELU())
    enc = TransformerEncoder(layer, 2)
    w0, w1 = enc.layers[0].linear1.weight, enc.layers[1].linear1.weight
    assert w0 is not w1 and w0 is not layer.linear1.weight
    np.testing.assert_array_equal(w0.numpy(), w1.numpy())  # copies of one layer, as PyTorch's _get_clones
    assert "layers.0.activation" not in enc.state_dict()
    x = gc.randn(5, 3, 8)
    assert not np.allclose(enc(x).numpy(), enc(x).numpy())  # dropout draws anew
    enc.eval()
    np.testing.assert_array_equal(enc(x).numpy(), enc(x).numpy())
    with pytest.raises(GraphcError, match="relu/gelu"):
        TransformerEncoderLayer(8, 2, activation="tanh")
