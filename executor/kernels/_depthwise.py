"""Depthwise convolution (groups == in channels == out channels) without GEMMs.

im2col + one GEMM per group is a Python loop over channels of tiny (1 x k) @ (k x L)
products. Here each kernel offset is one whole-array multiply-add: output += window * w[:, i, j]
with the per-channel weights as a (C, 1) column that numpy broadcasts along each row. At
stride 1 each window is a contiguous slice of the flattened padded image ("wide" rows of the
padded width; the extra columns are cropped or held at zero), so every pass runs over long
contiguous rows. Measured on 32x96x16x16, 3x3, stride 1 (ms, this machine, noisy): forward
8.2 -> 4.1, input gradient 35 -> 5.1, weight gradient 14.7 -> 2.0 (against im2col). The weights
were once expanded to full contiguous planes, as numpy 1.x vectorized stride-0 operands
poorly; with numpy 2.4 the columns are faster and the products bit-identical: ConvNeXt's 7x7
over 1x96x56x56, 11.8 -> 4.4 ms (PyTorch 0.4 ms).
"""
from __future__ import annotations

from . import _loops
from ._windows import Padder, window_views


def is_depthwise(geo) -> bool:
    return geo.groups > 1 and geo.groups == geo.c == geo.o


class _Flat:
    """The padded input (or input gradient) of a stride-1 depthwise conv, flattened per
    channel, and the slice each kernel offset reads."""

    def __init__(self, xp, geo):
        (ph, pw), (dh, dw) = geo.padding, geo.dilation
        self.hp, self.wp = geo.h + 2 * ph, geo.w + 2 * pw
        self.wide = geo.oh * self.wp  # output rows at the padded width
        slack = (geo.kw - 1) * dw  # the last offset's slice runs this far past the image
        self.buf = xp.zeros((geo.n, geo.c, self.hp * self.wp + slack), dtype=geo.dtype)
        self.image = self.buf[:, :, :self.hp * self.wp].reshape(geo.n, geo.c, self.hp, self.wp)
        self.inner = self.image[:, :, ph:ph + geo.h, pw:pw + geo.w]
        self.offsets = [i * dh * self.wp + j * dw for i in range(geo.kh) for j in range(geo.kw)]

    def window(self, k):
        return self.buf[:, :, self.offsets[k]:self.offsets[k] + self.wide]


