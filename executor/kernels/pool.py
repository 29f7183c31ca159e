"""Pooling kernels: a loop over the kernel's offsets (never over pixels) combining strided
views with ``maximum``/``add`` into the output; adaptive average pooling as two GEMMs. ceil_mode
pads the bottom/right further (with -inf for max, never counted for average). The index-based
ops (return_indices, adaptive max, max unpooling) are in _pool_index.py."""
from __future__ import annotations

import math

import numpy as np

from . import _loops
from .base import writes_out
from ._windows import window_views
from ._pool_index import INDEX_KERNELS, AsymPadder, pool_geometry


def _empty(xp, spec, out, index=0):
    t = spec.out_types[index]
    return xp.empty(t.shape, dtype=t.dtype.numpy) if out is None else out


def _compiled_form(xp, spec, run, looped):
    """``run``, or a Tiered of it and numba's loop (_pool_loops.py) where a compiled form pays."""
    size = max(math.prod(t.shape) for t in spec.in_types)
    return _loops.tiered(xp, [t.dtype.numpy for t in spec.in_types], size, run, looped)


def _max_pool2d(xp, spec):
    a = spec.attrs
    out_hw = spec.out_types[0].shape[2:]
    in_shape = spec.in_types[0].shape
    pad = AsymPadder(xp, in_shape, pool_geometry(a, in_shape[2:], out_hw), spec.in_types[0].dtype.numpy,
                     fill=-np.inf)

    def run(x, out=None):
        out = _empty(xp, spec, out)
        views = window_views(pad(x), a["kernel_size"], a["stride"], a["dilation"], out_hw)
        xp.copyto(out, next(views))
        for v in views:
            xp.maximum(out, v, out=out)
        return out

    def looped():
        from ._pool_loops import max_pool_loop
        loop = max_pool_loop(*a["kernel_size"], *a["stride"], *a["dilation"])

        def run_loop(x, out=None):
            out = _empty(xp, spec, out)
            loop(pad(x), out)
            return out
        return run_loop
    return writes_out(_compiled_form(xp, spec, run, looped))


def _avg_divisor(xp, spec, in_shape, out_hw):
    """What each window's sum is divided by, as PyTorch: ``divisor_override``; else the window's
    cells inside the padded input (count_include_pad) or inside the input itself."""
    a = spec.attrs
    kh, kw = a["kernel_size"]
    dtype = spec.out_types[0].dtype.numpy
    if a.get("divisor_override") is not None:
        return dtype.type(a["divisor_override"])
    pads = pool_geometry(a, in_shape[2:], out_hw)
    symmetric = all(lo == hi for lo, hi in pads)
    if symmetric and (a["count_include_pad"] or a["padding"] == (0, 0)):
        return dtype.type(kh * kw)
    counted = np.zeros((1, 1) + tuple(lo + size + hi for size, (lo, hi) in zip(in_shape[2:], pads)), dtype)
    (ph, pw), (h, w) = a["padding"], in_shape[2:]
    if a["count_include_pad"]:
        counted[:, :, :h + 2 * ph, :w + 2 * pw] = 1
    else:
        counted[:, :, ph:ph + h, pw:pw + w] = 1
    ones = xp.asarray(counted)
    divisor = xp.zeros((1, 1) + tuple(out_hw), dtype=dtype)
    for v in window_views(ones, a["kernel_size"], a["stride"], (1, 1), out_hw):
        divisor += v
    return divisor


def _avg_pool2d(xp, spec):
    a = spec.attrs
    out_hw = spec.out_types[0].shape[2:]
    in_shape = spec.in_types[0].shape
    pad = AsymPadder(xp, in_shape, pool_geometry(a, in_shape[2:], out_hw), spec.in_types[0].dtype.numpy)
    divisor = _avg_divisor(xp, spec, in_shape, out_hw)

    def run(x, out=None):
        out = _empty(xp, spec, out)
        views = window_views(pad(x), a["kernel_size"], a["stride"], (1, 1), out_hw)
        xp.copyto(out, next(views))
        for v in views:
            out += v
        out /= divisor
        return out
    return writes_out(run)


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
    if oh == 1 and ow == 1:
        return writes_out(lambda x, out=None: x.mean(axis=(2, 3), keepdims=True, out=out))
    ph = xp.asarray(adaptive_pool_matrix(h, oh).astype(dtype))
    pwt = xp.asarray(adaptive_pool_matrix(w, ow).T.astype(dtype))
    return writes_out(lambda x, out=None: xp.matmul(xp.matmul(ph, x), pwt, out=out))


