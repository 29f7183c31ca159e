"""Convolution kernels: conv2d with its two gradients (GEMMs over im2col columns).

Convolution is im2col through stride tricks plus GEMM, never a loop over pixels. Each
kernel keeps its padded-input and column workspaces from one step to the next, so a step
does not allocate them again; outputs go straight into the planner's buffers.
"""
from __future__ import annotations

from ._channels import ChannelPlanes
from ._depthwise import depthwise_forward, depthwise_grad_input, depthwise_grad_weight, is_depthwise
from ._windows import Padder, im2col
from .base import writes_out


class _ConvGeometry:
    def __init__(self, spec, x_type, w_type, y_type):
        self.n, self.c, self.h, self.w = x_type.shape
        self.o, self.cg, self.kh, self.kw = w_type.shape
        self.oh, self.ow = y_type.shape[2:]
        self.groups = spec.attrs["groups"]
        self.stride, self.padding, self.dilation = spec.attrs["stride"], spec.attrs["padding"], spec.attrs["dilation"]
        self.k = self.cg * self.kh * self.kw
        self.l = self.oh * self.ow
        self.dtype = y_type.dtype.numpy

    def pointwise(self) -> bool:
        """A 1x1, stride-1, unpadded, ungrouped conv: the input already is the GEMM operand."""
        return (self.kh, self.kw, self.groups) == (1, 1, 1) and tuple(self.stride) == (1, 1) and not any(self.padding)

    def windows(self, xp, padded):
        return im2col(xp, padded, (self.kh, self.kw), self.stride, self.dilation, (self.oh, self.ow))


def conv2d_kernel(xp, spec):
    geo = _ConvGeometry(spec, spec.in_types[0], spec.in_types[1], spec.out_types[0])
    n, o, g, k, l = geo.n, geo.o, geo.groups, geo.k, geo.l
    has_bias = len(spec.in_types) == 3
    if is_depthwise(geo):
        return writes_out(depthwise_forward(xp, geo, has_bias))
    pad = Padder(xp, spec.in_types[0].shape, geo.padding, geo.dtype)
    bias = ChannelPlanes(xp, spec.out_types[0].shape, geo.dtype, 1) if has_bias else None
    pointwise = geo.pointwise()
    cols = None if pointwise else xp.empty((n, g, k, l), dtype=geo.dtype)  # one GEMM operand per (image, group)

    def run(x, w, b=None, out=None):
        if pointwise:
            columns = x.reshape(n, g, k, l)
        else:
            columns = cols
            xp.copyto(cols.reshape(n, geo.c, geo.kh, geo.kw, geo.oh, geo.ow), geo.windows(xp, pad(x)))
        if out is None:
            out = xp.empty((n, o, geo.oh, geo.ow), dtype=geo.dtype)
        # one (O/g x K) @ (K x L) GEMM per image and group; 2-D weights keep numpy on BLAS
        wg, og = w.reshape(g, o // g, k), out.reshape(n, g, o // g, l)
        for gi in range(g):
            xp.matmul(wg[gi], columns[:, gi], out=og[:, gi])
        if has_bias:
            out3 = bias.rows(out)
            out3 += bias.plane(0, b)
        return out
    return writes_out(run)


def conv2d_grad_input_kernel(xp, spec):
    """Per kernel offset: one GEMM into a reused buffer, then a slice-add into a padded,
    channel-first accumulator (same axis order as the GEMM result: contiguous rows)."""
    geo = _ConvGeometry(spec, spec.out_types[0], spec.in_types[1], spec.in_types[0])
    if is_depthwise(geo):
        return writes_out(depthwise_grad_input(xp, geo))
    if geo.pointwise():  # dx_n = W^T g_n: one GEMM per image straight into the output
        w_t = xp.empty((geo.c, geo.o), dtype=geo.dtype)

        def pointwise_run(grad, weight, out=None):
            xp.copyto(w_t, weight.reshape(geo.o, geo.c).T)
            out = xp.empty((geo.n, geo.c, geo.h, geo.w), dtype=geo.dtype) if out is None else out
            xp.matmul(w_t, grad.reshape(geo.n, geo.o, geo.l), out=out.reshape(geo.n, geo.c, geo.l))
            return out
        return writes_out(pointwise_run)
    n, c, o, g, l, cg = geo.n, geo.c, geo.o, geo.groups, geo.l, geo.cg
    (sh, sw), (ph, pw), (dh, dw) = geo.stride, geo.padding, geo.dilation
    oh, ow, kh, kw = geo.oh, geo.ow, geo.kh, geo.kw
    acc = xp.zeros((g, cg, n, geo.h + 2 * ph, geo.w + 2 * pw), dtype=geo.dtype)
    g_t = xp.empty((g, o // g, n * l), dtype=geo.dtype)  # the cotangent with images next to pixels
    w_t = xp.empty((kh, kw, g, cg, o // g), dtype=geo.dtype)  # contiguous (cg x og) blocks keep BLAS
    part = xp.empty((g, cg, n * l), dtype=geo.dtype)
    part_view = part.reshape(g, cg, n, oh, ow)

    def run(grad, weight, out=None):
        xp.copyto(g_t.reshape(g, o // g, n, l), grad.reshape(n, g, o // g, l).transpose(1, 2, 0, 3))
        xp.copyto(w_t, weight.reshape(g, o // g, cg, kh, kw).transpose(3, 4, 0, 2, 1))
        acc.fill(0)
        for i in range(kh):
            for j in range(kw):
                for gi in range(g):
                    xp.matmul(w_t[i, j, gi], g_t[gi], out=part[gi])
                acc[:, :, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw] += part_view
        inner = acc[:, :, :, ph:ph + geo.h, pw:pw + geo.w].reshape(c, n, geo.h, geo.w).transpose(1, 0, 2, 3)
        if out is None:
            return xp.ascontiguousarray(inner)
        xp.copyto(out, inner)
        return out
    return writes_out(run)


def conv2d_grad_weight_kernel(xp, spec):
    """One GEMM per group over all images and pixels: g (O, N*L) @ cols (K, N*L)^T."""
    geo = _ConvGeometry(spec, spec.in_types[1], spec.out_types[0], spec.in_types[0])
    if is_depthwise(geo):
        return writes_out(depthwise_grad_weight(xp, geo))
    n, o, g, k, l = geo.n, geo.o, geo.groups, geo.k, geo.l
    pad = Padder(xp, spec.in_types[1].shape, geo.padding, geo.dtype)
    cols = xp.empty((g, k, n, l), dtype=geo.dtype)
    cols_view = cols.reshape(g, geo.cg, geo.kh, geo.kw, n, geo.oh, geo.ow)
    g_t = xp.empty((g, o // g, n, l), dtype=geo.dtype)

    def run(grad, x, out=None):
        windows = geo.windows(xp, pad(x)).reshape(n, g, geo.cg, geo.kh, geo.kw, geo.oh, geo.ow)
        xp.copyto(cols_view, windows.transpose(1, 2, 3, 4, 0, 5, 6))
        xp.copyto(g_t, grad.reshape(n, g, o // g, l).transpose(1, 2, 0, 3))
        if out is None:
            out = xp.empty(spec.out_types[0].shape, dtype=geo.dtype)
        xp.matmul(g_t.reshape(g, o // g, n * l), cols.reshape(g, k, n * l).transpose(0, 2, 1),
                  out=out.reshape(g, o // g, k))
        return out
    return writes_out(run)


KERNELS = {"conv2d": conv2d_kernel, "conv2d_grad_input": conv2d_grad_input_kernel, "conv2d_grad_weight": conv2d_grad_weight_kernel}