class _Phases:
    """A strided (dilation 1) depthwise conv's padded input split into stride x stride phase
    planes (rows a, a + s, ... and columns b, b + s, ...), each flattened: the window of kernel
    offset (i, j) is then one contiguous slice of phase (i % s, j % s), at the phase's row
    width ("wide" rows, cropped at the end), as _Flat does at stride 1. Each pass then reads
    memory in order, not every s-th element: 3x3 stride 2 over 8x96x112x112, 69 -> 46 ms."""

    def __init__(self, xp, geo):
        (self.sh, self.sw), (ph, pw) = geo.stride, geo.padding
        self.pad = Padder(xp, (geo.n, geo.c, geo.h, geo.w), geo.padding, geo.dtype)
        hp, wp = geo.h + 2 * ph, geo.w + 2 * pw
        self.rows, self.cols = -(-hp // self.sh), -(-wp // self.sw)
        self.wide = geo.oh * self.cols
        slack = (geo.kw - 1) // self.sw  # the last row's window runs this far past its plane
        self.buf = xp.zeros((self.sh, self.sw, geo.n, geo.c, self.rows * self.cols + slack), dtype=geo.dtype)
        self.kernel = (geo.kh, geo.kw)

    def windows(self, x):
        padded = self.pad(x)
        for a in range(self.sh):
            for b in range(self.sw):
                part = padded[:, :, a::self.sh, b::self.sw]
                plane = self.buf[a, b, :, :, :self.rows * self.cols].reshape(part.shape[:2] + (self.rows, self.cols))
                plane[:, :, :part.shape[2], :part.shape[3]] = part
        kh, kw = self.kernel
        return [self.buf[i % self.sh, j % self.sw, :, :,
                         (i // self.sh) * self.cols + j // self.sw:][..., :self.wide]
                for i in range(kh) for j in range(kw)]


def _strided_windows(padded, geo):
    return list(window_views(padded, (geo.kh, geo.kw), geo.stride, geo.dilation, (geo.oh, geo.ow)))


class _Weights:
    """The weights as one (C, 1...) column per kernel offset, broadcast along each row."""

    def __init__(self, xp, geo, plane_shape):
        self.xp, self.geo = xp, geo
        self.planes = xp.empty((geo.kh * geo.kw, geo.c) + (1,) * len(plane_shape), dtype=geo.dtype)
        self.index = (slice(None), slice(None)) + (None,) * len(plane_shape)

    def load(self, w):
        self.xp.copyto(self.planes, w.reshape(self.geo.c, -1).T[self.index])
        return self.planes


def _stride_one(geo) -> bool:
    return tuple(geo.stride) == (1, 1)


def _compiled_form(xp, geo, run, looped):
    """``run``, or a Tiered of it and ``looped()`` (numba's loops, _depthwise_loops.py)."""
    size = geo.n * geo.c * max(geo.h * geo.w, geo.oh * geo.ow)
    return _loops.tiered(xp, [geo.dtype], size, run, looped)


def _geometry_loops(geo):
    from ._depthwise_loops import depthwise_loops
    return depthwise_loops(geo.kh, geo.kw, *geo.stride, *geo.dilation)


def _looped_forward(xp, geo, has_bias, forward):
    pad = Padder(xp, (geo.n, geo.c, geo.h, geo.w), geo.padding, geo.dtype)
    bias = (geo.c, 1, 1)

    def run(x, w, b=None, out=None):
        if out is None:
            out = xp.empty((geo.n, geo.c, geo.oh, geo.ow), dtype=geo.dtype)
        forward(pad(x), w, out)
        if has_bias:
            xp.add(out, b.reshape(bias), out=out)
        return out
    return run


def depthwise_forward(xp, geo, has_bias):
    return _compiled_form(xp, geo, _numpy_forward(xp, geo, has_bias), lambda: _looped_forward(xp, geo, has_bias, _geometry_loops(geo)[0]))


def _numpy_forward(xp, geo, has_bias):
    flat = _Flat(xp, geo) if _stride_one(geo) else None
    phases = _Phases(xp, geo) if flat is None and tuple(geo.dilation) == (1, 1) else None
    if flat is not None:
        acc_shape, plane_shape = (geo.n, geo.c, flat.wide), (flat.wide,)
    elif phases is not None:
        acc_shape, plane_shape = (geo.n, geo.c, phases.wide), (phases.wide,)
    else:
        pad = Padder(xp, (geo.n, geo.c, geo.h, geo.w), geo.padding, geo.dtype)
        acc_shape, plane_shape = (geo.n, geo.c, geo.oh, geo.ow), (geo.oh, geo.ow)
    weights = _Weights(xp, geo, plane_shape)
    acc, part = xp.empty(acc_shape, dtype=geo.dtype), xp.empty(acc_shape, dtype=geo.dtype)

    def run(x, w, b=None, out=None):
        if flat is not None:
            xp.copyto(flat.inner, x)
            windows = [flat.window(k) for k in range(len(flat.offsets))]
        elif phases is not None:
            windows = phases.windows(x)
        else:
            windows = _strided_windows(pad(x), geo)
        planes = weights.load(w)
        xp.multiply(windows[0], planes[0], out=acc)
        for window, plane in zip(windows[1:], planes[1:]):
            xp.add(acc, xp.multiply(window, plane, out=part), out=acc)
        if has_bias:
            xp.add(acc, b.reshape((geo.c,) + (1,) * len(plane_shape)), out=acc)
        if flat is not None:
            result = acc.reshape(geo.n, geo.c, geo.oh, flat.wp)[:, :, :, :geo.ow]
        elif phases is not None:
            result = acc.reshape(geo.n, geo.c, geo.oh, phases.cols)[:, :, :, :geo.ow]
        else:
            result = acc
        if out is None:
            out = xp.empty((geo.n, geo.c, geo.oh, geo.ow), dtype=geo.dtype)
        xp.copyto(out, result)
        return out
    return run


def _wide_cotangent(xp, geo, flat):
    """The cotangent at the padded row width, zero in the extra columns (written once): where
    each step's cotangent goes, and the same memory as (N, C, wide) rows."""
    wide = xp.zeros((geo.n, geo.c, geo.oh, flat.wp), dtype=geo.dtype)
    return wide[:, :, :, :geo.ow], wide.reshape(geo.n, geo.c, flat.wide)


def _looped_grad_input(xp, geo, grad_input):
    (ph, pw) = geo.padding
    acc = xp.zeros((geo.n, geo.c, geo.h + 2 * ph, geo.w + 2 * pw), dtype=geo.dtype)

    def run(g, w, out=None):
        acc.fill(0)
        grad_input(g, w, acc)
        inner = acc[:, :, ph:ph + geo.h, pw:pw + geo.w]
        if out is None:
            return xp.ascontiguousarray(inner)
        xp.copyto(out, inner)
        return out
    return run


def depthwise_grad_input(xp, geo):
    """Each offset adds cotangent x weight into its window of a padded accumulator."""
    return _compiled_form(xp, geo, _numpy_grad_input(xp, geo), lambda: _looped_grad_input(xp, geo, _geometry_loops(geo)[2]))


def _numpy_grad_input(xp, geo):
    if _stride_one(geo):
        flat = _Flat(xp, geo)
        g_inner, g_rows = _wide_cotangent(xp, geo, flat)
        weights = _Weights(xp, geo, (flat.wide,))
        part = xp.empty(g_rows.shape, dtype=geo.dtype)

        def accumulate(g, planes):
            xp.copyto(g_inner, g)
            flat.buf.fill(0)
            for k, plane in enumerate(planes):
                flat.window(k)[...] += xp.multiply(g_rows, plane, out=part)
            return flat.inner
    else:
        (ph, pw) = geo.padding
        acc = xp.zeros((geo.n, geo.c, geo.h + 2 * ph, geo.w + 2 * pw), dtype=geo.dtype)
        weights = _Weights(xp, geo, (geo.oh, geo.ow))
        part = xp.empty((geo.n, geo.c, geo.oh, geo.ow), dtype=geo.dtype)

        def accumulate(g, planes):
            acc.fill(0)
            for window, plane in zip(_strided_windows(acc, geo), planes):
                window += xp.multiply(g, plane, out=part)
            return acc[:, :, ph:ph + geo.h, pw:pw + geo.w]

    def run(g, w, out=None):
        inner = accumulate(g, weights.load(w))
        if out is None:
            return xp.ascontiguousarray(inner)
        xp.copyto(out, inner)
        return out
    return run


def _looped_grad_weight(xp, geo, grad_weight):
    pad = Padder(xp, (geo.n, geo.c, geo.h, geo.w), geo.padding, geo.dtype)

    def run(g, x, out=None):
        if out is None:
            out = xp.empty((geo.c, 1, geo.kh, geo.kw), dtype=geo.dtype)
        grad_weight(g, pad(x), out)
        return out
    return run


def depthwise_grad_weight(xp, geo):
    """dw[c, i, j] = sum over images and pixels of cotangent x window (i, j): one einsum each."""
    return _compiled_form(xp, geo, _numpy_grad_weight(xp, geo), lambda: _looped_grad_weight(xp, geo, _geometry_loops(geo)[1]))


def _numpy_grad_weight(xp, geo):
    if _stride_one(geo):
        flat = _Flat(xp, geo)
        g_inner, g_rows = _wide_cotangent(xp, geo, flat)

        def sums(g, x):
            xp.copyto(g_inner, g)
            xp.copyto(flat.inner, x)
            return [xp.einsum("ncl,ncl->c", g_rows, flat.window(k)) for k in range(len(flat.offsets))]
    else:
        pad = Padder(xp, (geo.n, geo.c, geo.h, geo.w), geo.padding, geo.dtype)

        def sums(g, x):
            return [xp.einsum("nchw,nchw->c", g, window) for window in _strided_windows(pad(x), geo)]

    def run(g, x, out=None):
        if out is None:
            out = xp.empty((geo.c, 1, geo.kh, geo.kw), dtype=geo.dtype)
        flat_out = out.reshape(geo.c, geo.kh * geo.kw)
        for k, column in enumerate(sums(g, x)):
            flat_out[:, k] = column
        return out
    return run
