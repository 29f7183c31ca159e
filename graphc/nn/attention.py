"""Attention with PyTorch's API, written as composites of existing ops (matmul, softmax,
where, dropout, linear, pad), so autodiff derives the gradients and plans save them as data:
``scaled_dot_product_attention`` (``F.scaled_dot_product_attention``) and
``MultiheadAttention`` (``nn.MultiheadAttention``: parameter names, shapes and init of
PyTorch's, so its ``state_dict`` loads unchanged).

Masks follow PyTorch, whose two APIs read a bool mask opposite ways:
``scaled_dot_product_attention`` takes part where a bool ``attn_mask`` is True, while
``MultiheadAttention`` leaves out the positions where ``attn_mask`` or ``key_padding_mask``
is True. A float mask is added to the scores in both (``-inf`` leaves a position out).
A query whose every key is masked gets zeros from ``scaled_dot_product_attention`` (as
PyTorch's), while ``MultiheadAttention(need_weights=True)`` gives NaN there (as PyTorch's,
which runs a plain softmax on that path).

>>> import graphc as gc
>>> from graphc.nn.attention import MultiheadAttention
>>> gc.manual_seed(0)
>>> mha = MultiheadAttention(8, 2, batch_first=True)
>>> x = gc.randn(3, 5, 8)
>>> out, weights = mha(x, x, x)
>>> out.shape, weights.shape
((3, 5, 8), (3, 5, 5))
"""
from __future__ import annotations

import math

import numpy as np

from ..core.dispatch import apply
from ..core.tensor import Tensor
from ..executor.backends import backend_of
from ..ir.errors import GraphcError, ShapeError
from ..ir.ops.attention import check_attention
from ..ir.types import TensorType, is_static
from ..ops.surface import torchsymbol
from . import functional as F
from . import init
from .layers import Linear, int_at_least
from .module import Module, Parameter

__all__ = ["MultiheadAttention", "NonDynamicallyQuantizableLinear", "scaled_dot_product_attention"]


def _constant(like: Tensor, array: np.ndarray) -> Tensor:
    """A constant mask next to ``like``: lifted into ``like``'s trace, or on its device when eager."""
    if like._tracer is None:
        array = backend_of(like.array).asarray(array)
    return Tensor(array)


def _static(dim, what: str) -> int:
    if not is_static(dim):
        raise ShapeError(f"{what} needs a fixed size, got the symbolic dim {dim!r} (a compiled plan leaves it "
                         "open); compile with that dim fixed")
    return int(dim)


def _repeat_heads(x: Tensor, repeats: int) -> Tensor:
    """``x.repeat_interleave(repeats, dim=-3)``: each of the Hk heads ``repeats`` times, in order."""
    if repeats == 1:
        return x
    lead, (heads, s, e) = list(x.shape[:-3]), x.shape[-3:]
    x = x.unsqueeze(-3).expand(*([-1] * len(lead)), heads, repeats, s, e)
    return x.reshape(*lead, heads * repeats, s, e)


def _safe_softmax(scores: Tensor) -> Tensor:
    """softmax over the last dim, with zeros (not NaN) in rows where every score is -inf, and no
    NaN in their gradient either: such rows are set to 0 before the softmax and after it."""
    dead = scores.amax(-1, keepdim=True) == float("-inf")
    weights = F.softmax(F.where(dead, 0.0, scores), dim=-1)
    return F.where(dead, 0.0, weights)


