"""Op table entries of the scans of ir/ops/cumulative.py (``cumulative``: running sums and
log-sum-exps; ``cummax``: running max/min; ``cummax_indices``: where each came from):
references are loops over the scanned
dim in float64, written from the definitions; inputs from this module's own seeded generator."""
from __future__ import annotations

import numpy as np

from op_table import F32, F64, I64, OpInfo, S, T, fortran

_RNG = np.random.default_rng(3434)
_NAN = dict(grad=False, no_torch="NaN inputs: the recorded references' input fingerprint takes moments")


def _randn(*shape, dtype=F32):
    return _RNG.standard_normal(shape).astype(dtype)


def _distinct(*shape, dtype=F32):
    n = int(np.prod(shape, dtype=np.int64))
    return ((_RNG.permutation(n) - n // 2) * 0.25).reshape(shape).astype(dtype)


def _scan_ref(ins, attrs):
    x = ins[0]
    out_dtype = I64 if x.dtype.kind in "bu" or x.dtype == I64 else x.dtype
    y = np.moveaxis(np.atleast_1d(x).astype(F64 if x.dtype.kind == "f" else I64), attrs["dim"] % max(x.ndim, 1), -1)
    if attrs.get("reverse"):
        y = y[..., ::-1]
    out = np.empty(y.shape, y.dtype)
    acc = y[..., 0]
    out[..., 0] = acc
    for i in range(1, y.shape[-1]):
        acc = acc + y[..., i] if attrs["kind"] == "sum" else np.log(np.exp(acc) + np.exp(y[..., i]))
        out[..., i] = acc
    if attrs.get("reverse"):
        out = out[..., ::-1]
    return [np.moveaxis(out, -1, attrs["dim"] % max(x.ndim, 1)).reshape(x.shape).astype(out_dtype)]


def _torch_scan(ts, a):
    x, dim = ts[0], a["dim"]
    flip = (lambda t: t.flip(dim) if t.ndim else t) if a["reverse"] else (lambda t: t)
    fn = T().cumsum if a["kind"] == "sum" else T().logcumsumexp
    return flip(fn(flip(x), dim))


def _cummax_ref(ins, attrs):
    """PyTorch's loop: take x when it is NaN, or >= (<=) the running value that is not NaN."""
    x = ins[0]
    y = np.moveaxis(np.atleast_1d(x), attrs["dim"] % max(x.ndim, 1), -1)
    values, indices = np.empty_like(y), np.zeros(y.shape, I64)
    for pos in np.ndindex(*y.shape[:-1]):
        best, at = y[pos + (0,)], 0
        for i in range(y.shape[-1]):
            v = y[pos + (i,)]
            wins = v >= best if attrs["largest"] else v <= best
            if np.isnan(v) or (not np.isnan(best) and wins):
                best, at = v, i
            values[pos + (i,)], indices[pos + (i,)] = best, at
    back = [np.moveaxis(a, -1, attrs["dim"] % max(x.ndim, 1)).reshape(x.shape) for a in (values, indices)]
    return back


def _torch_cummax(part):
    def run(ts, a):
        return getattr((T().cummax if a["largest"] else T().cummin)(ts[0], a["dim"]), part)
    return run


def _values_ref(ins, attrs):
    return _cummax_ref(ins, attrs)[:1]


def _indices_ref(ins, attrs):
    return _cummax_ref(ins, attrs)[1:]


def cumulative_table():
    nan_row = np.array([[1.0, np.nan, 3.0, 0.5], [2.0, 1.0, np.nan, np.nan]], F32)
    return [
        OpInfo("cumulative", [
            S([_randn(3, 4)], _scan_ref, "sum-f32", {"kind": "sum", "dim": 1}),
            S([_randn(4, 3, dtype=F64)], _scan_ref, "sum-reverse-f64", {"kind": "sum", "dim": 0, "reverse": True}),
            S([_RNG.integers(-5, 5, (3, 4))], _scan_ref, "sum-int64", {"kind": "sum", "dim": -1}, grad=False),
            S([_RNG.random((2, 5)) < 0.5], _scan_ref, "sum-bool", {"kind": "sum", "dim": 1}, grad=False),
            S([_randn(3, 5) * 4], _scan_ref, "logsumexp-f32", {"kind": "logsumexp", "dim": -1}),
            S([_randn(2, 3, 4, dtype=F64)], _scan_ref, "logsumexp-reverse-f64",
              {"kind": "logsumexp", "dim": 1, "reverse": True}),
            S([np.asarray(_randn(), F32)], _scan_ref, "sum-0d", {"kind": "sum", "dim": 0}),
            S([fortran(_randn(4, 3))], _scan_ref, "logsumexp-noncontig", {"kind": "logsumexp", "dim": 0}),
        ], _torch_scan),
        OpInfo("cummax", [
            S([_distinct(3, 5)], _values_ref, "max-f32", {"dim": 1, "largest": True}),
            S([_distinct(4, 3, dtype=F64)], _values_ref, "min-f64", {"dim": 0, "largest": False}),
            S([_RNG.integers(0, 3, (3, 6))], _values_ref, "max-int64-ties", {"dim": 1, "largest": True}, grad=False),
            S([_RNG.integers(0, 3, (3, 6)).astype(F32)], _values_ref, "min-f32-ties", {"dim": -1, "largest": False},
              grad=False),
            S([nan_row], _values_ref, "max-nan", {"dim": 1, "largest": True}, **_NAN),
            S([np.asarray(1.5, F32)], _values_ref, "max-0d", {"dim": 0, "largest": True}),
            S([fortran(_distinct(4, 3))], _values_ref, "min-noncontig", {"dim": 1, "largest": False}),
        ], _torch_cummax("values")),
        OpInfo("cummax_indices", [
            S([_distinct(3, 5)], _indices_ref, "max-f32", {"dim": 1, "largest": True}, grad=False),
            S([_distinct(4, 3, dtype=F64)], _indices_ref, "min-f64", {"dim": 0, "largest": False}, grad=False),
            S([_RNG.integers(0, 3, (3, 6))], _indices_ref, "max-int64-ties", {"dim": 1, "largest": True}, grad=False),
            S([_RNG.integers(0, 3, (3, 6)).astype(F32)], _indices_ref, "min-f32-ties", {"dim": -1, "largest": False},
              grad=False),
            S([nan_row], _indices_ref, "max-nan", {"dim": 1, "largest": True}, **_NAN),
            S([np.asarray(1.5, F32)], _indices_ref, "max-0d", {"dim": 0, "largest": True}, grad=False),
            S([fortran(_distinct(4, 3))], _indices_ref, "min-noncontig", {"dim": 1, "largest": False}, grad=False),
        ], _torch_cummax("indices")),
    ]
