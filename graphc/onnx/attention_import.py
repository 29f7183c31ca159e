"""ONNX import of ``Attention`` (opset 23, and the additions of opsets 24 and 25), built from
standard graphc ops: ``matmul`` for the scores and the weighted sum, ``softmax``, ``add`` of
one additive bias for every mask, ``reshape``/``permute`` for the heads, and grouped-query
attention by repeating each key/value head (``broadcast_to``), as onnx's reference does.

Semantics follow onnx's reference implementation (``onnx.reference.ops.op_attention``):

- 3-D inputs ``(B, S, heads * size)`` are split into heads with ``q_num_heads`` /
  ``kv_num_heads``; ``Y`` goes back to 3-D. ``past_key``/``past_value`` are concatenated in
  front of ``K``/``V`` (``present_key``/``present_value``).
- The scores are ``(Q K^T) * scale`` (default ``1/sqrt(head size)``), then
  ``softcap * tanh(scores / softcap)`` when ``softcap > 0``, then the bias is added:
  a bool ``attn_mask`` is 0 where True and ``-inf`` where False, a float one is added as it is,
  and a mask shorter than the keys is padded with ``-inf``; ``is_causal`` masks key ``j`` for
  query ``i`` unless ``j <= i + offset`` (offset: the past length, or per batch
  ``nonpad_kv_seqlen - S``); ``nonpad_kv_seqlen`` masks each batch entry's padded keys; the
  ``left_window_size``/``right_window_size`` band of opset 25 masks outside the window.
- A query row whose bias is ``-inf`` everywhere has no key to attend: its weights are zeros
  (softmax would give NaN), for ``Y`` and for ``qk_matmul_output`` mode 3.
- ``qk_matmul_output``: modes 0 and 1 the (softcapped) scores, 2 with the bias, 3 the weights.

Positions (causal, windows) are constants built while importing, so they need the query and
key lengths to be static; a symbolic one with those attributes is refused, naming the node.
"""
from __future__ import annotations

import math

import numpy as np

from ..ir.graph import Value
from ..ir.types import DType
from .elementwise_readers import scalar
from .shape_readers import _known, _shape

SOFTMAX_PRECISIONS = {1: "float32", 11: "float64"}  # ONNX element types graphc computes softmax in
QK_MODES = (0, 1, 2, 3)


# ---- arithmetic on known arrays or graph values -------------------------------------------------
def _add(r, a, b):
    """``a + b`` where either may be None (absent), a known array, or a graph value."""
    if a is None or b is None:
        return b if a is None else a
    if _known(a, b):
        return np.add(a, b)
    return r.emit("add", [a, b])


def _neg_inf_where(r, allowed, dtype: np.dtype):
    """0 where ``allowed``, ``-inf`` elsewhere (an additive mask)."""
    if _known(allowed):
        return np.where(allowed, dtype.type(0), dtype.type(-np.inf))
    return r.emit("where", [allowed, np.zeros((), dtype), np.asarray(-np.inf, dtype)])


def _static(r, dim, what: str) -> int:
    if not isinstance(dim, int):
        raise r.error(f"Attention {what} with a symbolic length {dim!r}: graphc builds the positions as "
                      "constants, so this length must be static")
    return dim


