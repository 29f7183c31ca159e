"""Kernels of ``argsort``, ``mode_index`` and ``searchsorted`` (ir/ops/sort.py), for numpy and
cupy. numpy's stable sort already puts NaN last; descending order sorts the negated keys
(``~x`` for integers and bools, which cannot overflow) and then moves the NaNs to the front
with a second stable pass, so ties keep their input order both ways, as PyTorch's stable sort.
"""
from __future__ import annotations

import numpy as np


def _stable_argsort(xp, a, axis):
    if xp.__name__ == "numpy":
        return np.argsort(a, axis=axis, kind="stable")
    return xp.argsort(a, axis=axis)  # cupy's sort is a stable radix sort


def argsort_array(xp, x, axis, descending):
    """The stable sorting permutation of ``x`` along ``axis`` (NaN largest)."""
    if x.ndim == 0:
        return xp.zeros((), dtype=np.int64)
    if not descending:
        return _stable_argsort(xp, x, axis).astype(np.int64, copy=False)
    if x.dtype.kind != "f":
        return _stable_argsort(xp, ~x, axis).astype(np.int64, copy=False)
    perm = _stable_argsort(xp, -x, axis)
    nan_last = xp.isnan(xp.take_along_axis(x, perm, axis))
    return xp.take_along_axis(perm, _stable_argsort(xp, ~nan_last, axis), axis).astype(np.int64, copy=False)


def _argsort(xp, spec):
    rank = spec.in_types[0].rank
    axis = spec.attrs["dim"] % rank if rank else 0
    descending = spec.attrs["descending"]
    return lambda x: argsort_array(xp, x, axis, descending)


def mode_rows(xp, rows):
    """For each row of a 2-D array: the last position of its smallest most frequent value."""
    m, n = rows.shape
    perm = _stable_argsort(xp, rows, 1)
    s = xp.take_along_axis(rows, perm, 1)
    new_run = xp.concatenate([xp.ones((m, 1), dtype=bool), s[:, 1:] != s[:, :-1]], axis=1)  # NaN != NaN
    run = xp.cumsum(new_run, axis=1) - 1
    counts = xp.bincount((run + xp.arange(m)[:, None] * n).ravel(), minlength=m * n).reshape(m, n)
    best = xp.argmax(counts, axis=1)  # the first longest run: the smallest value
    return xp.max(xp.where(run == best[:, None], perm, -1), axis=1).astype(np.int64)


def _mode_index(xp, spec):
    x = spec.in_types[0]
    axis = spec.attrs["dim"] % x.rank if x.rank else 0
    out_shape = spec.out_types[0].shape

    def run(a):
        if a.ndim == 0:
            return xp.zeros((), dtype=np.int64)
        moved = xp.moveaxis(a, axis, -1)
        return mode_rows(xp, moved.reshape(-1, moved.shape[-1])).reshape(out_shape)
    return run


def search_rows(xp, seq, values, right):
    """PyTorch's binary search (lower bound; upper bound with ``right``), for all values at
    once: ``!(mid >= v)`` moves right, so a NaN value lands after every entry, and an unsorted
    row gives PyTorch's answer too. ``seq`` is 1-D or one row per row of ``values``."""
    n = seq.shape[-1]
    rows = seq.reshape(1, n) if seq.ndim == 1 else seq.reshape(-1, n)
    vals = values.reshape(1, -1) if seq.ndim == 1 else values.reshape(rows.shape[0], -1)
    start = xp.zeros(vals.shape, dtype=np.int64)
    end = xp.full(vals.shape, n, dtype=np.int64)
    for _ in range(max(n, 1).bit_length() + 1):  # each step halves every interval
        mid = start + (end - start) // 2
        probe = xp.take_along_axis(rows, xp.minimum(mid, max(n - 1, 0)), 1) if seq.ndim > 1 else rows[0][
            xp.minimum(mid, max(n - 1, 0))]
        go_right = ~(probe > vals) if right else ~(probe >= vals)
        active = start < end
        start = xp.where(active & go_right, mid + 1, start)
        end = xp.where(active & ~go_right, mid, end)
    return start.reshape(values.shape)


def _searchsorted(xp, spec):
    right = spec.attrs["right"]

    def run(seq, values):
        if seq.shape[-1] == 0 or values.size == 0:
            return xp.zeros(values.shape, dtype=np.int64)
        return search_rows(xp, seq, values, right)
    return run


def _nonzero_static(xp, spec):
    size, fill = spec.attrs["size"], spec.attrs["fill_value"]

    def run(x):
        found = xp.argwhere(x)[:size].astype(np.int64)
        out = xp.full((size, x.ndim), fill, dtype=np.int64)
        out[:found.shape[0]] = found
        return out
    return run


KERNELS = {"nonzero_static": _nonzero_static, "argsort": _argsort, "mode_index": _mode_index, "searchsorted": _searchsorted}
