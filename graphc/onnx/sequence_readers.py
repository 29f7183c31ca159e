"""Readers of ONNX's sequence and optional ops inside a graph (see ``readers`` for the
contract): SequenceEmpty, SequenceConstruct, SequenceAt, SequenceInsert, SequenceErase,
SequenceLength, ConcatFromSequence, SplitToSequence, Optional, OptionalHasElement and
OptionalGetElement.

A sequence is known while importing as a :class:`TensorSequence`, a Python list of its tensors
(graph Values or known arrays): every position an op names must then be known too, and the
sequence leaves no node behind; the tensors flow into the ops that read them (a concatenation,
a SequenceAt). A graph input or output of sequence type has no place in a plan, whose inputs
and outputs are tensors: it is refused by name (graph_reader), as is a sequence passed to an op
that takes tensors. An optional value is its element when it has one, and :data:`NO_ELEMENT`
when it has none, so OptionalHasElement is known while importing.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .shape_readers import _known, _rank, _shape


@dataclass(frozen=True)
class TensorSequence:
    items: tuple
    dtype: np.dtype | None = None  # SequenceEmpty's element type: the sequence may stay empty


@dataclass(frozen=True)
class _NoElement:
    """An optional value without an element."""


NO_ELEMENT = _NoElement()
IMPORT_TIME_VALUES = (TensorSequence, _NoElement)  # what only the readers below may be given


def _optional(r, args):
    return [args[0] if args and args[0] is not None else NO_ELEMENT]


def _has_element(r, args):
    return [np.asarray(bool(args) and args[0] is not None and args[0] is not NO_ELEMENT)]


def _get_element(r, args):
    if not args or args[0] is None or args[0] is NO_ELEMENT:
        raise r.error("OptionalGetElement of an optional value without an element")
    return [args[0]]


def _sequence(r, x, what: str) -> TensorSequence:
    if not isinstance(x, TensorSequence):
        raise r.error(f"{what} must be a sequence")
    return x


def _position(r, seq: TensorSequence, position, default: int, inserting: bool = False) -> int:
    """A position counted from the front, or from the back when negative, as ONNX's."""
    if position is None:
        return default
    p = int(np.asarray(r.static(position, "the sequence position")).reshape(-1)[0])
    n = len(seq.items)
    if not -n <= p <= (n if inserting else n - 1):
        raise r.error(f"position {p} is outside a sequence of {n} tensors")
    return p + n if p < 0 else p


def _empty(r, args):
    from .dtypes import DTYPES

    kind = DTYPES.get(int(r.attrs().get("dtype", 1)))
    return [TensorSequence((), None if kind is None else np.dtype(kind.numpy))]


def _construct(r, args):
    return [TensorSequence(tuple(args))]


def _at(r, args):
    seq = _sequence(r, args[0], "SequenceAt's input")
    return [seq.items[_position(r, seq, args[1], 0)]]


def _insert(r, args):
    seq = _sequence(r, args[0], "SequenceInsert's input")
    at = _position(r, seq, args[2] if len(args) > 2 else None, len(seq.items), inserting=True)
    return [TensorSequence(seq.items[:at] + (args[1],) + seq.items[at:], seq.dtype)]


def _erase(r, args):
    seq = _sequence(r, args[0], "SequenceErase's input")
    at = _position(r, seq, args[1] if len(args) > 1 else None, len(seq.items) - 1)
    return [TensorSequence(seq.items[:at] + seq.items[at + 1:], seq.dtype)]


def _length(r, args):
    return [np.asarray(len(_sequence(r, args[0], "SequenceLength's input").items), np.int64)]


def _concat_from_sequence(r, args):
    seq = _sequence(r, args[0], "ConcatFromSequence's input")
    if not seq.items:
        raise r.error("ConcatFromSequence of an empty sequence")
    attrs = r.attrs()
    new_axis = bool(attrs.get("new_axis", 0))
    rank = _rank(seq.items[0]) + new_axis
    axis = int(attrs["axis"]) % rank
    items = list(seq.items)
    if new_axis:
        items = [np.expand_dims(x, axis) if _known(x) else
                 r.emit("reshape", [x], {"shape": [*_shape(x)[:axis], 1, *_shape(x)[axis:]]}) for x in items]
    if all(_known(x) for x in items):
        return [np.concatenate(items, axis)]
    return [r.emit("concat", items, {"dim": axis})]


def _split_to_sequence(r, args):
    x, split = args[0], args[1] if len(args) > 1 else None
    attrs = r.attrs()
    rank = _rank(x)
    axis = int(attrs.get("axis", 0)) % rank
    size = _shape(x)[axis]
    if not isinstance(size, int):
        raise r.error(f"SplitToSequence along the symbolic dim {size}")
    keep = bool(attrs.get("keepdims", 1))
    if split is None:
        sizes, keep = [1] * size, keep
    else:
        split = np.asarray(r.static(split, "SplitToSequence's split")).reshape(-1)
        keep = True  # keepdims applies only without split
        if np.ndim(r.static(args[1], "split")) == 0:  # a chunk size: the last chunk may be smaller
            chunk = int(split[0])
            sizes = [chunk] * (size // chunk) + ([size % chunk] if size % chunk else [])
        else:
            sizes = [int(s) for s in split]
    if sum(sizes) != size:
        raise r.error(f"SplitToSequence into {sizes} along a dim of {size}")
    items, start = [], 0
    for n in sizes:
        index = [slice(None)] * rank
        index[axis] = slice(start, start + n)
        if _known(x):
            part = np.asarray(x)[tuple(index)]
            items.append(part if keep else np.squeeze(part, axis))
        else:
            slices = [[None, None, 1]] * rank
            slices[axis] = [start, start + n, 1]
            items.append(r.emit("slice", [x], {"slices": slices, "drop": [] if keep else [axis]}))
        start += n
    return [TensorSequence(tuple(items))]


SEQUENCE_READERS = {"SequenceEmpty": _empty, "SequenceConstruct": _construct, "SequenceAt": _at,
                    "SequenceInsert": _insert, "SequenceErase": _erase, "SequenceLength": _length,
                    "ConcatFromSequence": _concat_from_sequence, "SplitToSequence": _split_to_sequence,
                    "Optional": _optional, "OptionalHasElement": _has_element, "OptionalGetElement": _get_element}