class _GradAccumulator:
    """Where a pooling backward adds each window's share: the output itself when there is no
    padding, else a padded scratch buffer cropped into the output at the end."""

    def __init__(self, xp, spec, out_hw):
        self.xp = xp
        self.shape = spec.out_types[0].shape
        self.dtype = spec.out_types[0].dtype.numpy
        (self.ph, bottom), (self.pw, right) = pool_geometry(spec.attrs, self.shape[2:], out_hw)
        n, c, h, w = self.shape
        padded = (n, c, h + self.ph + bottom, w + self.pw + right)
        self.scratch = xp.zeros(padded, dtype=self.dtype) if (self.ph or self.pw or bottom or right) else None

    def begin(self, out):
        gx = self.scratch if self.scratch is not None else (
            out if out is not None else self.xp.empty(self.shape, dtype=self.dtype))
        gx.fill(0)
        return gx

    def finish(self, gx, out):
        if self.scratch is None:
            return gx
        h, w = self.shape[2:]
        inner = gx[:, :, self.ph:self.ph + h, self.pw:self.pw + w]
        if out is None:
            return inner.copy()
        self.xp.copyto(out, inner)
        return out


def _tiles_input(a) -> bool:
    """Windows that tile the input (kernel == stride, no padding or dilation): every input
    pixel is in at most one window, so each window's share can be written, not added."""
    return (tuple(a["kernel_size"]) == tuple(a["stride"]) and tuple(a["padding"]) == (0, 0)
            and tuple(a["dilation"]) == (1, 1) and not a.get("ceil_mode"))


def _max_pool2d_grad(xp, spec):
    """Each window's gradient goes to its first maximum (PyTorch's choice on ties, e.g. the
    zeros a ReLU leaves): offsets are visited in order and a window stops once it has hit."""
    a = spec.attrs
    out_hw = spec.in_types[0].shape[2:]
    dtype = spec.out_types[0].dtype.numpy
    pads = pool_geometry(a, spec.in_types[1].shape[2:], out_hw)
    pad = AsymPadder(xp, spec.in_types[1].shape, pads, dtype, fill=-np.inf)
    acc = _GradAccumulator(xp, spec, out_hw)
    pending = xp.empty(spec.in_types[0].shape, dtype=bool)
    hit = xp.empty(spec.in_types[0].shape, dtype=bool)
    share = xp.empty(spec.in_types[0].shape, dtype=dtype)
    tiles = _tiles_input(a)

    def run(g, x, y, out=None):
        gx = acc.begin(out)  # zeroed: pixels outside every window (a ragged edge) get 0
        pending.fill(True)
        views = zip(window_views(pad(x), a["kernel_size"], a["stride"], a["dilation"], out_hw),
                    window_views(gx, a["kernel_size"], a["stride"], a["dilation"], out_hw))
        for xv, gv in views:
            xp.equal(xv, y, out=hit)
            xp.logical_and(hit, pending, out=hit)
            if tiles:  # gv is this window's own slot: write the share straight into it
                xp.multiply(g, hit, out=gv)
            else:
                gv += xp.multiply(g, hit, out=share)
            xp.logical_xor(pending, hit, out=pending)  # hit implies pending: clears the winners
        return acc.finish(gx, out)

    def looped():
        from ._pool_loops import max_pool_grad_loop
        loop = max_pool_grad_loop(*a["kernel_size"], *a["stride"], *a["dilation"], tiles)
        first = xp.empty(spec.in_types[0].shape, dtype=np.int32)

        def run_loop(g, x, y, out=None):
            gx = acc.begin(out)
            loop(g, pad(x), y, gx, first)
            return acc.finish(gx, out)
        return run_loop
    return writes_out(_compiled_form(xp, spec, run, looped))


def _avg_pool2d_grad(xp, spec):
    a = spec.attrs
    out_hw = spec.in_types[0].shape[2:]
    divisor = _avg_divisor(xp, spec, spec.out_types[0].shape, out_hw)
    acc = _GradAccumulator(xp, spec, out_hw)
    share = xp.empty(spec.in_types[0].shape, dtype=spec.out_types[0].dtype.numpy)

    def run(g, out=None):
        xp.divide(g, divisor, out=share)
        gx = acc.begin(out)
        for view in window_views(gx, a["kernel_size"], a["stride"], (1, 1), out_hw):
            view += share
        return acc.finish(gx, out)
    return writes_out(run)


def _adaptive_avg_pool2d_grad(xp, spec):
    h, w = spec.out_types[0].shape[2:]  # (the attr may name symbolic dims; the bound type has sizes)
    oh, ow = spec.in_types[0].shape[2:]
    dtype = spec.out_types[0].dtype.numpy
    pht = xp.asarray(adaptive_pool_matrix(h, oh).T.astype(dtype))
    pw = xp.asarray(adaptive_pool_matrix(w, ow).astype(dtype))
    return writes_out(lambda g, out=None: xp.matmul(xp.matmul(pht, g), pw, out=out))


KERNELS = {"max_pool2d": _max_pool2d, "avg_pool2d": _avg_pool2d, "adaptive_avg_pool2d": _adaptive_avg_pool2d,
           "max_pool2d_grad": _max_pool2d_grad, "avg_pool2d_grad": _avg_pool2d_grad,
           "adaptive_avg_pool2d_grad": _adaptive_avg_pool2d_grad, **INDEX_KERNELS}
