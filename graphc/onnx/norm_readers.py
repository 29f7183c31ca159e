"""Readers of ONNX's normalization ops (see ``readers`` for the contract): BatchNormalization
(inference), InstanceNormalization, LayerNormalization (with its Mean and InvStdDev outputs),
RMSNormalization, GroupNormalization, LpNormalization, MeanVarianceNormalization, and
RotaryEmbedding (a rotation of feature pairs, read here beside the norms of the same layers).
Written with graphc's functions (``F.rms_norm``, ``gc.*``; ``composite.composing``).

Semantics decisions (onnx's reference is the rule; where it departs from the spec, noted):
- ``stash_type`` 1 (the default, the only value onnx's reference runs; others are refused):
  LayerNormalization and RMSNormalization compute stage one (the standardization) in float32,
  or in float64 for a float64 X (as onnx's reference and onnxruntime: stashing never narrows),
  then cast back to X's type before the scale and bias. LayerNormalization's Mean and InvStdDev
  are float32 (type U, as onnxruntime gives; onnx's reference gives X's type).
- GroupNormalization follows its function body, which is its reference: stage one in float32
  (float64 too), variance ``E[x**2] - E[x]**2``; F.group_norm's two-pass variance is more exact
  but ~1e-5 off the reference on groups whose mean is large against their spread. Version 18
  takes scale and bias per group and computes in X's type; version 21 per channel.
- LayerNormalization's variance is two-pass, as its Python reference (and PyTorch).
- LpNormalization with p=1 divides by ``sum(|x|)`` (the spec and onnxruntime; onnx's reference
  sums x itself); a zero norm gives 0. Only p 1 and 2 are defined.
- MeanVarianceNormalization is its function body, ``(x - mean) / (sqrt(E[x**2] - E[x]**2) +
  1e-9)`` over ``axes``; float32 only, since that body adds a float32 epsilon, which onnx's
  reference and onnxruntime reject for other types.
- RotaryEmbedding computes in X's type, as onnx's reference; caches are (max_position,
  rotary_dim / 2) with position_ids, (batch, sequence, rotary_dim / 2) without.
"""
from __future__ import annotations

import math

import numpy as np

import graphc as gc  # the torch namespace: its functions are the composites read here (composite.py)
import graphc.nn.functional as F
from ..ir.graph import Value
from .composite import composing
from .elementwise_readers import scalar
from .shape_readers import _known, _rank, _shape


def _batch_norm(r, args):
    attrs = r.attrs()
    if attrs.get("training_mode", 0):
        raise r.error("BatchNormalization in training mode: an imported model is an inference plan")
    x, shape = args[0], list(_shape(args[0]))
    if len(shape) > 4:  # per channel: (N, C, D, H, W) normalizes as (N, C, D*H, W)
        if not all(isinstance(d, int) for d in shape[2:]):
            raise r.error(f"BatchNormalization over symbolic spatial dims {shape[2:]}")
        flat = r.emit("reshape", [x], {"shape": [shape[0], shape[1], math.prod(shape[2:-1]), shape[-1]]})
        out = r.emit("batch_norm", [flat, *args[1:5]], {"eps": float(attrs.get("epsilon", 1e-5))})
        return [r.emit("reshape", [out], {"shape": shape})]
    return [r.emit("batch_norm", args[:5], {"eps": float(attrs.get("epsilon", 1e-5))})]


def _normalize(r, x, dims: list, eps: float) -> Value:
    """``(x - mean) / sqrt(var + eps)`` over ``dims`` (biased variance, as every norm layer)."""
    centered = r.emit("sub", [x, r.emit("mean", [x], {"dims": dims, "keepdim": True})])
    var = r.emit("mean", [r.emit("mul", [centered, centered])], {"dims": dims, "keepdim": True})
    return r.emit("mul", [centered, r.emit("rsqrt", [r.emit("add", [var, scalar(r, x, eps)])])])


def _instance_norm(r, args):
    x, scale, bias = args
    rank = _rank(x)
    channel_shape = (-1,) + (1,) * (rank - 2)  # per-channel scale and bias broadcast over the spatial dims
    scale, bias = (np.reshape(p, channel_shape) if _known(p) else r.emit("reshape", [p], {"shape": list(channel_shape)})
                   for p in (scale, bias))
    out = _normalize(r, x, list(range(2, rank)), float(r.attrs().get("epsilon", 1e-5)))
    return [r.emit("add", [r.emit("mul", [out, scale]), bias])]


