"""Depthwise convolution's numba loops (executor/kernels/_depthwise_loops.py) against the numpy
form (_depthwise.py without numba), forward and both gradients.

The loops add the same products in another order (row by row, not offset by offset over the
whole batch), so the two agree to float32 rounding: the forward and the input gradient sum at
most kh*kw products per value (checked to 4 float32 ulps of the largest output), the weight
gradient sums N*OH*OW of them (to 1e-5 of the largest weight gradient, float32's precision times
a few hundred partial sums' growth)."""
from __future__ import annotations

import numpy as np
import pytest

from graphc import ir
from graphc.executor.kernels import KernelSpec, TABLE, _loops
from graphc.ir.types import DType, TensorType

pytest.importorskip("numba")  # the fast extra; `make test` installs it

# (kernel, stride, padding, dilation, dtype): each geometry compiles its own loops (~1 s each)
GEOMETRIES = [(3, 1, 1, 1, np.float32), (3, 2, 1, 1, np.float32), (5, 1, 2, 1, np.float32),
              (3, 1, 2, 2, np.float32), (4, 2, 1, 1, np.float32), (3, 2, 0, 1, np.float32),
              (3, 1, 1, 1, np.float64), (3, 2, 1, 1, np.float64)]


def _kernels(op, attrs, in_types, out_type, monkeypatch, looped):
    spec = KernelSpec(attrs, tuple(in_types), (out_type,))
    with monkeypatch.context() as m:
        if not looped:
            m.setattr(_loops, "available", lambda: False)
        return TABLE[op](np, spec)


@pytest.mark.parametrize("k,stride,padding,dilation,dtype", GEOMETRIES)
def test_looped_depthwise_matches_the_numpy_form(k, stride, padding, dilation, dtype, monkeypatch):
    n, c, h, w = 4, 48, 19, 18  # 65664 values: above COMPILE_MIN, so the loops run
    rng = np.random.default_rng(k * 10 + stride)
    attrs = ir.registry.get_op("conv2d").normalize_attrs(
        {"stride": (stride, stride), "padding": (padding, padding), "dilation": (dilation, dilation), "groups": c})
    f = DType.from_any(np.dtype(dtype))
    x_t, w_t, b_t = TensorType((n, c, h, w), f), TensorType((c, 1, k, k), f), TensorType((c,), f)
    y_t = ir.registry.infer_types(ir.registry.get_op("conv2d"), [x_t, w_t, b_t], attrs)[0]
    assert n * c * h * w >= _loops.COMPILE_MIN
    x = rng.standard_normal(x_t.shape).astype(dtype)
    weight = rng.standard_normal(w_t.shape).astype(dtype)
    bias = rng.standard_normal(c).astype(dtype)
    g = rng.standard_normal(y_t.shape).astype(dtype)
    results = {}
    for looped in (False, True):
        forward = _kernels("conv2d", attrs, [x_t, w_t, b_t], y_t, monkeypatch, looped)
        grad_input = _kernels("conv2d_grad_input", attrs, [y_t, w_t], x_t, monkeypatch, looped)
        grad_weight = _kernels("conv2d_grad_weight", attrs, [y_t, x_t], w_t, monkeypatch, looped)
        for _ in range(_loops.WARM_CALLS):  # the loops take over on this call
            results[looped] = [np.array(forward(x, weight, bias)), np.array(grad_input(g, weight)),
                               np.array(grad_weight(g, x))]
        results[looped].append(np.array(forward(x * 2, weight, bias)))  # buffers reused on a later call
    assert isinstance(forward.run, _loops.Tiered) and forward.run.make_fast is None  # the loop ran
    eps = np.finfo(dtype).eps
    for index, (plain, looped) in enumerate(zip(results[False], results[True])):
        assert plain.shape == looped.shape
        scale = np.abs(plain).max()
        tolerance = 1e-5 * scale if (index == 2 and dtype == np.float32) else (
            4 * eps * scale if index != 2 else 1e-12 * scale)
        np.testing.assert_allclose(looped, plain, rtol=0, atol=tolerance, err_msg=["forward", "grad_input",
                                                                                   "grad_weight", "again"][index])
