"""Searching sorted rows and counting into bins: ``searchsorted``, ``bucketize``, ``histc``,
``histogram``. The positions are the int64 ``searchsorted`` primitive (ir/ops/sort.py); the
counts are a ``scatter`` sum of ones (or weights) into the bins, so each compiles with a traced
batch dim. Bin counts carry no gradient (PyTorch has none for them).
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from ..core.dispatch import apply
from ..core.tensor import Tensor
from ..ir.errors import ShapeError
from .scatter_ops import gather
from .surface import torchsymbol

_METHOD_AND_TOP = dict(functional=False)
HistogramResult = namedtuple("histogram", ["hist", "bin_edges"])


def _as_tensor(values, like):
    if isinstance(values, Tensor):
        return values
    return Tensor(np.asarray(values, dtype=like.dtype.numpy))


def _no_int32(out_int32, what):
    if out_int32:
        raise ShapeError(f"{what}: out_int32=True asks for int32 indices, a dtype graphc does not have; "
                         "leave it False (int64)")


@torchsymbol(method=False, functional=False)
def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, out=None, sorter=None):
    """Where ``input``'s values would go in the sorted last dim of ``sorted_sequence`` (1-D,
    or one row per row of ``input``): before equal values, after them with ``right=True`` /
    ``side="right"``; ``sorter`` gives the order of an unsorted sequence.

    >>> import graphc as gc
    >>> gc.searchsorted(gc.tensor([1.0, 3.0, 5.0]), gc.tensor([3.0, 6.0])).numpy().tolist()
    [1, 3]
    """
    _no_int32(out_int32, "searchsorted")
    if side is not None:
        if side not in ("left", "right"):
            raise ShapeError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
        if right and side == "left":
            raise ShapeError("searchsorted: side='left' contradicts right=True")
        right = side == "right"
    values = _as_tensor(input, sorted_sequence)
    if sorter is not None:
        sorted_sequence = gather(sorted_sequence, -1, sorter)
    return apply("searchsorted", [sorted_sequence.detach(), values.detach()], {"right": bool(right)})


@torchsymbol(**_METHOD_AND_TOP)
def bucketize(input, boundaries, *, out_int32=False, right=False):
    """The bucket of each value among the sorted 1-D ``boundaries``: ``i`` with
    ``boundaries[i-1] < x <= boundaries[i]`` (``<=``/``<`` swapped with ``right=True``).

    >>> import graphc as gc
    >>> gc.bucketize(gc.tensor([0.5, 1.0, 4.0]), gc.tensor([1.0, 2.0, 3.0])).numpy().tolist()
    [0, 0, 3]
    """
    _no_int32(out_int32, "bucketize")
    if boundaries.ndim != 1:
        raise ShapeError(f"bucketize: boundaries must be 1-D, got {boundaries.ndim}-d")
    return searchsorted(boundaries, input, right=right)


def _bin_counts(flat, bin_index, keep, bins, weight, dtype):
    """Sum of ones (or ``weight``) per bin: a scatter into ``bins`` zeros; ``keep`` masks out
    values outside the range (sent to bin 0 with weight 0)."""
    ones = apply("full", [], {"shape": list(flat.dims), "value": 1.0, "dtype": dtype.name}) if weight is None \
        else weight.reshape(-1).detach().cast(dtype)
    amounts = apply("where", [keep, ones, 0.0])
    zeros = Tensor(np.zeros(bins, dtype=dtype.numpy))
    return apply("scatter", [zeros, apply("where", [keep, bin_index, 0]), amounts], {"dim": 0, "reduce": "sum"})


def _range(flat, low, high, widen):
    """(low, high) as 0-d tensors: the data's min and max when both are None or equal (widened
    by ``widen`` each way when the data is constant, as PyTorch)."""
    if low is not None and high is not None and low != high:
        return float(low), float(high)
    if low is not None and low == high and (low != 0 or widen == 0.5):
        return float(low) - widen, float(high) + widen
    lo = apply("max", [-flat], {"dims": None, "keepdim": False}) * -1
    hi = apply("max", [flat], {"dims": None, "keepdim": False})
    same = apply("eq", [lo, hi])
    return apply("where", [same, lo - widen, lo]), apply("where", [same, hi + widen, hi])


@torchsymbol(**_METHOD_AND_TOP)
def histc(input, bins=100, min=0, max=0):  # noqa: A002 - PyTorch's names
    """Counts of ``input``'s values in ``bins`` equal bins over ``[min, max]`` (the data's range
    when both are 0); values outside are left out, ``max`` itself counts in the last bin.

    >>> import graphc as gc
    >>> gc.histc(gc.tensor([1.0, 2.0, 1.0]), bins=4, min=0, max=3).numpy().tolist()
    [0.0, 2.0, 1.0, 0.0]
    """
    if not input.dtype.is_float:
        raise ShapeError(f"histc: input must be a float tensor, got {input.dtype.name}")
    if int(bins) <= 0:
        raise ShapeError(f"histc: bins must be > 0, got {bins}")
    if min > max:
        raise ShapeError(f"histc: max ({max}) must be larger than min ({min})")
    flat = input.reshape(-1).detach()
    if input._tracer is None and input.numel() == 0:
        return Tensor(np.zeros(int(bins), dtype=input.dtype.numpy))
    low, high = _range(flat, min if (min, max) != (0, 0) else None, max if (min, max) != (0, 0) else None, 1.0)
    position = ((flat - low) * int(bins) / (high - low)).floor().long()
    position = apply("minimum", [position, int(bins) - 1])  # max itself: the last bin
    keep = apply("logical_and", [flat >= low, flat <= high])
    return _bin_counts(flat, position, keep, int(bins), None, input.dtype)


def _edges(flat, bins, range_, dtype):
    """``bins + 1`` edges from PyTorch's linspace over the range (the data's when None)."""
    if range_ is not None:
        low, high = (float(v) for v in range_)
        if low > high:
            raise ShapeError(f"histogram: range {tuple(range_)} must have min <= max")
        if low == high:
            low, high = low - 0.5, high + 0.5
    elif flat._tracer is None and flat.numel() == 0:
        low, high = 0.0, 1.0  # PyTorch's edges for no data
    else:
        low, high = _range(flat, None, None, 0.5)
    i = np.arange(bins + 1)
    # PyTorch's linspace: from the start for the first half, from the end for the second
    front = Tensor((i < (bins + 1) // 2).astype(bool))
    steps_from_low = Tensor(i.astype(dtype.numpy))
    steps_from_high = Tensor((bins - i).astype(dtype.numpy))
    step = (high - low) / bins if isinstance(low, float) else (high - low) / float(bins)
    from_low = steps_from_low * step + low
    from_high = -(steps_from_high * step) + high
    return apply("where", [front, from_low, from_high]).cast(dtype)


@torchsymbol(**_METHOD_AND_TOP)
def histogram(input, bins, *, range=None, weight=None, density=False):  # noqa: A002 - PyTorch's names
    """``(hist, bin_edges)``: counts (sums of ``weight``) of ``input``'s values in ``bins``
    equal bins over ``range`` (the data's by default), or between the given 1-D edges;
    ``density`` divides by the total and the bin widths.

    >>> import graphc as gc
    >>> h, e = gc.histogram(gc.tensor([1.0, 2.0, 1.0, 4.0]), 3)
    >>> h.numpy().tolist(), e.numpy().tolist()
    ([2.0, 1.0, 1.0], [1.0, 2.0, 3.0, 4.0])
    """
    if not input.dtype.is_float:
        raise ShapeError(f"histogram: input must be a float tensor, got {input.dtype.name}")
    flat = input.reshape(-1).detach()
    if isinstance(bins, Tensor):
        if bins.ndim != 1 or bins.shape[0] < 2:
            raise ShapeError(f"histogram: bin edges must be a 1-D tensor of at least 2 values, got {bins.shape}")
        edges = bins.detach().cast(input.dtype)
        count = int(bins.shape[0]) - 1
    else:
        count = int(bins)
        if count <= 0:
            raise ShapeError(f"histogram: bins must be > 0, got {bins}")
        edges = _edges(flat, count, range, input.dtype)
    position = apply("searchsorted", [edges, flat], {"right": True}) - 1
    last = gather(edges, 0, Tensor(np.asarray([count], dtype=np.int64))).reshape(())
    first = gather(edges, 0, Tensor(np.asarray([0], dtype=np.int64))).reshape(())
    position = apply("where", [flat == last, count - 1, position])  # the last edge closes the last bin
    keep = apply("logical_and", [flat >= first, flat <= last])
    hist = _bin_counts(flat, position, keep, count, weight, input.dtype)
    if density:
        widths = edges[1:] - edges[:-1]
        hist = hist / (hist.sum() * widths)
    return HistogramResult(hist, edges)
