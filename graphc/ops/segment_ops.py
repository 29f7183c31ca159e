"""``torch.segment_reduce``: reduce consecutive segments of a dim whose lengths (or offsets)
are a tensor, so a plan takes them as data: a (segments x length) membership mask built from
their cumulative sums, then a masked reduction. Gradients are those of the masked ops.
"""
from __future__ import annotations

import numpy as np

from ..core.dispatch import apply
from ..core.tensor import Tensor
from ..ir.errors import GraphcError
from ..ir.types import DType

_REDUCE = {"sum": "sum", "prod": "prod", "max": "amax", "min": "amin", "mean": "sum"}


def segment_reduce(data, reduce, *, lengths=None, indices=None, offsets=None, axis=0, unsafe=False, initial=None):
    """Reduce (``"sum"``, ``"mean"``, ``"max"``, ``"min"``, ``"prod"``) each run of
    ``lengths[i]`` consecutive entries of ``data`` along ``axis`` (or between ``offsets[i]``
    and ``offsets[i + 1]``). ``initial`` joins every segment (an empty one gives it; without
    it an empty segment gives 0, 1, -inf, inf or NaN), as PyTorch's.

    >>> import graphc as gc
    >>> gc.segment_reduce(gc.tensor([1.0, 2.0, 3.0, 4.0]), "sum", lengths=gc.tensor([1, 0, 3])).numpy().tolist()
    [1.0, 0.0, 9.0]
    """
    if reduce not in _REDUCE:
        raise GraphcError(f"segment_reduce: reduce must be one of {sorted(_REDUCE)}, got {reduce!r}")
    if indices is not None:
        raise GraphcError("segment_reduce: indices= is not supported (PyTorch has no kernel for it either); "
                          "give lengths= or offsets=")
    start, end = _bounds(lengths, offsets)
    if axis % max(data.ndim, 1) != 0:  # PyTorch: the axis is the last dim of lengths, 1-D here
        raise GraphcError(f"segment_reduce: with 1-D lengths/offsets the axis must be 0, got {axis} "
                          "(batched N-D lengths are not supported)")
    x = data
    length = int(x.shape[0])
    positions = Tensor(np.arange(length, dtype=np.int64))
    member = apply("logical_and", [apply("ge", [positions, start.unsqueeze(1)]),
                                   apply("lt", [positions, end.unsqueeze(1)])])  # (segments, length)
    member = member.reshape(*member.shape, *([1] * (x.ndim - 1)))
    neutral = {"sum": 0.0, "mean": 0.0, "prod": 1.0, "max": -np.inf, "min": np.inf}[reduce]
    picked = apply("where", [member, x.unsqueeze(0), neutral])
    out = getattr(picked, _REDUCE[reduce])(1)
    if initial is not None:
        out = _with_initial(out, reduce, float(initial))
    if reduce == "mean":
        count = member.cast(data.dtype).sum(1)
        out = out / count if initial is None else out / apply("maximum", [count, 1.0])
    return out


def _bounds(lengths, offsets):
    if (lengths is None) == (offsets is None):
        raise GraphcError("segment_reduce: give exactly one of lengths= and offsets=")
    if offsets is not None:
        offsets = _as_index(offsets, "offsets")
        return offsets[:-1], offsets[1:]
    lengths = _as_index(lengths, "lengths")
    end = lengths.cumsum(0)
    return end - lengths, end


def _as_index(t, what):
    t = t if isinstance(t, Tensor) else Tensor(np.asarray(t, np.int64))
    if t.ndim != 1:
        raise GraphcError(f"segment_reduce: {what} must be 1-D, got shape {tuple(t.shape)}")
    return t.cast(DType.int64)


def _with_initial(out, reduce, initial):
    if reduce in ("sum", "mean"):
        return out + initial
    if reduce == "prod":
        return out * initial
    return apply("maximum" if reduce == "max" else "minimum", [out, initial])
