"""Op table entry of ir/ops/float_steps.py (``nextafter``): the reference steps through the
float's bits with numpy's integer views (not the ufunc the kernel calls); inputs from this
module's own seeded generator."""
from __future__ import annotations

import numpy as np

from op_table import F32, F64, OpInfo, S, fortran, torch_binary

_RNG = np.random.default_rng(3435)
_INT_OF = {np.dtype(np.float32): np.int32, np.dtype(np.float64): np.int64}


def _step(x, y):
    """One ulp from x toward y by its bit pattern; y where equal, NaN where either is."""
    x, y = np.broadcast_arrays(x, y)
    bits = x.copy().view(_INT_OF[x.dtype])
    tiny = np.array(1, _INT_OF[x.dtype]).view(x.dtype)  # the smallest subnormal
    away = (y > x) == (x > 0)  # moving away from zero adds one to the magnitude's bits
    out = np.where(away, bits + 1, bits - 1).view(x.dtype)
    out = np.where(x == 0, np.where(y > x, tiny, -tiny), out)
    out = np.where(x == y, y, out)
    return np.where(np.isnan(x) | np.isnan(y), np.nan, out).astype(x.dtype)


def _ref(ins, attrs):
    dt = np.result_type(*ins)
    return [_step(ins[0].astype(dt), ins[1].astype(dt))]


def float_steps_table():
    special = dict(grad=False, no_torch="zeros and ties: exact values whose recorded fingerprint would be all zeros")
    x = _RNG.standard_normal((3, 4)).astype(F32)
    return [OpInfo("nextafter", [
        S([x, _RNG.standard_normal((3, 4)).astype(F32)], _ref, "f32"),
        S([_RNG.standard_normal((2, 3)), _RNG.standard_normal((3,))], _ref, "broadcast-f64"),
        S([np.array([0.0, -0.0, 1.0, 2.5], F32), np.array([1.0, -1.0, 1.0, -3.0], F32)], _ref, "zero-and-equal-f32",
          **special),
        S([fortran(_RNG.standard_normal((4, 3)).astype(F64)), np.array(0.0, F64)], _ref, "toward-zero-noncontig"),
    ], torch_binary("nextafter"))]
