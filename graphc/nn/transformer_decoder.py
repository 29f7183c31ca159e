"""PyTorch's ``nn.TransformerDecoderLayer`` and ``nn.TransformerDecoder``, over
``MultiheadAttention`` (graphc/nn/attention.py), Linear, LayerNorm and Dropout: the same
submodule names (``self_attn``, ``multihead_attn``, ``linear1``/``linear2``,
``norm1``..``norm3``), so a PyTorch ``state_dict`` loads unchanged. ``nn.Transformer``, which
joins an encoder and a decoder, is in graphc/nn/transformer.py (which imports this file).

>>> import graphc as gc
>>> from graphc.nn.transformer_decoder import TransformerDecoder, TransformerDecoderLayer
>>> layer = TransformerDecoderLayer(d_model=8, nhead=2, dim_feedforward=16, batch_first=True)
>>> decoder = TransformerDecoder(layer, num_layers=2)
>>> decoder(gc.randn(3, 4, 8), gc.randn(3, 6, 8)).shape  # (N, T, E) from (N, T, E) and (N, S, E)
(3, 4, 8)
>>> sorted({k.split(".")[2] for k in decoder.state_dict()})
['linear1', 'linear2', 'multihead_attn', 'norm1', 'norm2', 'norm3', 'self_attn']
"""
from __future__ import annotations

import copy

from ..ir.errors import GraphcError
from . import functional as F
from .attention import MultiheadAttention
from .containers import ModuleList
from .layers import Dropout, Linear, int_at_least
from .module import Module
from .normalization import LayerNorm

__all__ = ["TransformerDecoder", "TransformerDecoderLayer"]


def _activation(activation):
    """PyTorch's ``_get_activation_fn`` for a string ("relu", "gelu"); a callable as it is
    (shared with the encoder layer in transformer.py)."""
    if isinstance(activation, str):
        if activation == "relu":
            return F.relu
        if activation == "gelu":
            return F.gelu
        raise GraphcError(f"activation should be relu/gelu, not {activation}")
    if not callable(activation):
        raise GraphcError(f"activation should be 'relu', 'gelu' or a callable, got {activation!r}")
    return activation


class TransformerDecoderLayer(Module):
    """Self-attention over the target, attention from the target to ``memory`` (the encoder's
    output), and a feed-forward block, each with dropout, a residual connection and LayerNorm,
    as PyTorch's ``nn.TransformerDecoderLayer``: post-norm
    (``x = norm1(x + sa(x)); x = norm2(x + mha(x, mem)); x = norm3(x + ff(x))``), or pre-norm
    with ``norm_first`` (``x = x + sa(norm1(x)); x = x + mha(norm2(x), mem); x = x + ff(norm3(x))``).
    ``activation`` is ``"relu"``, ``"gelu"`` or a callable (a module given here is a submodule).

    ``forward(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False)``: masks as
    ``MultiheadAttention``'s ``attn_mask`` / ``key_padding_mask`` (True or ``-inf`` = left
    out); the ``*_is_causal`` flags are hints that the matching mask is the causal one.

    >>> import graphc as gc
    >>> from graphc.nn.transformer import Transformer
    >>> from graphc.nn.transformer_decoder import TransformerDecoderLayer
    >>> layer = TransformerDecoderLayer(8, 2, dim_feedforward=32, activation="gelu", norm_first=True)
    >>> tgt, memory = gc.randn(5, 3, 8), gc.randn(7, 3, 8)  # (T, N, E), (S, N, E)
    >>> mask = Transformer.generate_square_subsequent_mask(5)
    >>> layer(tgt, memory, tgt_mask=mask, tgt_is_causal=True).shape
    (5, 3, 8)
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        int_at_least("dim_feedforward", dim_feedforward)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=batch_first, bias=bias)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=batch_first, bias=bias)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _activation(activation)
        self.batch_first = batch_first
        self.to(device=device, dtype=dtype)  # PyTorch's factory kwargs: placed and cast once built

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
            x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal))
            x = self.norm3(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, is_causal=bool(is_causal),
                           need_weights=False)[0]
        return self.dropout1(x)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                is_causal=bool(is_causal), need_weights=False)[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerDecoder(Module):
    """``num_layers`` copies of ``decoder_layer`` (deep copies: each its own parameters, equal at
    the start, as PyTorch's ``_get_clones``) in ``layers``, then ``norm`` when given.

    ``forward(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False)`` passes
    ``memory`` and the masks to every layer. ``tgt_is_causal=None`` is taken as ``False``
    (PyTorch compares ``tgt_mask`` to the causal mask to pick a kernel; the hint changes no
    number, and a traced mask has no values to compare).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> from graphc.nn.transformer_decoder import TransformerDecoder, TransformerDecoderLayer
    >>> dec = TransformerDecoder(TransformerDecoderLayer(4, 2, 8), 3, norm=nn.LayerNorm(4))
    >>> len(dec.layers), dec(gc.randn(6, 2, 4), gc.randn(5, 2, 4)).shape
    (3, (6, 2, 4))
    """

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        if not isinstance(decoder_layer, Module):
            raise GraphcError(f"decoder_layer must be a Module, got {type(decoder_layer).__name__}")
        int_at_least("num_layers", num_layers)
        self.layers = ModuleList([copy.deepcopy(decoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        output = tgt
        for layer in self.layers:
            output = layer(output, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                           tgt_key_padding_mask=tgt_key_padding_mask,
                           memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=bool(tgt_is_causal),
                           memory_is_causal=bool(memory_is_causal))
        if self.norm is not None:
            output = self.norm(output)
        return output
