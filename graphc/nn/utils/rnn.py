"""``nn.utils.rnn``: padding a list of variable-length sequences into one tensor.

>>> import graphc as gc
>>> from graphc.nn.utils.rnn import pad_sequence
>>> pad_sequence([gc.ones(2, 3), gc.ones(4, 3)], batch_first=True).shape
(2, 4, 3)
"""
from __future__ import annotations

from ...ir.errors import GraphcError
from ...ops.creation import stack
from .. import functional as F


def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0, padding_side: str = "right"):
    """Stack sequences of shapes ``(L_i, *)`` into ``(L_max, B, *)`` (``(B, L_max, *)`` with
    ``batch_first``), padding each with ``padding_value`` on ``padding_side``, as PyTorch.
    The sequences' lengths are static: a compiled plan holds one padded length."""
    sequences = list(sequences)
    if not sequences:
        raise GraphcError("pad_sequence: received an empty list of sequences")
    if padding_side not in ("right", "left"):
        raise GraphcError(f"pad_sequence: padding_side must be 'right' or 'left', got {padding_side!r}")
    longest = max(int(s.shape[0]) for s in sequences)
    padded = []
    for s in sequences:
        missing = longest - int(s.shape[0])
        widths = [0, 0] * (s.ndim - 1) + ([0, missing] if padding_side == "right" else [missing, 0])
        padded.append(F.pad(s, widths, value=padding_value) if missing else s)
    return stack(padded, 0 if batch_first else 1)
