"""PyTorch's ``nn.TransformerEncoderLayer``, ``nn.TransformerEncoder`` and ``nn.Transformer``
(the decoder's classes are in graphc/nn/transformer_decoder.py, imported here), over
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

from ..core.symint import SymInt
from ..ir.errors import GraphcError, ShapeError
from ..ops.creation import full
from . import init
from .attention import MultiheadAttention
from .containers import ModuleList
from .layers import Dropout, Linear, int_at_least
from .module import Module
from .normalization import LayerNorm
from .transformer_decoder import TransformerDecoder, TransformerDecoderLayer, _activation

__all__ = ["Transformer", "TransformerDecoder", "TransformerDecoderLayer", "TransformerEncoder",
           "TransformerEncoderLayer"]


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
        self.to(device=device, dtype=dtype)  # PyTorch's factory kwargs: placed and cast once built

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


class Transformer(Module):
    """PyTorch's ``nn.Transformer``: a ``TransformerEncoder`` of ``num_encoder_layers`` layers
    and a ``TransformerDecoder`` of ``num_decoder_layers``, each ending in a LayerNorm
    (``encoder.norm``, ``decoder.norm``), or ``custom_encoder`` / ``custom_decoder``; every
    parameter of 2 or more dims then xavier-uniform, as PyTorch's ``_reset_parameters``.

    ``forward(src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
    src_key_padding_mask=None, tgt_key_padding_mask=None, memory_key_padding_mask=None,
    src_is_causal=None, tgt_is_causal=None, memory_is_causal=False)``: ``src`` ``(S, N, E)``
    and ``tgt`` ``(T, N, E)`` (``(N, S, E)``, ``(N, T, E)`` with ``batch_first``) give
    ``(T, N, E)``; the encoder's output is the decoder's ``memory``. An ``*_is_causal`` of
    ``None`` is taken as ``False`` (a hint that changes no number).

    >>> import graphc as gc
    >>> from graphc.nn.transformer import Transformer
    >>> model = Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=2,
    ...                     dim_feedforward=16, batch_first=True)
    >>> src, tgt = gc.randn(3, 7, 8), gc.randn(3, 5, 8)
    >>> mask = Transformer.generate_square_subsequent_mask(5)
    >>> model(src, tgt, tgt_mask=mask, tgt_is_causal=True).shape
    (3, 5, 8)
    >>> mask.numpy().tolist()[1]
    [0.0, 0.0, -inf, -inf, -inf]
    """

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6, dim_feedforward=2048,
                 dropout=0.1, activation="relu", custom_encoder=None, custom_decoder=None, layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                                            batch_first, norm_first, bias)
            self.encoder = TransformerEncoder(layer, num_encoder_layers, LayerNorm(d_model, eps=layer_norm_eps,
                                                                                   bias=bias))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                                            batch_first, norm_first, bias)
            self.decoder = TransformerDecoder(layer, num_decoder_layers, LayerNorm(d_model, eps=layer_norm_eps,
                                                                                   bias=bias))
        self._reset_parameters()
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first
        self.to(device=device, dtype=dtype)  # PyTorch's factory kwargs: placed and cast once built

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        if src.ndim == 3:
            bs, bt = (src.shape[0], tgt.shape[0]) if self.batch_first else (src.shape[1], tgt.shape[1])
            if not isinstance(bs, SymInt) and not isinstance(bt, SymInt) and bs != bt:  # (traced: unchecked)
                raise ShapeError(f"the batch number of src and tgt must be equal, got {bs} and {bt}")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise ShapeError(f"the feature number of src and tgt must be equal to d_model {self.d_model}, got "
                             f"{src.shape[-1]} and {tgt.shape[-1]}")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
                            memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """The ``(sz, sz)`` causal mask: ``-inf`` above the diagonal (position ``i`` may not see
        ``j > i``), 0.0 elsewhere; float32 unless ``dtype`` says otherwise.

        >>> from graphc.nn.transformer import Transformer
        >>> Transformer.generate_square_subsequent_mask(3).numpy().tolist()
        [[0.0, -inf, -inf], [0.0, 0.0, -inf], [0.0, 0.0, 0.0]]
        """
        return full((sz, sz), float("-inf"), dtype=dtype, device=device).triu(1)

    def _reset_parameters(self):
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)
