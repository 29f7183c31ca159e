"""``F.multi_head_attention_forward``: PyTorch's functional multi-head attention, run by the very
code of ``nn.MultiheadAttention`` (graphc/nn/attention.py) over the weights passed in, so the
module and the function cannot disagree. Declared on ``F`` through the surface table (this
module imports nn.attention, which imports graphc.nn.functional).
"""
from __future__ import annotations

from ..core.dispatch import apply
from ..core.tensor import Tensor
from ..ir.errors import GraphcError, ShapeError
from ..ops.surface import torchsymbol
from .attention import MultiheadAttention


class _PassedWeights:
    """The attributes ``MultiheadAttention.forward`` reads, filled from the function's arguments."""

    def __init__(self, embed_dim, num_heads, weights, biases, bias_k, bias_v, add_zero_attn, dropout_p,
                 out_proj_weight, out_proj_bias, training):
        self.forward = MultiheadAttention.forward.__get__(self)
        self._attend = MultiheadAttention._attend.__get__(self)
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        self.batch_first, self.training, self.dropout = False, bool(training), float(dropout_p)
        self.add_zero_attn = bool(add_zero_attn)
        self._weights, self._biases = weights, biases
        shaped = lambda b: b.reshape(1, 1, embed_dim) if b is not None else None  # noqa: E731 - (E,) or (1, 1, E)
        self.bias_k, self.bias_v = shaped(bias_k), shaped(bias_v)
        self._out = (out_proj_weight, out_proj_bias)

    def _projections(self):
        return self._weights + self._biases

    def out_proj(self, x):
        weight, bias = self._out
        return apply("linear", [x, weight] + ([bias] if bias is not None else []))


@torchsymbol(method=False, top=False)
def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
                                 bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
                                 training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None,
                                 v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True,
                                 is_causal=False):
    """Multi-head attention over (L, N, E) query and (S, N, E) key / value (or unbatched (L, E)),
    with PyTorch's arguments: the packed ``in_proj_weight`` (3E, E) or, with
    ``use_separate_proj_weight``, ``q/k/v_proj_weight``; returns ``(attn_output, attn_weights)``.

    >>> import graphc as gc
    >>> import graphc.nn.functional as F
    >>> x = gc.randn(3, 2, 4)
    >>> out, w = F.multi_head_attention_forward(x, x, x, 4, 2, gc.randn(12, 4), gc.zeros(12), None, None, False,
    ...                                         0.0, gc.randn(4, 4), gc.zeros(4))
    >>> out.shape, w.shape
    ((3, 2, 4), (2, 3, 3))
    """
    if static_k is not None or static_v is not None:
        raise GraphcError("multi_head_attention_forward: static_k / static_v are not supported")
    embed_dim = query.dims[-1]
    if embed_dim != embed_dim_to_check:
        raise ShapeError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}")
    if not isinstance(embed_dim, int) or embed_dim % num_heads:
        raise ShapeError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    e = embed_dim
    if use_separate_proj_weight:
        if q_proj_weight is None or k_proj_weight is None or v_proj_weight is None:
            raise GraphcError("use_separate_proj_weight is True but q_proj_weight, k_proj_weight or v_proj_weight "
                              "is None")
        weights = (q_proj_weight, k_proj_weight, v_proj_weight)
    else:
        if in_proj_weight is None:
            raise GraphcError("use_separate_proj_weight is False but in_proj_weight is None")
        weights = (in_proj_weight[:e], in_proj_weight[e:2 * e], in_proj_weight[2 * e:])
    biases = (None,) * 3 if in_proj_bias is None else (in_proj_bias[:e], in_proj_bias[e:2 * e], in_proj_bias[2 * e:])
    if (bias_k is None) != (bias_v is None):
        raise GraphcError("multi_head_attention_forward: bias_k and bias_v must both be given or both be None")
    attention = _PassedWeights(e, int(num_heads), weights, biases, bias_k, bias_v, add_zero_attn, dropout_p,
                               out_proj_weight, out_proj_bias, training)
    if not isinstance(query, Tensor):
        raise GraphcError("multi_head_attention_forward: query must be a Tensor")
    return attention.forward(query, key, value, key_padding_mask, need_weights, attn_mask, average_attn_weights,
                             is_causal)