# ---- the stash_type norms: stage one in float32 -----------------------------------------------
def _stash(r, op: str, attrs) -> float:
    """The node's epsilon, once its stash_type is checked."""
    stash = int(attrs.get("stash_type", 1))
    if stash != 1:
        raise r.error(f"{op} with stash_type {stash}: graphc computes stage one in float32 only (stash_type 1)")
    return float(attrs.get("epsilon", 1e-5))


def _trailing_dims(r, op: str, x, axis: int) -> list:
    """``[axis, ..., rank - 1]``: the normalized dims of LayerNormalization and RMSNormalization."""
    rank = _rank(x)
    if not -rank <= axis < rank:
        raise r.error(f"{op} with axis {axis} for a rank-{rank} input (the range is [-{rank}, {rank}))")
    return list(range(axis % rank, rank))


def _stage_one(v):
    """``v`` in the precision of stage one: float32, or float64 for a float64 input."""
    return v if v.dtype.name in ("float32", "float64") else v.cast("float32")


def _as(v, dtype: str):
    return v if v.dtype.name == dtype else v.cast(dtype)


def _layer_norm(r, args):
    x, scale, bias = (list(args) + [None])[:3]
    attrs = r.attrs()
    eps = _stash(r, "LayerNormalization", attrs)
    dims = _trailing_dims(r, "LayerNormalization", x, int(attrs.get("axis", -1)))
    with composing(r) as t:
        v = t(x)
        u = _stage_one(v)
        mean = u.mean(dims, keepdim=True)
        centered = u - mean
        inv_std = gc.rsqrt((centered * centered).mean(dims, keepdim=True) + eps)
        y = _as(centered * inv_std, v.dtype.name) * t(scale)
        if bias is not None:
            y = y + t(bias)
        return [t.value(y), t.value(_as(mean, "float32")), t.value(_as(inv_std, "float32"))]


def _rms_norm(r, args):
    x, scale = args[:2]
    attrs = r.attrs()
    eps = _stash(r, "RMSNormalization", attrs)
    dims = _trailing_dims(r, "RMSNormalization", x, int(attrs.get("axis", -1)))
    with composing(r) as t:
        v = t(x)
        normalized = F.rms_norm(_stage_one(v), [v.dims[d] for d in dims], eps=eps)
        return [t.value(_as(normalized, v.dtype.name) * t(scale))]