@torchsymbol(method=False, top=False)  # F.scaled_dot_product_attention (graphc.nn.functional reads the table)
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """``softmax(query @ key.T * scale + mask) @ value`` over the last two dims, as PyTorch's
    ``F.scaled_dot_product_attention``: query ``(..., L, E)``, key ``(..., S, E)``, value
    ``(..., S, Ev)`` -> ``(..., L, Ev)``.

    ``attn_mask`` broadcasts to ``(..., L, S)``: a bool mask keeps the positions that are True,
    a float mask is added to the scores (``-inf`` leaves a position out). ``is_causal`` keeps
    ``j <= i`` (PyTorch's ``tril(ones(L, S))``; it cannot be combined with ``attn_mask``).
    ``scale`` defaults to ``1 / sqrt(E)``. ``dropout_p`` drops attention weights with graphc's
    dropout (always, as PyTorch's function does: pass 0.0 in eval). ``enable_gqa`` lets key and
    value have fewer heads (dim -3) than query, each repeated ``Hq // Hk`` times. A query whose
    every key is masked out gets zeros, as PyTorch's.

    >>> import graphc as gc
    >>> from graphc.nn.attention import scaled_dot_product_attention
    >>> q = gc.zeros(1, 2, 2)  # equal scores: each query averages the values it may see
    >>> k, v = gc.randn(1, 2, 2), gc.tensor([[[1.0, 2.0], [3.0, 4.0]]])
    >>> scaled_dot_product_attention(q, k, v, is_causal=True).numpy().tolist()
    [[[1.0, 2.0], [2.0, 3.0]]]
    """
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        raise ShapeError(f"scaled_dot_product_attention needs query, key and value of at least 2 dims, got "
                         f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}")
    if is_causal and attn_mask is not None:
        raise GraphcError("scaled_dot_product_attention: explicit attn_mask should not be set when is_causal=True")
    embed = _static(query.shape[-1], "scaled_dot_product_attention's embedding dim")
    scale = 1.0 / math.sqrt(embed) if scale is None else float(scale)
    if enable_gqa and query.ndim >= 3 and key.ndim >= 3:
        hq, hk, hv = (_static(t.shape[-3], "the head dim") for t in (query, key, value))
        if hq % hk or hq % hv:
            raise ShapeError(f"scaled_dot_product_attention(enable_gqa=True): query's {hq} heads must be a "
                             f"multiple of key's {hk} and value's {hv}")
        key, value = _repeat_heads(key, hq // hk), _repeat_heads(value, hq // hv)
    if attn_mask is not None:
        if not isinstance(attn_mask, Tensor):
            attn_mask = _constant(query, np.asarray(attn_mask))
        if attn_mask.dtype.name != "bool" and attn_mask.dtype != query.dtype:
            attn_mask = attn_mask.cast(query.dtype)  # in the scores' dtype (PyTorch refuses a float mask of another)
    if dropout_p == 0.0 and _fusable(query, key, value, attn_mask):  # the one-kernel core (graphc/ir/ops/attention.py)
        return apply("attention", [query, key, value] + ([attn_mask] if attn_mask is not None else []),
                     {"scale": scale, "is_causal": bool(is_causal)})
    scores = (query @ key.transpose(-2, -1)) * scale
    if is_causal:
        rows = _static(query.shape[-2], "is_causal's query length")
        cols = _static(key.shape[-2], "is_causal's key length")
        scores = F.where(_constant(scores, np.tri(rows, cols, dtype=bool)), scores, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype.name == "bool":
            scores = F.where(attn_mask, scores, float("-inf"))
        else:
            scores = scores + attn_mask
        weights = _safe_softmax(scores)  # a mask may leave a query no key
    else:
        weights = F.softmax(scores, dim=-1)
    if dropout_p > 0.0:
        weights = F.dropout(weights, dropout_p, training=True)
    return weights @ value


def _fusable(query, key, value, mask) -> bool:
    """Whether the ``attention`` op takes these operands as they are: one float dtype, one rank,
    the same leading dims, and a mask that broadcasts to the scores without widening them
    (else the composite path, which broadcasts as matmul does, or raises its own error)."""
    types = [TensorType(t.dims, t.dtype) for t in (query, key, value)]
    try:
        check_attention(*types, None if mask is None else TensorType(mask.dims, mask.dtype))
    except ShapeError:
        return False
    return True


def _float_mask(mask, like: Tensor, what: str):
    """PyTorch's ``_canonical_mask``: a bool mask (True = left out) as 0 / -inf in ``like``'s
    dtype; a float mask as it is."""
    if mask is None:
        return None
    if not isinstance(mask, Tensor):
        mask = _constant(like, np.asarray(mask))
    if mask.dtype.name == "bool":
        return F.where(mask, float("-inf"), _constant(like, np.zeros((), like.dtype.numpy)))
    if not mask.dtype.is_float:
        raise GraphcError(f"MultiheadAttention: only bool and float {what} are supported, got {mask.dtype.name}")
    return mask if mask.dtype == like.dtype else mask.cast(like.dtype)


class NonDynamicallyQuantizableLinear(Linear):
    """``nn.Linear`` under the name PyTorch gives ``MultiheadAttention.out_proj``."""


class MultiheadAttention(Module):
    """PyTorch's ``nn.MultiheadAttention``: ``num_heads`` heads of scaled dot-product
    attention over projections of query, key and value, then ``out_proj``.

    Parameters as PyTorch's: ``in_proj_weight`` ``(3E, E)`` (or ``q_proj_weight`` ``(E, E)``,
    ``k_proj_weight`` ``(E, kdim)``, ``v_proj_weight`` ``(E, vdim)`` when ``kdim``/``vdim``
    differ from ``embed_dim``), ``in_proj_bias`` ``(3E,)``, ``out_proj.weight``/``.bias``,
    ``bias_k``/``bias_v`` ``(1, 1, E)`` with ``add_bias_kv``; xavier-uniform projections, zero
    biases, xavier-normal ``bias_k``/``bias_v``.

    ``forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False)`` returns ``(attn_output, attn_weights)``:
    inputs ``(L, N, E)`` (``(N, L, E)`` with ``batch_first``, or unbatched ``(L, E)``); weights
    ``(N, L, S)`` averaged over heads, ``(N, H, L, S)`` with ``average_attn_weights=False``,
    ``None`` with ``need_weights=False``. A True in a bool ``key_padding_mask`` ``(N, S)`` or
    ``attn_mask`` (``(L, S)`` or ``(N*H, L, S)``) leaves that key out; float masks are added to
    the scores. ``is_causal`` is a hint, as in PyTorch: it needs ``attn_mask`` (the causal
    mask) too. Attention dropout runs in training mode only.

    >>> import graphc as gc
    >>> from graphc.nn.attention import MultiheadAttention
    >>> mha = MultiheadAttention(4, 2, kdim=3, vdim=5)
    >>> [(k, v.shape) for k, v in mha.state_dict().items()]  # doctest: +NORMALIZE_WHITESPACE
    [('q_proj_weight', (4, 4)), ('k_proj_weight', (4, 3)), ('v_proj_weight', (4, 5)), ('in_proj_bias', (12,)),
     ('out_proj.weight', (4, 4)), ('out_proj.bias', (4,))]
    >>> out, w = mha(gc.randn(6, 2, 4), gc.randn(7, 2, 3), gc.randn(7, 2, 5), need_weights=False)
    >>> out.shape, w
    ((6, 2, 4), None)
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        super().__init__()
        int_at_least("embed_dim", embed_dim)
        int_at_least("num_heads", num_heads)
        if embed_dim % num_heads:
            raise GraphcError(f"embed_dim {embed_dim} must be divisible by num_heads {num_heads}")
        if not 0.0 <= float(dropout) <= 1.0:
            raise GraphcError(f"dropout probability has to be between 0 and 1, but got {dropout}")
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        int_at_least("kdim", self.kdim)
        int_at_least("vdim", self.vdim)
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads, self.dropout, self.batch_first = num_heads, float(dropout), batch_first
        self.head_dim = embed_dim // num_heads
        zeros = lambda *shape: Parameter(np.zeros(shape, np.float32))  # noqa: E731 - filled below
        if not self._qkv_same_embed_dim:
            self.q_proj_weight = zeros(embed_dim, embed_dim)
            self.k_proj_weight = zeros(embed_dim, self.kdim)
            self.v_proj_weight = zeros(embed_dim, self.vdim)
            self.register_parameter("in_proj_weight", None)
        else:
            self.in_proj_weight = zeros(3 * embed_dim, embed_dim)
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        if bias:
            self.in_proj_bias = zeros(3 * embed_dim)
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias)
        if add_bias_kv:
            self.bias_k, self.bias_v = zeros(1, 1, embed_dim), zeros(1, 1, embed_dim)
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()
        self.to(device=device, dtype=dtype)  # PyTorch's factory kwargs: placed and cast once built

    def _reset_parameters(self):
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def _projections(self):
        """(w_q, w_k, w_v, b_q, b_k, b_v): slices of the packed weight/bias, as PyTorch's."""
        e = self.embed_dim
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            ws = (w[:e], w[e:2 * e], w[2 * e:])
        else:
            ws = (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)
        b = self.in_proj_bias
        bs = (None, None, None) if b is None else (b[:e], b[e:2 * e], b[2 * e:])
        return ws + bs

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        batched = query.ndim == 3
        if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
            raise ShapeError(f"MultiheadAttention expects query, key and value of 3 dims (or 2, unbatched), got "
                             f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}")
        if not batched:  # (L, E): a batch of one, in batch-first layout
            query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.reshape(1, -1) if isinstance(key_padding_mask, Tensor) else \
                    np.asarray(key_padding_mask).reshape(1, -1)
        elif not self.batch_first:  # (L, N, E) -> (N, L, E): the work below is batch first
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        if query.shape[-1] != self.embed_dim:
            raise ShapeError(f"MultiheadAttention: query's last dim is {query.shape[-1]}, "
                             f"expected embed_dim {self.embed_dim}")
        if is_causal and attn_mask is None:
            raise GraphcError("MultiheadAttention: need attn_mask if specifying the is_causal hint (pass the "
                              "causal mask as attn_mask too)")
        out, weights = self._attend(query, key, value, key_padding_mask, need_weights, attn_mask,
                                    average_attn_weights, is_causal)
        if not batched:
            return out.squeeze(0), (weights.squeeze(0) if weights is not None else None)
        if not self.batch_first:
            out = out.transpose(0, 1)
        return out, weights

    def _attend(self, query, key, value, key_padding_mask, need_weights, attn_mask, average_attn_weights,
                is_causal):
        heads, hd, e = self.num_heads, self.head_dim, self.embed_dim
        batch, tgt = query.shape[0], query.shape[1]
        kpm = _float_mask(key_padding_mask, query, "key_padding_mask")
        use_causal = is_causal and kpm is None and not need_weights
        mask = None if use_causal else _float_mask(attn_mask, query, "attn_mask")
        w_q, w_k, w_v, b_q, b_k, b_v = self._projections()
        q, k, v = F.linear(query, w_q, b_q), F.linear(key, w_k, b_k), F.linear(value, w_v, b_v)  # (N, L|S, E)
        if self.bias_k is not None and self.bias_v is not None:  # one more key (and value) per sample
            src = _static(k.shape[1], "add_bias_kv's source length")
            k = F.pad(k, (0, 0, 0, 1)) + F.pad(self.bias_k, (0, 0, src, 0))
            v = F.pad(v, (0, 0, 0, 1)) + F.pad(self.bias_v, (0, 0, src, 0))
            mask = F.pad(mask, (0, 1)) if mask is not None else None
            kpm = F.pad(kpm, (0, 1)) if kpm is not None else None
        elif self.bias_k is not None or self.bias_v is not None:
            raise GraphcError("MultiheadAttention: bias_k and bias_v must both be set or both be None")
        q = q.reshape(batch, tgt, heads, hd).transpose(1, 2)  # (N, H, L, hd)
        k = k.reshape(batch, k.shape[1], heads, hd).transpose(1, 2)  # (N, H, S, hd)
        v = v.reshape(batch, v.shape[1], heads, hd).transpose(1, 2)
        if self.add_zero_attn:  # a key and value of zeros, always attended
            _static(k.shape[2], "add_zero_attn's source length")
            k, v = F.pad(k, (0, 0, 0, 1)), F.pad(v, (0, 0, 0, 1))
            mask = F.pad(mask, (0, 1)) if mask is not None else None
            kpm = F.pad(kpm, (0, 1)) if kpm is not None else None
        src = k.shape[2]
        if mask is not None:
            if mask.ndim == 2:
                if tuple(mask.shape) != (tgt, src) and is_static(tgt):
                    raise ShapeError(f"MultiheadAttention: the 2-D attn_mask should be {(tgt, src)}, "
                                     f"got {tuple(mask.shape)}")
                mask = mask.reshape(1, 1, mask.shape[0], mask.shape[1])
            elif mask.ndim == 3:  # (N * H, L, S), N major
                mask = mask.reshape(-1, heads, mask.shape[1], mask.shape[2])
            else:
                raise ShapeError(f"MultiheadAttention: attn_mask must be 2-D or 3-D, got {tuple(mask.shape)}")
        if kpm is not None:
            if kpm.ndim != 2:
                raise ShapeError(f"MultiheadAttention: key_padding_mask must be (N, S), got {tuple(kpm.shape)}")
            kpm = kpm.reshape(kpm.shape[0], 1, 1, kpm.shape[1])
            mask = kpm if mask is None else mask + kpm
        dropout_p = self.dropout if self.training else 0.0
        if need_weights:
            scores = (q * math.sqrt(1.0 / hd)) @ k.transpose(-2, -1)
            if mask is not None:
                scores = scores + mask
            weights = F.softmax(scores, dim=-1)  # (N, H, L, S); NaN where all keys are masked, as PyTorch's
            if dropout_p > 0.0:
                weights = F.dropout(weights, dropout_p, training=True)
            out = weights @ v
            if average_attn_weights:
                weights = weights.mean(1)
        else:
            out = scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=use_causal)
            weights = None
        out = out.transpose(1, 2).reshape(batch, tgt, e)
        return self.out_proj(out), weights

    def extra_repr(self) -> str:
        return (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, dropout={self.dropout}, "
                f"batch_first={self.batch_first}")
