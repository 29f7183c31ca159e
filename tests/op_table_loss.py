"""The op table's loss primitives (ir/ops/loss.py): one ``OpInfo`` entry per op (see op_table.py).
Import ``OP_INFO`` from ``op_table``, which builds the whole table; this module takes its helpers
from there."""
from __future__ import annotations

import numpy as np

from op_table import F64, TF, OpInfo, S, fortran, uniform


def _bce_ref(ins, attrs):
    """PyTorch's definition in float64: each log clamped to >= -100, so p = 0 or 1 is finite."""
    p, y = (a.astype(F64) for a in ins)
    with np.errstate(divide="ignore"):
        loss = -(y * np.maximum(np.log(p), -100.0) + (1.0 - y) * np.maximum(np.log1p(-p), -100.0))
    return [loss.astype(ins[0].dtype)]


def _torch_bce(ts, a):
    return TF().binary_cross_entropy(ts[0], ts[1], reduction="none")


def _bce_inputs(*shape, dtype=np.float32, hard=False):
    p, y = uniform(0.05, 0.95, *shape, dtype=dtype), uniform(0.0, 1.0, *shape, dtype=dtype)
    return [p, np.round(y) if hard else y]


def loss_table():
    bce = _bce_ref
    saturated = [np.array([0.0, 1.0, 0.0, 1.0, 0.5, 1e-30], np.float32),
                 np.array([0.0, 1.0, 1.0, 0.0, 0.3, 1.0], np.float32)]
    return [OpInfo("binary_cross_entropy", torch=_torch_bce, samples=[
        S(_bce_inputs(3, 4), bce, "soft-labels"),
        S(_bce_inputs(2, 5, hard=True), bce, "hard-labels"),
        S(_bce_inputs(2, 3, dtype=F64), bce, "f64"),
        S([fortran(a) for a in _bce_inputs(4, 3)], bce, "noncontig"),
        S(_bce_inputs(1, 4), bce, "batch1"),
        S([np.array(0.25, np.float32), np.array(0.75, np.float32)], bce, "0d"),
        # the -100 clamp; finite differences would step outside [0, 1] (tests/test_losses_torch.py
        # checks these gradients against PyTorch's)
        S(saturated, bce, "saturated", grad=False, dynamic=False),
    ])]
