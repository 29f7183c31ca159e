"""``nn.utils.rnn``: padding and packing variable-length sequences, as PyTorch.

A ``PackedSequence`` here keeps the padded ``(T, B, *)`` tensor and the lengths, not
PyTorch's packed rows: the recurrent layers run one scan over the padded tensor and stop each
sequence at its own length with a mask (the state holds still past the end, the outputs are
zero there), which gives PyTorch's results, keeps the batch in the caller's order (so no
``sorted_indices`` permutation is needed on ``hx`` or ``h_n``) and compiles with the lengths
as a plan input. PyTorch's fields (``data``, ``batch_sizes``, ``sorted_indices``,
``unsorted_indices``) are computed on demand from the lengths' values.

>>> import graphc as gc
>>> from graphc.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence
>>> padded = pad_sequence([gc.ones(3, 2), gc.ones(1, 2)], batch_first=True)
>>> packed = pack_padded_sequence(padded, [3, 1], batch_first=True)
>>> packed.batch_sizes.tolist(), tuple(packed.data.shape)
([2, 1, 1], (4, 2))
>>> out, lengths = pad_packed_sequence(packed, batch_first=True, padding_value=-1.0)
>>> out[1, :, 0].tolist(), lengths.tolist()
([1.0, -1.0, -1.0], [3, 1])
"""
from __future__ import annotations

import numpy as np

from ...core.control_flow import scan
from ...core.tensor import Tensor
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


class PackedSequence:
    """Variable-length sequences for the recurrent layers (see the module doc). Built by
    :func:`pack_padded_sequence` or :func:`pack_sequence`; also from PyTorch's fields
    ``PackedSequence(data, batch_sizes, sorted_indices, unsorted_indices)`` eagerly."""

    def __init__(self, data=None, batch_sizes=None, sorted_indices=None, unsorted_indices=None, *, padded=None,
                 lengths=None, enforce_sorted=True):
        if padded is None:
            padded, lengths = _unpack_rows(data, batch_sizes, sorted_indices)
            enforce_sorted = sorted_indices is None
        self.padded = padded  # (T, B, *), time-major, the batch in the caller's order
        self.lengths = lengths  # int64 (B,)
        self.enforce_sorted = enforce_sorted
        self._mask = None

    # ---- what the recurrent layers read -------------------------------------------------------
    def step_mask(self) -> Tensor:
        """``(T, B, 1)`` bool: whether time step ``t`` is inside sequence ``b``. One small scan
        counting each length down (no ``arange``, so a symbolic ``T`` stays symbolic)."""
        if self._mask is None:
            def count_down(remaining, _):
                return remaining - 1, remaining > 0
            _, mask = scan(count_down, self.lengths, self.padded.detach()[..., :1].flatten(2))
            self._mask = mask.unsqueeze(-1)
        return self._mask

    def with_padded(self, padded: Tensor) -> "PackedSequence":
        """The same lengths over another padded tensor (a layer's output)."""
        out = PackedSequence(padded=padded, lengths=self.lengths, enforce_sorted=self.enforce_sorted)
        out._mask = self._mask
        return out

    # ---- PyTorch's fields, from the lengths' values ---------------------------------------------
    @property
    def data(self) -> Tensor:
        """The valid rows, time step by time step, longest sequence first (PyTorch's layout)."""
        lengths, order = self._lengths_and_order("data")
        batch = len(lengths)
        rows = [t * batch + b for t in range(int(lengths.max())) for b in order if lengths[b] > t]
        flat = self.padded.reshape(-1, *self.padded.shape[2:]) if self.padded.ndim > 2 else self.padded.reshape(-1, 1)
        table = flat.reshape(flat.shape[0], -1)
        picked = F.embedding(Tensor(np.asarray(rows, np.int64)), table)  # a differentiable row gather
        return picked.reshape(len(rows), *self.padded.shape[2:])

    @property
    def batch_sizes(self) -> Tensor:
        lengths, _ = self._lengths_and_order("batch_sizes")
        return Tensor(np.array([(lengths > t).sum() for t in range(int(lengths.max()))], np.int64))

    @property
    def sorted_indices(self):
        if self.enforce_sorted:
            return None
        return Tensor(self._lengths_and_order("sorted_indices")[1])

    @property
    def unsorted_indices(self):
        if self.enforce_sorted:
            return None
        return Tensor(np.argsort(self._lengths_and_order("unsorted_indices")[1], kind="stable").astype(np.int64))

    def _lengths_and_order(self, what: str):
        values = _concrete(self.lengths)
        if values is None:
            raise GraphcError(f"PackedSequence.{what} needs the lengths' values, which a compiled function does not "
                              "have (they are a plan input); read it eagerly, or use pad_packed_sequence")
        order = np.arange(len(values)) if self.enforce_sorted else np.argsort(-values, kind="stable")
        return values, order.astype(np.int64)

    def __iter__(self):  # PyTorch's PackedSequence is a namedtuple of these four
        return iter((self.data, self.batch_sizes, self.sorted_indices, self.unsorted_indices))

    def to(self, *args, **kwargs) -> "PackedSequence":
        return PackedSequence(padded=self.padded.to(*args, **kwargs), lengths=self.lengths,
                              enforce_sorted=self.enforce_sorted)

    @property
    def is_cuda(self) -> bool:
        return self.padded.is_cuda

    def __repr__(self) -> str:
        return f"PackedSequence(padded={tuple(self.padded.shape)}, lengths={self.lengths!r})"


