"""Pooling kernels: a loop over the kernel's offsets (never over pixels) combining strided
views with ``maximum``/``add``; adaptive average pooling as two small GEMMs."""
from __future__ import annotations

import numpy as np

from .conv import pad_spatial


def window_views(x, kernel, stride, dilation, out_hw):
    """Yield one strided view per kernel offset, each shaped like the output."""
    (kh, kw), (sh, sw), (dh, dw), (oh, ow) = kernel, stride, dilation, out_hw
    for i in range(kh):
        for j in range(kw):
            yield x[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]


def _max_pool2d(xp, spec):
    a = spec.attrs
    out_hw = spec.out_types[0].shape[2:]

    def run(x):
        xp_ = pad_spatial(xp, x, a["padding"], -np.inf)
        views = window_views(xp_, a["kernel_size"], a["stride"], a["dilation"], out_hw)
        out = next(views).copy()
        for v in views:
            xp.maximum(out, v, out=out)
        return out
    return run


def _avg_pool2d(xp, spec):
    a = spec.attrs
    out_hw = spec.out_types[0].shape[2:]
    kh, kw = a["kernel_size"]
    dtype = spec.out_types[0].dtype.numpy
    if a["count_include_pad"] or a["padding"] == (0, 0):
        divisor = dtype.type(kh * kw)
    else:  # count only real pixels: pool a padded map of ones once, here
        ones = xp.ones((1, 1) + spec.in_types[0].shape[2:], dtype=dtype)
        divisor = _window_sum(xp, pad_spatial(xp, ones, a["padding"]), a, out_hw)

    def run(x):
        out = _window_sum(xp, pad_spatial(xp, x, a["padding"]), a, out_hw)
        out /= divisor
        return out
    return run


def _window_sum(xp, x, a, out_hw):
    views = window_views(x, a["kernel_size"], a["stride"], (1, 1), out_hw)
    out = next(views).copy()
    for v in views:
        xp.add(out, v, out=out)
    return out


def adaptive_pool_matrix(size: int, out: int) -> np.ndarray:
    """Rows average PyTorch's adaptive bins: [floor(i*size/out), ceil((i+1)*size/out))."""
    m = np.zeros((out, size))
    for i in range(out):
        start, stop = (i * size) // out, -(-((i + 1) * size) // out)
        m[i, start:stop] = 1.0 / (stop - start)
    return m


def _adaptive_avg_pool2d(xp, spec):
    h, w = spec.in_types[0].shape[2:]
    oh, ow = spec.attrs["output_size"]
    dtype = spec.out_types[0].dtype.numpy
    ph = xp.asarray(adaptive_pool_matrix(h, oh).astype(dtype))
    pwt = xp.asarray(adaptive_pool_matrix(w, ow).T.astype(dtype))
    if oh == 1 and ow == 1:
        return lambda x: x.mean(axis=(2, 3), keepdims=True)
    return lambda x: xp.matmul(xp.matmul(ph, x), pwt)


def _max_pool2d_grad(xp, spec):
    """Each window's gradient goes to its first maximum (PyTorch's choice on ties)."""
    a = spec.attrs
    n, c, h, w = spec.in_types[1].shape
    ph, pw = a["padding"]
    out_hw = spec.in_types[0].shape[2:]
    dtype = spec.out_types[0].dtype.numpy

    def run(g, x, y):
        xp_ = pad_spatial(xp, x, a["padding"], -np.inf)
        gx = xp.zeros(xp_.shape, dtype=dtype)
        pending = xp.ones(y.shape, dtype=bool)
        views = zip(window_views(xp_, a["kernel_size"], a["stride"], a["dilation"], out_hw),
                    window_views(gx, a["kernel_size"], a["stride"], a["dilation"], out_hw))
        for xv, gv in views:
            hit = (xv == y) & pending
            gv += g * hit
            pending &= ~hit
        return gx[:, :, ph:ph + h, pw:pw + w]
    return run


def _avg_pool2d_grad(xp, spec):
    a = spec.attrs
    n, c, h, w = spec.out_types[0].shape
    ph, pw = a["padding"]
    out_hw = spec.in_types[0].shape[2:]
    dtype = spec.out_types[0].dtype.numpy
    kh, kw = a["kernel_size"]
    if a["count_include_pad"] or a["padding"] == (0, 0):
        divisor = dtype.type(kh * kw)
    else:
        ones = xp.ones((1, 1, h, w), dtype=dtype)
        divisor = _window_sum(xp, pad_spatial(xp, ones, a["padding"]), a, out_hw)

    def run(g):
        share = g / divisor
        gx = xp.zeros((n, c, h + 2 * ph, w + 2 * pw), dtype=dtype)
        for view in window_views(gx, a["kernel_size"], a["stride"], (1, 1), out_hw):
            view += share
        return gx[:, :, ph:ph + h, pw:pw + w]
    return run


def _adaptive_avg_pool2d_grad(xp, spec):
    h, w = spec.attrs["input_size"]
    oh, ow = spec.in_types[0].shape[2:]
    dtype = spec.out_types[0].dtype.numpy
    pht = xp.asarray(adaptive_pool_matrix(h, oh).T.astype(dtype))
    pw = xp.asarray(adaptive_pool_matrix(w, ow).astype(dtype))
    return lambda g: xp.matmul(xp.matmul(pht, g), pw)


KERNELS = {"max_pool2d": _max_pool2d, "avg_pool2d": _avg_pool2d, "adaptive_avg_pool2d": _adaptive_avg_pool2d,
           "max_pool2d_grad": _max_pool2d_grad, "avg_pool2d_grad": _avg_pool2d_grad,
           "adaptive_avg_pool2d_grad": _adaptive_avg_pool2d_grad}
