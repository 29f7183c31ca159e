"""The op table's entries for the ordering primitives of ir/ops/sort.py: ``argsort``,
``mode_index``, ``searchsorted``, ``nonzero_static``. References are plain Python loops over
each row written from the definitions (a sort by (NaN last, value, position) key; counting
runs; counting entries before a value), never graphc's kernels. Samples include ties and NaN,
where the tie rules (stable order; mode's smallest value at its last position) decide the
result. The inputs come from their own generator, so the other rows' inputs stay as they were.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from op_table import BOOL, F32, F64, I64, OpInfo, S, T, fortran

_RNG = np.random.default_rng(20261129)


def _randn(*shape, dtype=F32):
    return _RNG.standard_normal(shape).astype(dtype)


def _ties(*shape, dtype=F32):
    """Small integers as floats: many equal values."""
    return _RNG.integers(-2, 3, shape).astype(dtype)


def _rows(x, axis):
    """(index tuple, list of values) for every 1-D slice of ``x`` along ``axis``."""
    moved = np.moveaxis(x, axis, -1)
    for pos in itertools.product(*[range(s) for s in moved.shape[:-1]]):
        yield pos, list(moved[pos])


def _key(value, descending):
    nan = isinstance(value, float) and math.isnan(value)
    v = 0 if nan else (-value if descending else value)
    return (0 if (nan and descending) or (not nan and not descending) else 1, v if not nan else 0)


def argsort_ref(ins, attrs):
    x = ins[0]
    if x.ndim == 0:
        return [np.array(0, I64)]
    axis, desc = attrs.get("dim", -1) % x.ndim, attrs.get("descending", False)
    out = np.moveaxis(np.zeros(x.shape, I64), axis, -1).copy()
    for pos, row in _rows(x.astype(F64) if x.dtype.kind == "f" else x.astype(np.int64), axis):
        order = sorted(range(len(row)), key=lambda i: (_key(row[i], desc), i))
        out[pos] = order
    return [np.moveaxis(out, -1, axis)]


def mode_ref(ins, attrs):
    x = ins[0]
    if x.ndim == 0:
        return [np.array(0, I64)]
    axis = attrs.get("dim", -1) % x.ndim
    shape = list(x.shape)
    shape[axis] = 1
    out = np.moveaxis(np.zeros(shape, I64), axis, -1).copy()
    for pos, row in _rows(x.astype(F64) if x.dtype.kind == "f" else x, axis):
        counts = {}
        for v in row:
            if not (isinstance(v, float) and math.isnan(v)):
                counts[v] = counts.get(v, 0) + 1
        best = max(counts.values()) if counts else 0
        if best <= 1 and any(isinstance(v, float) and math.isnan(v) for v in row):
            candidates = [v for v in row if not (isinstance(v, float) and math.isnan(v))]
            value = min(candidates) if candidates else None
        else:
            value = min(v for v, c in counts.items() if c == best)
        out[pos] = [max(i for i, v in enumerate(row) if v == value)] if value is not None else [0]
    return [np.moveaxis(out, -1, axis)]


def searchsorted_ref(ins, attrs):
    seq, values = ins
    right = attrs.get("right", False)
    out = np.zeros(values.shape, I64)
    for pos in itertools.product(*[range(s) for s in values.shape]):
        row = seq if seq.ndim == 1 else seq[pos[:-1]]
        v = values[pos]
        out[pos] = sum(1 for s in row if (s <= v if right else s < v))
    return [out]


def nonzero_static_ref(ins, attrs):
    x, size, fill = ins[0], attrs["size"], attrs.get("fill_value", -1)
    found = [pos for pos in itertools.product(*[range(s) for s in x.shape]) if x[pos]]
    out = np.full((size, x.ndim), fill, I64)
    for k, pos in enumerate(found[:size]):
        out[k] = pos
    return [out]


def _torch_argsort(ts, a):
    if ts[0].ndim == 0:
        return T().zeros((), dtype=T().int64)
    return T().argsort(ts[0], dim=a["dim"], descending=a["descending"], stable=True)


def _torch_mode(ts, a):
    if ts[0].ndim == 0:
        return T().zeros((), dtype=T().int64)
    return T().mode(ts[0], dim=a["dim"], keepdim=True).indices


def _torch_nonzero_static(ts, a):
    return T().nonzero_static(ts[0], size=a["size"], fill_value=a["fill_value"])


def sort_table() -> list[OpInfo]:
    ar, mo, ss, nz = argsort_ref, mode_ref, searchsorted_ref, nonzero_static_ref
    nan_row = np.array([[1.0, np.nan, -np.inf, 2.0, np.nan, np.inf, 1.0]], F32)
    t = [OpInfo("argsort", torch=_torch_argsort, samples=[
        S([_randn(3, 5)], ar, "last-dim", {"dim": -1}, grad=False),
        S([_ties(4, 6)], ar, "ties-stable", {"dim": 1}, grad=False),
        S([_ties(4, 6)], ar, "ties-descending", {"dim": 1, "descending": True}, grad=False),
        S([_randn(5, 3)], ar, "dim0", {"dim": 0}, grad=False, dynamic=True),
        S([nan_row], ar, "nan-inf", {"dim": 1}, grad=False),
        S([nan_row], ar, "nan-inf-descending", {"dim": 1, "descending": True}, grad=False),
        S([_RNG.integers(-5, 5, (3, 4)).astype(I64)], ar, "int64-descending", {"dim": 1, "descending": True},
          grad=False),
        S([_RNG.random((2, 5)) < 0.5], ar, "bool", {"dim": 1}, grad=False),
        S([_randn(3, 4, dtype=F64)], ar, "f64", {"dim": -1}, grad=False),
        S([fortran(_ties(4, 3))], ar, "noncontig", {"dim": 1}, grad=False),
        S([_randn()], ar, "0d", {"dim": 0}, grad=False),
    ])]
    t.append(OpInfo("mode_index", torch=_torch_mode, samples=[
        S([_ties(3, 8)], mo, "ties", {"dim": -1}, grad=False),
        S([_ties(6, 3)], mo, "dim0", {"dim": 0}, grad=False),
        S([np.array([[3, 1, 3, 1, 2, 5], [2, 2, 1, 1, 7, 7]], F32)], mo, "smallest-last", {"dim": 1}, grad=False),
        S([_RNG.integers(0, 3, (2, 7)).astype(I64)], mo, "int64", {"dim": 1}, grad=False),
        S([_ties(3, 5, dtype=F64)], mo, "f64", {"dim": 1}, grad=False),
        S([fortran(_ties(5, 4))], mo, "noncontig", {"dim": 1}, grad=False),
        S([_randn()], mo, "0d", {"dim": 0}, grad=False),
    ]))
    sorted_row = np.sort(_ties(6)).astype(F32)
    t.append(OpInfo("searchsorted", torch=lambda ts, a: T().searchsorted(ts[0], ts[1], right=a["right"]), samples=[
        S([sorted_row, _ties(4, 3)], ss, "1d-left", grad=False, dynamic=False),
        S([sorted_row, _ties(4, 3)], ss, "1d-right", {"right": True}, grad=False, dynamic=False),
        S([np.sort(_randn(3, 5), axis=1), _randn(3, 4)], ss, "rows", grad=False),
        S([np.sort(_ties(2, 5), axis=1), _ties(2, 3)], ss, "rows-right", {"right": True}, grad=False),
        S([np.sort(_randn(5, dtype=F64)), _randn(3, dtype=F64)], ss, "f64", grad=False, dynamic=False),
        S([np.arange(4, dtype=np.int64), _RNG.integers(-1, 5, (3,)).astype(I64)], ss, "int64", grad=False,
          dynamic=False),
        S([fortran(np.sort(_randn(4, 3), axis=1)), fortran(_randn(4, 2))], ss, "noncontig", grad=False),
    ]))
    t.append(OpInfo("nonzero_static", torch=_torch_nonzero_static, samples=[
        S([_ties(3, 4)], nz, "pad", {"size": 12, "fill_value": -1}, grad=False),
        S([_ties(3, 4)], nz, "cut", {"size": 2, "fill_value": -1}, grad=False),
        S([_RNG.random((2, 3)) < 0.5], nz, "bool-fill", {"size": 5, "fill_value": 7}, grad=False),
        S([_ties(6)], nz, "1d", {"size": 4, "fill_value": -1}, grad=False),
        S([np.zeros((2, 2), F32)], nz, "none", {"size": 3, "fill_value": -1}, grad=False),
        S([fortran(_ties(4, 3))], nz, "noncontig", {"size": 6, "fill_value": -1}, grad=False),
        S([_ties(3, 2, dtype=F64)], nz, "f64", {"size": 4, "fill_value": 0}, grad=False),
    ]))
    return t

