"""Readers of ONNX's stateful sequence ops for decoder models (opset 27): CausalConvWithState
(Mamba's and Gated DeltaNet's depthwise causal convolution with a carried window) and
LinearAttention (the linear, gated, delta and gated-delta recurrences, with grouped KV heads),
as onnx's reference computes them: the convolution in the input's type, the attention state and
arithmetic in float32, cast back at the end. LinearAttention unrolls its recurrence over the
sequence, which must then have a static length.
"""
from __future__ import annotations

import graphc as gc  # the torch namespace: its functions are the composites read here (composite.py)

from .composite import composing
from .shape_readers import _rank, _shape


def _causal_conv(r, args):
    x, weight, bias, past = (list(args) + [None, None])[:4]
    activation = r.attrs().get("activation", "none")
    if activation not in ("none", "silu", "swish"):
        raise r.error(f"CausalConvWithState with activation={activation!r}; ONNX's are none, silu and swish")
    if _rank(x) != 3 or _rank(weight) != 3:
        raise r.error("CausalConvWithState takes (batch, channels, length) inputs and a (channels, 1, k) weight")
    channels, k = _shape(weight)[0], _shape(weight)[2]
    with composing(r) as t:
        v = t(x)
        window = t(past) if past is not None else gc.zeros(1, channels, k - 1, dtype=v.dtype).expand(
            v.shape[0], channels, k - 1)
        padded = gc.cat([window, v], 2)
        out = gc.nn.functional.conv1d(padded, t(weight), None if bias is None else t(bias), groups=channels)
        if activation != "none":
            wide = out.float()
            out = (wide * gc.sigmoid(wide)).cast(v.dtype.name)
        length = _shape(x)[2] + k - 1
        return [t.value(out), t.value(padded[:, :, length - (k - 1):])]


def _heads(x, heads: int):
    """(B, T, H*D) -> (B, H, T, D) in float32."""
    b, steps, width = x.shape
    return x.float().reshape(b, steps, heads, width // heads).permute(0, 2, 1, 3)


def _linear_attention(r, args):
    q, k, v, past, decay, beta = (list(args) + [None] * 3)[:6]
    attrs = r.attrs()
    rule = attrs.get("update_rule", "gated_delta")
    if rule not in ("linear", "gated", "delta", "gated_delta"):
        raise r.error(f"LinearAttention with update_rule={rule!r}")
    heads_q, heads_kv = int(attrs["q_num_heads"]), int(attrs["kv_num_heads"])
    if heads_q <= 0 or heads_kv <= 0 or heads_q % heads_kv:
        raise r.error(f"LinearAttention: q_num_heads {heads_q} must be a positive multiple of kv_num_heads {heads_kv}")
    gating, correcting = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    if gating != (decay is not None) or correcting != (beta is not None):
        raise r.error(f"LinearAttention's update_rule {rule!r}: the gated rules take a decay input and the delta "
                      "rules a beta input, the others neither")
    steps = _shape(q)[1]
    if not isinstance(steps, int):
        raise r.error(f"LinearAttention over a symbolic sequence length {steps}: graphc unrolls the recurrence")
    d_k, d_v = _shape(q)[2] // heads_q, _shape(v)[2] // heads_kv
    scale = float(attrs.get("scale", 0.0)) or 1.0 / d_k ** 0.5
    with composing(r) as t:
        q4, k4, v4 = _heads(t(q), heads_q), _heads(t(k), heads_kv), _heads(t(v), heads_kv)
        batch = q4.shape[0]
        state = t(past).float() if past is not None else gc.zeros(1, heads_kv, d_k, d_v).expand(batch, heads_kv, d_k, d_v)
        g4 = _gate(t(decay), heads_kv, d_k) if gating else None
        b4 = _heads(t(beta), _shape(beta)[2]) if correcting else None
        outputs = []
        for i in range(steps):
            k_t, v_t = k4[:, :, i], v4[:, :, i]
            if gating:
                state = state * gc.exp(g4[:, :, i]).unsqueeze(-1)
            if correcting:
                v_t = b4[:, :, i] * (v_t - gc.einsum("bhdm,bhd->bhm", state, k_t))
            state = state + k_t.unsqueeze(-1) * v_t.unsqueeze(-2)
            read = state if heads_q == heads_kv else gc.repeat_interleave(state, heads_q // heads_kv, 1)
            outputs.append(gc.einsum("bhd,bhdm->bhm", q4[:, :, i], read) * scale)
        out = gc.stack(outputs, 2).permute(0, 2, 1, 3).reshape(batch, steps, heads_q * d_v)
        state_type = t(past).dtype if past is not None else t(q).dtype
        return [t.value(out.cast(t(q).dtype.name)), t.value(state.cast(state_type.name))]


def _gate(decay, heads: int, d_k: int):
    """The decay per head (B, T, H) or per key dim (B, T, H*d_k), as (B, H, T, 1 or d_k)."""
    if decay.shape[2] not in (heads, heads * d_k):
        raise ValueError(f"decay's last dim {decay.shape[2]} is neither {heads} nor {heads * d_k}")
    return _heads(decay, heads)


STATE_READERS = {"CausalConvWithState": _causal_conv, "LinearAttention": _linear_attention}