def pack_padded_sequence(input, lengths, batch_first: bool = False, enforce_sorted: bool = True):  # noqa: A002
    """Pack a padded batch (``(T, B, *)``, or ``(B, T, *)`` with ``batch_first``) whose
    sequence ``b`` has ``lengths[b]`` steps (a list, a numpy array or an int64 tensor, as
    PyTorch). With ``enforce_sorted`` the lengths must be decreasing (checked when their values
    are known). Known lengths trim the padding to the longest; traced lengths (a plan input)
    keep the padded length ``T``, which :func:`pad_packed_sequence` then gives back."""
    if not isinstance(input, Tensor):
        raise GraphcError(f"pack_padded_sequence: input must be a Tensor, got {type(input).__name__}")
    if input.ndim < 2:
        raise GraphcError(f"pack_padded_sequence: input must have at least 2 dims (time and batch), got shape "
                          f"{tuple(input.shape)}")
    padded = input.transpose(0, 1) if batch_first else input
    lengths = lengths if isinstance(lengths, Tensor) else Tensor(np.asarray(lengths, np.int64))
    if lengths.ndim != 1 or lengths.dtype.is_float:
        raise GraphcError(f"pack_padded_sequence: lengths must be a 1-D list or tensor of integers, got "
                          f"{lengths.dtype.name}{list(lengths.shape)}")
    values = _concrete(lengths)
    if values is not None:
        _check_lengths(values, int(padded.shape[1]), int(padded.shape[0]), enforce_sorted)
        if int(values.max()) < int(padded.shape[0]):
            padded = padded[:int(values.max())]
    lengths = lengths.long() if lengths.dtype.name != "int64" else lengths
    return PackedSequence(padded=padded, lengths=lengths, enforce_sorted=enforce_sorted)


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False, padding_value: float = 0.0,
                        total_length=None):
    """``(padded, lengths)``: the batch padded with ``padding_value`` to the longest sequence
    (or ``total_length``), in the order it was packed, and the lengths as int64."""
    if not isinstance(sequence, PackedSequence):
        raise GraphcError(f"pad_packed_sequence: expected a PackedSequence, got {type(sequence).__name__}")
    padded = sequence.padded
    if padding_value != 0.0:  # a layer's outputs are already zero past each sequence's end
        padded = padded.masked_fill(~sequence.step_mask().reshape(*padded.shape[:2], *([1] * (padded.ndim - 2))),
                                    padding_value)
    if total_length is not None:
        steps = int(padded.shape[0])
        if total_length < steps:
            raise GraphcError(f"pad_packed_sequence: expected total_length to be at least the length of the longest "
                              f"sequence ({steps}), got {total_length}")
        if total_length > steps:
            widths = [0, 0] * (padded.ndim - 1) + [0, total_length - steps]
            padded = F.pad(padded, widths, value=padding_value)
    return (padded.transpose(0, 1) if batch_first else padded), sequence.lengths


