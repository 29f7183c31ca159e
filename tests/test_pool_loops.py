"""Max pooling's numba loops (executor/kernels/_pool_loops.py) against the numpy form, bit for bit.

The cases cover tiling windows (2x2 stride 2: shares written), overlapping ones (3x3 stride 2
padded: shares added), dilation, ceil_mode's ragged edge, ties (the zeros a ReLU leaves: the
first maximum takes the gradient), NaN windows, and negative cotangents (-0.0 shares).
"""
from __future__ import annotations

import numpy as np
import pytest

from graphc import ir
from graphc.executor.kernels import KernelSpec, TABLE, _loops

pytest.importorskip("numba")  # the fast extra; `make test` installs it

CASES = [dict(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0)),
         dict(kernel_size=(3, 3), stride=(2, 2), padding=(1, 1)),
         dict(kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), dilation=(2, 2)),
         dict(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0), ceil_mode=True),
         dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 0))]


def _batch(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    x = np.maximum(rng.standard_normal(shape), 0).astype(dtype)  # many ties at zero
    x[0, 0, :3, :3] = np.nan
    x[0, 1, 4:6, 4:6] = 2.0
    return x


def _kernels(op, attrs, in_types, out_type, monkeypatch, looped):
    attrs = ir.registry.get_op(op).normalize_attrs(attrs)
    spec = KernelSpec(attrs, tuple(in_types), (out_type,))
    with monkeypatch.context() as m:
        if not looped:
            m.setattr(_loops, "available", lambda: False)
        return TABLE[op](np, spec)


@pytest.mark.parametrize("attrs,dtype", [(a, np.float32) for a in CASES] + [(CASES[1], np.float64)],
                         ids=lambda a: "-".join(f"{k}{v}" for k, v in sorted(a.items())) if isinstance(a, dict) else None)
def test_looped_max_pool_and_gradient_match_numpy_bit_for_bit(attrs, dtype, monkeypatch):
    x = _batch((8, 32, 15, 17), dtype, 0)  # 65280 elements: above COMPILE_MIN, so the loop runs
    assert x.size >= _loops.COMPILE_MIN
    x_t = ir.TensorType(x.shape, ir.DType.from_any(x.dtype))
    y_t = ir.registry.infer_types(ir.registry.get_op("max_pool2d"), [x_t],
                         ir.registry.get_op("max_pool2d").normalize_attrs(attrs))[0]
    results = {}
    for looped in (False, True):
        forward = _kernels("max_pool2d", attrs, [x_t], y_t, monkeypatch, looped)
        backward = _kernels("max_pool2d_grad", attrs, [y_t, x_t, y_t], x_t, monkeypatch, looped)
        for _ in range(_loops.WARM_CALLS):  # the loops take over on this call
            y = np.array(forward(x))
            g = np.random.default_rng(1).standard_normal(y.shape).astype(dtype)  # negative ones too
            results[looped] = (y, np.array(backward(g, x, y)))
    assert isinstance(forward.run, _loops.Tiered) and forward.run.make_fast is None  # the loop ran
    for plain, looped in zip(results[False], results[True]):
        np.testing.assert_array_equal(looped.view(np.uint8), plain.view(np.uint8))
