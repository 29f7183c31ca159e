"""PyTorch's ``nn.TransformerEncoderLayer`` and ``nn.TransformerEncoder``, over
``MultiheadAttention`` (graphc/nn/attention.py), Linear, LayerNorm and Dropout: the same
submodule names, so a PyTorch ``state_dict`` loads unchanged.

PyTorch's eval-mode "fast path" (nested tensors for ``src_key_padding_mask``, which give zeros
at padded positions) is an implementation detail graphc does not copy: graphc always computes
the plain formula, which is what PyTorch computes in training and whenever gradients flow.

>>> import graphc as gc
>>> from graphc.nn.transformer import TransformerEncoder, TransformerEncoderLayer
>>> layer = TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, batch_first=True)
>>> encoder = TransformerEncoder(layer, num_layers=2)
>>> encoder(gc.randn(3, 5, 8)).shape
(3, 5, 8)
>>> sorted({k.split(".")[2] for k in encoder.state_dict()})
['linear1', 'linear2', 'norm1', 'norm2', 'self_attn']
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

__all__ = ["TransformerEncoder", "TransformerEncoderLayer"]


def _activation(activation):
    if isinstance(activation, str):
        if activation == "relu":
            return F.relu
        if activation == "gelu":
            return F.gelu
        raise GraphcError(f"activation should be relu/gelu, not {activation}")
    if not callable(activation):
        raise GraphcError(f"activation should be 'relu', 'gelu' or a callable, got {activation!r}")
    return activation


class TransformerEncoderLayer(Module):
    """Self-attention and a feed-forward block, each with dropout, a residual connection and
    LayerNorm, as PyTorch's ``nn.TransformerEncoderLayer``: post-norm
    (``x = norm1(x + sa(x)); x = norm2(x + ff(x))``), or pre-norm with ``norm_first``
    (``x = x + sa(norm1(x)); x = x + ff(norm2(x))``). ``activation`` is ``"relu"``, ``"gelu"``
    or a callable (a module given here is a submodule, as in PyTorch).

    ``forward(src, src_mask=None, src_key_padding_mask=None, is_causal=False)``: masks as
    ``MultiheadAttention``'s ``attn_mask`` and ``key_padding_mask`` (True = left out);
    ``is_causal`` is a hint that ``src_mask`` is the causal mask.

    >>> import graphc as gc
    >>> from graphc.nn.transformer import TransformerEncoderLayer
    >>> layer = TransformerEncoderLayer(8, 2, dim_feedforward=32, activation="gelu", norm_first=True)
    >>> layer(gc.randn(5, 3, 8)).shape  # (S, N, E): batch_first=False
    (5, 3, 8)
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        int_at_least("dim_feedforward", dim_feedforward)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = _activation(activation)
        self.batch_first = batch_first
        if device is not None:
            self.to(device)
        if dtype is not None:
            self.to(dtype)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False,
                           is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoder(Module):
    """``num_layers`` copies of ``encoder_layer`` (deep copies: each its own parameters, as
    PyTorch's ``_get_clones``) in ``layers``, then ``norm`` when given.

    ``forward(src, mask=None, src_key_padding_mask=None, is_causal=None)`` passes the masks to
    every layer. ``enable_nested_tensor`` and ``mask_check`` are accepted for PyTorch's
    signature; graphc has no nested-tensor fast path.

    >>> import graphc as gc
    >>> from graphc import nn
    >>> from graphc.nn.transformer import TransformerEncoder, TransformerEncoderLayer
    >>> enc = TransformerEncoder(TransformerEncoderLayer(4, 2, 8), 3, norm=nn.LayerNorm(4))
    >>> len(enc.layers), enc(gc.randn(6, 2, 4)).shape
    (3, (6, 2, 4))
    """

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True):
        super().__init__()
        if not isinstance(encoder_layer, Module):
            raise GraphcError(f"encoder_layer must be a Module, got {type(encoder_layer).__name__}")
        int_at_least("num_layers", num_layers)
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor, self.mask_check = enable_nested_tensor, mask_check

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        output = src
        for layer in self.layers:
            output = layer(output, src_mask=mask, is_causal=bool(is_causal),
                           src_key_padding_mask=src_key_padding_mask)
        if self.norm is not None:
            output = self.norm(output)
        return output