def _group_norm(r, args):
    x, scale, bias = args[:3]
    attrs = r.attrs()
    eps = _stash(r, "GroupNormalization", attrs) if r.version >= 21 else float(attrs.get("epsilon", 1e-5))
    groups, rank = int(attrs["num_groups"]), _rank(x)
    channels = _shape(x)[1] if rank >= 2 else None
    if not isinstance(channels, (int, np.integer)) or groups < 1 or channels % groups:
        raise r.error(f"GroupNormalization of an input of shape {_shape(x)} into {groups} groups: the channels "
                      "(dim 1) must be a static multiple of num_groups")
    with composing(r) as t:
        v = t(x)
        if r.version >= 21:  # stage one in float32; scale and bias per channel
            grouped = _as(v, "float32").reshape(v.shape[0], groups, -1)
            s, b = t(scale), t(bias)
        else:  # GroupNormalization-18: in X's type; scale and bias per group, repeated for its channels
            grouped = v.reshape(v.shape[0], groups, -1)
            s, b = (gc.repeat_interleave(t(p), channels // groups) for p in (scale, bias))
        mean, var = _one_pass_moments(grouped, [2])
        out = _as(((grouped - mean) / gc.sqrt(var + eps)).reshape(v.shape), v.dtype.name)
        per_channel = [int(channels)] + [1] * (rank - 2)
        return [t.value(out * s.reshape(per_channel) + b.reshape(per_channel))]


def _one_pass_moments(v, dims: list):
    """Mean and ``E[x**2] - E[x]**2`` over ``dims``, as the GroupNormalization and
    MeanVarianceNormalization function bodies (those ops' reference) compute them."""
    mean = v.mean(dims, keepdim=True)
    return mean, (v * v).mean(dims, keepdim=True) - mean * mean


def _lp_norm(r, args):
    attrs = r.attrs()
    p, rank = int(attrs.get("p", 2)), _rank(args[0])
    axis = int(attrs.get("axis", -1))
    if p not in (1, 2):
        raise r.error(f"LpNormalization with p={p}: ONNX defines only p 1 and 2")
    if not -rank <= axis < rank:
        raise r.error(f"LpNormalization with axis {axis} for a rank-{rank} input")
    with composing(r) as t:
        v = t(args[0])
        norm = v.abs().sum([axis % rank], keepdim=True) if p == 1 else gc.sqrt((v * v).sum([axis % rank], keepdim=True))
        zero = norm == 0
        return [t.value(gc.where(zero, 0.0, v / gc.where(zero, 1.0, norm)))]  # 0 / 0 is 0 here


def _mean_variance_norm(r, args):
    rank = _rank(args[0])
    axes = [int(a) for a in r.attrs().get("axes", [0, 2, 3])]
    if any(not -rank <= a < rank for a in axes):
        raise r.error(f"MeanVarianceNormalization over axes {axes} of a rank-{rank} input")
    dims = sorted({a % rank for a in axes})
    dtype = r.value(args[0]).type.dtype.name
    if dtype != "float32":
        raise r.error(f"MeanVarianceNormalization of {dtype}: its ONNX function body adds a float32 epsilon, "
                      "which onnx's reference and onnxruntime reject for other types")
    with composing(r) as t:
        v = t(args[0])
        mean, var = _one_pass_moments(v, dims)
        return [t.value((v - mean) / (gc.sqrt(var) + 1e-9))]


# ---- RotaryEmbedding ------------------------------------------------------------------------
def _rotary_embedding(r, args):
    x, cos, sin, positions = (list(args) + [None])[:4]
    attrs = r.attrs()
    rank, heads = _rank(x), int(attrs.get("num_heads", 0))
    if rank not in (3, 4) or (rank == 3 and heads < 1):
        raise r.error(f"RotaryEmbedding of a rank-{rank} input (ONNX takes (batch, heads, sequence, head_size), or "
                      "(batch, sequence, hidden) with num_heads)")
    with composing(r) as t:
        v = t(x)
        # (batch, sequence, heads, head_size), the layout of onnx's reference; caches gain the heads dim
        head_size = _shape(x)[3] if rank == 4 else _shape(x)[2] // heads
        v4 = v.transpose(1, 2) if rank == 4 else v.reshape(v.shape[0], v.shape[1], heads, head_size)
        rotary = int(attrs.get("rotary_embedding_dim", 0)) or head_size
        cos, sin = (_rotary_cache(r, t, c, positions, rotary) for c in (cos, sin))
        rotated = _rotate(v4, cos, sin, rotary, bool(attrs.get("interleaved", 0)))
        if rotary < head_size:
            rotated = gc.cat([rotated, gc.narrow(v4, 3, rotary, head_size - rotary)], 3)
        return [t.value(rotated.transpose(1, 2) if rank == 4 else rotated.reshape(v.shape))]


def _rotary_cache(r, t, cache, positions, rotary: int):
    """The cos or sin cache as (batch, sequence, 1, rotary / 2): rows picked by position_ids."""
    if rotary % 2 or _shape(cache)[-1] != rotary // 2:
        raise r.error(f"RotaryEmbedding with rotary_embedding_dim {rotary} and a cache of shape {_shape(cache)} "
                      "(its last dim must be rotary_embedding_dim / 2)")
    if len(_shape(cache)) != (2 if positions is not None else 3):
        raise r.error(f"RotaryEmbedding with a cache of shape {_shape(cache)}: ONNX takes (max_position, "
                      "rotary_dim / 2) with position_ids, (batch, sequence, rotary_dim / 2) without")
    c = t(cache)
    if positions is not None:
        c = F.embedding(t(positions), c)
    return c.unsqueeze(2)


def _rotate(v4, cos, sin, rotary: int, interleaved: bool):
    """The first ``rotary`` features rotated: pairs are (i, i + rotary/2), or (2i, 2i + 1) interleaved."""
    part = gc.narrow(v4, 3, 0, rotary)
    half = rotary // 2
    if interleaved:
        pairs = part.reshape(*v4.shape[:3], half, 2)
        x1, x2 = (gc.narrow(pairs, 4, i, 1).squeeze(4) for i in (0, 1))
    else:
        x1, x2 = gc.narrow(part, 3, 0, half), gc.narrow(part, 3, half, half)
    real, imag = cos * x1 - sin * x2, sin * x1 + cos * x2
    if interleaved:
        return gc.stack([real, imag], 4).reshape(*v4.shape[:3], rotary)
    return gc.cat([real, imag], 3)


NORM_READERS = {"BatchNormalization": _batch_norm, "LayerNormalization": _layer_norm,
                "InstanceNormalization": _instance_norm, "RMSNormalization": _rms_norm,
                "GroupNormalization": _group_norm, "LpNormalization": _lp_norm,
                "MeanVarianceNormalization": _mean_variance_norm, "RotaryEmbedding": _rotary_embedding}