def pack_sequence(sequences, enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of ``(L_i, *)`` tensors (PyTorch's ``pack_sequence``)."""
    sequences = list(sequences)
    lengths = [int(s.shape[0]) for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpad_sequence(padded_sequences, lengths, batch_first: bool = False) -> list:
    """The list of ``(L_i, *)`` tensors a padded batch holds (PyTorch's ``unpad_sequence``)."""
    values = _concrete(lengths if isinstance(lengths, Tensor) else Tensor(np.asarray(lengths, np.int64)))
    if values is None:
        raise GraphcError("unpad_sequence needs the lengths' values (a list of Python ints when compiled)")
    batch = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    return [batch[b, :int(n)] for b, n in enumerate(values)]


def unpack_sequence(packed_sequences: PackedSequence) -> list:
    """The list of ``(L_i, *)`` tensors a PackedSequence holds, in the order packed."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)


def _concrete(lengths: Tensor):
    """The lengths as a numpy int64 array, or None when traced (a plan input)."""
    return None if lengths._tracer is not None else np.asarray(lengths.numpy(), np.int64)


def _check_lengths(values, batch: int, steps: int, enforce_sorted: bool) -> None:
    if len(values) != batch:
        raise GraphcError(f"pack_padded_sequence: expected {batch} lengths (one per sequence), got {len(values)}")
    if (values <= 0).any():
        raise GraphcError(f"pack_padded_sequence: every length must be at least 1, got {values.tolist()}")
    if (values > steps).any():
        raise GraphcError(f"pack_padded_sequence: a length is longer than the padded input's {steps} steps: "
                          f"{values.tolist()}")
    if enforce_sorted and (np.diff(values) > 0).any():
        raise GraphcError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You can "
                          "pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to sidestep this "
                          "requirement if you do not need ONNX exportability.")


def _unpack_rows(data, batch_sizes, sorted_indices):
    """PyTorch's packed rows back to ``(padded, lengths)`` in the original order (eagerly)."""
    if not isinstance(data, Tensor) or batch_sizes is None:
        raise GraphcError("PackedSequence(data, batch_sizes, ...) needs the packed rows and batch_sizes (or build one "
                          "with pack_padded_sequence)")
    sizes = _concrete(batch_sizes if isinstance(batch_sizes, Tensor) else Tensor(np.asarray(batch_sizes)))
    if sizes is None or (np.diff(sizes) > 0).any() or int(sizes.sum()) != int(data.shape[0]):
        raise GraphcError("PackedSequence: batch_sizes must be known, non-increasing and sum to data's rows")
    batch, steps = int(sizes[0]), len(sizes)
    order = np.arange(batch) if sorted_indices is None else np.asarray(_concrete(sorted_indices), np.int64)
    slot_of_row = [t * batch + order[k] for t, n in enumerate(sizes) for k in range(int(n))]
    source = np.full(steps * batch, int(data.shape[0]), np.int64)  # padding reads the zero row after the data
    source[slot_of_row] = np.arange(int(data.shape[0]))
    table = F.pad(data.reshape(int(data.shape[0]), -1), [0, 0, 0, 1])
    padded = F.embedding(Tensor(source), table).reshape(steps, batch, *data.shape[1:])
    lengths = np.zeros(batch, np.int64)
    lengths[order] = [(sizes > k).sum() for k in range(batch)]
    return padded, Tensor(lengths)
