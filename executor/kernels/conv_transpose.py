"""Transposed convolution, im2col and col2im kernels.

conv_transpose2d(x, w) is conv2d's input gradient with x as the cotangent: the kernel is
conv2d_grad_input's (one GEMM per kernel offset and group into a reused buffer, then a
strided slice-add into a padded accumulator: GEMM + col2im, no loop over pixels), plus the
bias. im2col copies the strided window view; col2im adds each kernel offset's plane of
columns into its strided window of a padded accumulator (kH * kW slice-adds).
"""
from __future__ import annotations

from ._windows import Padder, im2col
from .base import as_kernel, writes_out
from .conv import conv2d_grad_input_kernel


def conv_transpose2d_kernel(xp, spec):
    conv_spec = spec._replace(attrs={k: spec.attrs[k] for k in ("stride", "padding", "dilation", "groups")},
                              in_types=spec.in_types[:2])
    grad_input = as_kernel(conv2d_grad_input_kernel(xp, conv_spec))
    has_bias = len(spec.in_types) == 3
    o = spec.out_types[0].shape[1]

    def run(x, w, b=None, out=None):
        out = grad_input(x, w, out=out)
        if has_bias:
            out += b.reshape(1, o, 1, 1)
        return out
    return writes_out(run)


class _Blocks:
    def __init__(self, attrs, image_shape, dtype):
        self.n, self.c, self.h, self.w = image_shape
        self.kh, self.kw = attrs["kernel_size"]
        self.stride, self.padding, self.dilation = attrs["stride"], attrs["padding"], attrs["dilation"]
        (ph, pw), (sh, sw), (dh, dw) = self.padding, self.stride, self.dilation
        self.oh = (self.h + 2 * ph - dh * (self.kh - 1) - 1) // sh + 1
        self.ow = (self.w + 2 * pw - dw * (self.kw - 1) - 1) // sw + 1
        self.dtype = dtype

    def col_shape(self):
        return (self.n, self.c, self.kh, self.kw, self.oh, self.ow)


def im2col_kernel(xp, spec):
    geo = _Blocks(spec.attrs, spec.in_types[0].shape, spec.in_types[0].dtype.numpy)
    pad = Padder(xp, spec.in_types[0].shape, geo.padding, geo.dtype)

    def run(x, out=None):
        if out is None:
            out = xp.empty(spec.out_types[0].shape, dtype=geo.dtype)
        xp.copyto(out.reshape(geo.col_shape()),
                  im2col(xp, pad(x), (geo.kh, geo.kw), geo.stride, geo.dilation, (geo.oh, geo.ow)))
        return out
    return writes_out(run)


def col2im_kernel(xp, spec):
    geo = _Blocks(spec.attrs, spec.out_types[0].shape, spec.in_types[0].dtype.numpy)
    (ph, pw), (sh, sw), (dh, dw) = geo.padding, geo.stride, geo.dilation
    oh, ow = geo.oh, geo.ow
    acc = xp.empty((geo.n, geo.c, geo.h + 2 * ph, geo.w + 2 * pw), dtype=geo.dtype) if ph or pw else None

    def run(cols, out=None):
        if out is None:
            out = xp.empty(spec.out_types[0].shape, dtype=geo.dtype)
        target = out if acc is None else acc
        target.fill(0)
        blocks = cols.reshape(geo.col_shape())
        for i in range(geo.kh):
            for j in range(geo.kw):
                target[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw] += blocks[:, :, i, j]
        if acc is not None:
            xp.copyto(out, acc[:, :, ph:ph + geo.h, pw:pw + geo.w])
        return out
    return writes_out(run)


KERNELS = {"conv_transpose2d": conv_transpose2d_kernel, "im2col": im2col_kernel, "col2im": col2im_kernel}
