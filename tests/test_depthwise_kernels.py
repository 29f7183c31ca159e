"""The depthwise convolution kernel's strided path (executor/kernels/_depthwise.py: the padded
input split into stride x stride phase planes) against the plain formulation it replaces: one
strided window view per kernel offset, multiplied by the channel's weight and summed in the
same order, so the results must agree bit for bit; over odd sizes, strides 2 and 3, even
kernels and every padding."""
from __future__ import annotations

import numpy as np
import pytest

from graphc.executor.kernels import KernelSpec
from graphc.executor.kernels._windows import window_views
from graphc.executor.kernels.base import as_kernel
from graphc.executor.kernels.conv import conv2d_kernel
from graphc.ir.types import DType, TensorType


def _plain(x, w, b, stride, padding, out_hw):
    """Offset by offset over strided views of the padded input, as the kernel sums."""
    p = padding
    padded = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    k = w.shape[2]
    acc = None
    for view, weight in zip(window_views(padded, (k, k), (stride, stride), (1, 1), out_hw),
                            w.reshape(w.shape[0], -1).T):
        part = view * weight[:, None, None]
        acc = part if acc is None else acc + part
    return acc + b[:, None, None]


@pytest.mark.parametrize("n,c,h,w,k,stride,padding", [
    (2, 5, 9, 11, 4, 3, 2), (1, 3, 7, 6, 2, 2, 0), (3, 4, 10, 10, 5, 2, 2), (2, 6, 8, 9, 3, 3, 1),
    (1, 2, 5, 5, 5, 2, 2), (2, 8, 16, 15, 3, 2, 1)])
def test_strided_depthwise_is_the_plain_sum_bit_for_bit(n, c, h, w, k, stride, padding):
    rng = np.random.default_rng(h * w + k)
    oh, ow = (h + 2 * padding - k) // stride + 1, (w + 2 * padding - k) // stride + 1
    f = DType.float32
    spec = KernelSpec({"stride": [stride, stride], "padding": [padding, padding], "dilation": [1, 1], "groups": c},
                      (TensorType((n, c, h, w), f), TensorType((c, 1, k, k), f), TensorType((c,), f)),
                      (TensorType((n, c, oh, ow), f),))
    run = as_kernel(conv2d_kernel(np, spec))
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    weight = rng.standard_normal((c, 1, k, k)).astype(np.float32)
    bias = rng.standard_normal(c).astype(np.float32)
    for _ in range(2):  # twice: the phase planes are reused from one call to the next
        got = run(x, weight, bias)
        want = _plain(x, weight, bias, stride, padding, (oh, ow))
        assert got.shape == want.shape and np.array_equal(got.view(np.int32), want.view(np.int32))
        x = rng.standard_normal((n, c, h, w)).astype(np.float32)