# ---- heads ---------------------------------------------------------------------------------------
def _split_heads(r, x: Value, heads: int, what: str) -> Value:
    """``(B, S, heads * size)`` -> ``(B, heads, S, size)``."""
    batch, length, hidden = x.type.shape
    if not isinstance(hidden, int) or hidden % heads:
        raise r.error(f"Attention {what} of hidden size {hidden} does not split into {heads} heads")
    x = r.emit("reshape", [x], {"shape": [batch, length, heads, hidden // heads]})
    return r.emit("permute", [x], {"perm": [0, 2, 1, 3]})


def _repeat_heads(r, x: Value, times: int) -> Value:
    """Grouped-query attention: each key/value head repeated ``times`` times in place
    (``[h0, h0, h1, h1, ...]``, numpy's ``repeat`` along the head dim)."""
    if times == 1:
        return x
    batch, heads, length, size = x.type.shape
    x = r.emit("reshape", [x], {"shape": [batch, heads, 1, length, size]})
    x = r.emit("broadcast_to", [x], {"shape": [batch, heads, times, length, size]})
    return r.emit("reshape", [x], {"shape": [batch, heads * times, length, size]})


def _inputs(r, args: list, attrs: dict) -> tuple:
    """Q, K, V as ``(B, heads, length, size)``, with the past keys and values in front."""
    q, k, v = (r.value(a) for a in args[:3])
    if not q.type.rank == k.type.rank == v.type.rank or q.type.rank not in (3, 4):
        raise r.error(f"Attention on Q {q.type}, K {k.type}, V {v.type}; ONNX's are all 3-D or all 4-D")
    if q.type.rank == 3:
        if "q_num_heads" not in attrs or "kv_num_heads" not in attrs:
            raise r.error("Attention on 3-D inputs needs the q_num_heads and kv_num_heads attributes")
        q = _split_heads(r, q, int(attrs["q_num_heads"]), "Q")
        k = _split_heads(r, k, int(attrs["kv_num_heads"]), "K")
        v = _split_heads(r, v, int(attrs["kv_num_heads"]), "V")
    past_key, past_value = args[4], args[5]
    if (past_key is None) != (past_value is None):
        raise r.error("Attention with only one of past_key and past_value; ONNX takes both or neither")
    past = 0
    if past_key is not None:
        past = _static(r, _shape(past_key)[2], "past_key")
        k = r.emit("concat", [past_key, k], {"dim": 2})
        v = r.emit("concat", [past_value, v], {"dim": 2})
    return q, k, v, past


# ---- the additive bias: masks, causality, windows, padding ---------------------------------------
def _mask_bias(r, mask, length, dtype: np.dtype):
    """``attn_mask`` as an additive float bias over ``length`` keys (a shorter mask padded with
    ``-inf``, as onnx's reference does)."""
    if mask is None:
        return None
    shape = _shape(mask)
    bias = _neg_inf_where(r, mask, dtype) if np.dtype(_dtype(r, mask)) == np.bool_ else mask
    if _dtype(r, bias) != dtype:
        raise r.error(f"Attention attn_mask of type {_dtype(r, mask)} with inputs of {dtype}; ONNX's float mask "
                      "has the inputs' type")
    missing = _static(r, length, "attn_mask") - _static(r, shape[-1], "attn_mask")
    if missing < 0:
        raise r.error(f"Attention attn_mask covers {shape[-1]} keys, more than the {length} keys")
    if missing:
        pad_shape = list(shape[:-1]) + [missing]
        if _known(bias):
            return np.concatenate([bias, np.full(pad_shape, -np.inf, dtype)], axis=-1)
        pad = r.emit("full", [], {"shape": pad_shape, "value": -math.inf, "dtype": np.dtype(dtype).name})
        return r.emit("concat", [bias, pad], {"dim": len(shape) - 1})
    return bias


def _dtype(r, x) -> np.dtype:
    return np.asarray(x).dtype if _known(x) else np.dtype(r.value(x).type.dtype.numpy)


def _offset_allowed(r, rel: np.ndarray, offset, test):
    """``test(i - j + offset)`` over query i and key j: a known ``(S, L)`` array for a static
    offset, or ``(B, 1, S, L)`` values for the per-batch offset ``nonpad_kv_seqlen - S``."""
    if _known(offset):
        shift = np.asarray(offset, np.int64)
        return test(rel + shift if shift.ndim == 0 else (rel[None] + shift.reshape(-1, 1, 1))[:, None])
    shifted = r.emit("add", [r.emit("reshape", [offset], {"shape": [_shape(offset)[0], 1, 1, 1]}), rel])
    return test(shifted)


def _position_bias(r, attrs: dict, q_len, kv_len, offset, dtype: np.dtype):
    """The causal and window masks as one additive bias (None when neither is asked for)."""
    left, right = int(attrs.get("left_window_size", -1)), int(attrs.get("right_window_size", -1))
    causal = bool(attrs.get("is_causal", 0))
    if left < -1 or right < -1:
        raise r.error(f"Attention with left_window_size={left}, right_window_size={right}; each is -1 or >= 0")
    if not causal and left < 0 and right < 0:
        return None
    s, length = _static(r, q_len, "is_causal/window (queries)"), _static(r, kv_len, "is_causal/window (keys)")
    rel = np.arange(s, dtype=np.int64)[:, None] - np.arange(length, dtype=np.int64)[None, :]  # i - j
    known = _known(offset)

    def at_least(bound):  # i - j + offset >= bound
        return (lambda d: d >= bound) if known else (lambda d: r.emit("ge", [d, np.asarray(bound, np.int64)]))

    def at_most(bound):
        return (lambda d: d <= bound) if known else (lambda d: r.emit("le", [d, np.asarray(bound, np.int64)]))
    tests = ([at_least(0)] if causal else []) + ([at_most(left)] if left >= 0 else []) + \
        ([at_least(-right)] if right >= 0 else [])
    bias = None
    for test in tests:
        bias = _add(r, bias, _neg_inf_where(r, _offset_allowed(r, rel, offset, test), dtype))
    return bias


def _padding_bias(r, nonpad, kv_len, dtype: np.dtype):
    """``nonpad_kv_seqlen``: keys ``j >= nonpad_kv_seqlen[b]`` masked, as ``(B, 1, 1, L)``."""
    length = _static(r, kv_len, "nonpad_kv_seqlen")
    positions = np.arange(length, dtype=np.int64)
    if _known(nonpad):
        allowed = positions[None, :] < np.asarray(nonpad, np.int64).reshape(-1, 1)
        return _neg_inf_where(r, allowed.reshape(-1, 1, 1, length), dtype)
    counts = r.emit("reshape", [_as_int64(r, nonpad)], {"shape": [_shape(nonpad)[0], 1, 1, 1]})
    return _neg_inf_where(r, r.emit("lt", [positions, counts]), dtype)


def _as_int64(r, x):
    return x if r.value(x).type.dtype is DType.int64 else r.emit("cast", [x], {"dtype": "int64"})


def _bias(r, args: list, attrs: dict, q_len, kv_len, past: int, dtype: np.dtype):
    nonpad = args[6] if len(args) > 6 else None
    if nonpad is not None and past:
        raise r.error("Attention with both nonpad_kv_seqlen and past_key; ONNX allows one cache form")
    offset = past
    if nonpad is not None:
        s = _static(r, q_len, "nonpad_kv_seqlen")
        offset = np.asarray(nonpad, np.int64) - s if _known(nonpad) else \
            r.emit("sub", [_as_int64(r, nonpad), np.asarray(s, np.int64)])
    bias = _mask_bias(r, args[3], kv_len, dtype)
    bias = _add(r, bias, _position_bias(r, attrs, q_len, kv_len, offset, dtype))
    if nonpad is not None:
        bias = _add(r, bias, _padding_bias(r, nonpad, kv_len, dtype))
    return bias


# ---- scores, weights, output ---------------------------------------------------------------------
def _softcapped(r, scores: Value, cap: float) -> Value:
    if not cap > 0:
        return scores
    squashed = r.emit("tanh", [r.emit("div", [scores, scalar(r, scores, cap)])])
    return r.emit("mul", [squashed, scalar(r, scores, cap)])


def _weights(r, logits: Value, bias, precision) -> Value:
    """Softmax over the keys (in ``precision``), with fully masked rows zero."""
    dtype = logits.type.dtype.name
    x = logits if precision in (None, dtype) else r.emit("cast", [logits], {"dtype": precision})
    weights = r.emit("softmax", [x], {"dim": -1 % x.type.rank})
    if x is not logits:
        weights = r.emit("cast", [weights], {"dtype": dtype})
    if bias is None:
        return weights
    if _known(bias):
        empty = np.isneginf(np.max(bias, axis=-1, keepdims=True)) if np.shape(bias)[-1] else np.ones((1,), bool)
        if not np.any(empty):
            return weights
    else:
        top = r.emit("max", [bias], {"dims": [bias.type.rank - 1], "keepdim": True})
        empty = r.emit("eq", [top, np.asarray(-np.inf, np.dtype(bias.type.dtype.numpy))])
    return r.emit("where", [empty, scalar(r, weights, 0.0), weights])


def _precision(r, attrs: dict):
    if "softmax_precision" not in attrs:
        return None
    code = int(attrs["softmax_precision"])
    if code not in SOFTMAX_PRECISIONS:
        raise r.error(f"Attention with softmax_precision={code} (an ONNX element type); graphc computes softmax "
                      "in float32 (1) or float64 (11)")
    return SOFTMAX_PRECISIONS[code]


def _attention(r, args):
    """``Q, K, V[, attn_mask, past_key, past_value, nonpad_kv_seqlen]`` -> ``Y, present_key,
    present_value, qk_matmul_output`` (module docstring)."""
    args = list(args) + [None] * (7 - len(args))
    attrs = r.attrs()
    mode = int(attrs.get("qk_matmul_output_mode", 0))
    if mode not in QK_MODES:
        raise r.error(f"Attention with qk_matmul_output_mode={mode}; ONNX's are 0-3")
    rank = r.value(args[0]).type.rank
    q, k, v, past = _inputs(r, args, attrs)
    if q.type.dtype.is_low_precision:
        raise r.error(f"Attention on {q.type.dtype.name} inputs is not imported yet (its softmax precision)")
    if not q.type.dtype.is_float:
        raise r.error(f"Attention on {q.type.dtype.name} inputs; ONNX's are float")
    dtype = np.dtype(q.type.dtype.numpy)
    q_heads, kv_heads = q.type.shape[1], k.type.shape[1]
    if q_heads % kv_heads or v.type.shape[1] != kv_heads:
        raise r.error(f"Attention with {q_heads} query heads and {kv_heads} key/{v.type.shape[1]} value heads; "
                      "grouped-query attention needs the query heads a multiple of the key/value heads")
    present_key, present_value = k, v
    k, v = _repeat_heads(r, k, q_heads // kv_heads), _repeat_heads(r, v, q_heads // kv_heads)
    size = _static(r, q.type.shape[3], "head size")
    scale = float(attrs["scale"]) if "scale" in attrs else 1.0 / math.sqrt(size)
    scores = r.emit("matmul", [q, r.emit("permute", [k], {"perm": [0, 1, 3, 2]})])
    scores = _softcapped(r, r.emit("mul", [scores, scalar(r, scores, scale)]), float(attrs.get("softcap", 0.0)))
    bias = _bias(r, args, attrs, q.type.shape[2], k.type.shape[2], past, dtype)
    logits = scores if bias is None else r.emit("add", [scores, bias])
    weights = _weights(r, logits, bias, _precision(r, attrs))
    y = r.emit("matmul", [weights, v])
    if rank == 3:
        batch, heads, length, v_size = y.type.shape
        y = r.emit("permute", [y], {"perm": [0, 2, 1, 3]})
        y = r.emit("reshape", [y], {"shape": [batch, length, heads * v_size]})
    qk = {0: scores, 1: scores, 2: logits, 3: weights}[mode]
    return [y, present_key, present_value, qk]


ATTENTION_READERS = {"Attention": _attention}
