"""GEMM kernels: matmul, linear and conv2d (im2col through stride tricks, then batched GEMM)."""
from __future__ import annotations


def _matmul(xp, spec):
    return xp.matmul


def _linear(xp, spec):
    if len(spec.in_types) == 2:
        return lambda x, w: xp.matmul(x, w.T)

    def run(x, w, b):
        out = xp.matmul(x, w.T)
        out += b
        return out
    return run


def im2col(xp, x, kernel, stride, dilation, out_hw):
    """View ``x`` (n, c, H, W) as windows (n, c, kh, kw, oh, ow) without copying."""
    (kh, kw), (sh, sw), (dh, dw), (oh, ow) = kernel, stride, dilation, out_hw
    s0, s1, s2, s3 = x.strides
    return xp.lib.stride_tricks.as_strided(
        x, shape=(x.shape[0], x.shape[1], kh, kw, oh, ow),
        strides=(s0, s1, s2 * dh, s3 * dw, s2 * sh, s3 * sw))


def pad_spatial(xp, x, padding, value=0.0):
    ph, pw = padding
    if not (ph or pw):
        return x
    n, c, h, w = x.shape
    out = xp.full((n, c, h + 2 * ph, w + 2 * pw), value, dtype=x.dtype)
    out[:, :, ph:ph + h, pw:pw + w] = x
    return out


def _conv2d(xp, spec):
    n, c, _, _ = spec.in_types[0].shape
    o, cg, kh, kw = spec.in_types[1].shape
    _, _, oh, ow = spec.out_types[0].shape
    groups = spec.attrs["groups"]
    stride, padding, dilation = spec.attrs["stride"], spec.attrs["padding"], spec.attrs["dilation"]
    has_bias = len(spec.in_types) == 3
    cols_shape = (n, groups, cg * kh * kw, oh * ow)
    w_shape = (groups, o // groups, cg * kh * kw)

    def run(x, w, b=None):
        windows = im2col(xp, pad_spatial(xp, x, padding), (kh, kw), stride, dilation, (oh, ow))
        cols = windows.reshape(cols_shape)  # copies: one GEMM operand per (image, group)
        out = xp.matmul(w.reshape(w_shape), cols).reshape(n, o, oh, ow)
        if has_bias:
            out += b.reshape(1, o, 1, 1)
        return out
    return run


def _conv2d_grad_input(xp, spec):
    """Per kernel offset: one batched GEMM, then a strided slice-add into the padded input."""
    n, o, oh, ow = spec.in_types[0].shape
    _, cg, kh, kw = spec.in_types[1].shape
    _, c, h, w = spec.out_types[0].shape
    groups = spec.attrs["groups"]
    (sh, sw), (ph, pw), (dh, dw) = spec.attrs["stride"], spec.attrs["padding"], spec.attrs["dilation"]
    dtype = spec.out_types[0].dtype.numpy

    def run(g, weight):
        gg = g.reshape(n, groups, o // groups, oh * ow)
        wt = weight.reshape(groups, o // groups, cg, kh, kw)
        gx = xp.zeros((n, c, h + 2 * ph, w + 2 * pw), dtype=dtype)
        for i in range(kh):
            for j in range(kw):
                part = xp.matmul(wt[:, :, :, i, j].transpose(0, 2, 1), gg).reshape(n, c, oh, ow)
                gx[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw] += part
        return gx[:, :, ph:ph + h, pw:pw + w]
    return run


def _conv2d_grad_weight(xp, spec):
    n, o, oh, ow = spec.in_types[0].shape
    _, c, _, _ = spec.in_types[1].shape
    o, cg, kh, kw = spec.out_types[0].shape
    groups = spec.attrs["groups"]
    stride, padding, dilation = spec.attrs["stride"], spec.attrs["padding"], spec.attrs["dilation"]
    k = cg * kh * kw

    def run(g, x):
        windows = im2col(xp, pad_spatial(xp, x, padding), (kh, kw), stride, dilation, (oh, ow))
        cols = windows.reshape(n, groups, k, oh * ow)
        gg = g.reshape(n, groups, o // groups, oh * ow)
        # sum over images of g_n @ cols_n^T, as one GEMM per group over (images x pixels)
        gw = xp.matmul(gg.transpose(1, 2, 0, 3).reshape(groups, o // groups, n * oh * ow),
                       cols.transpose(1, 0, 3, 2).reshape(groups, n * oh * ow, k))
        return gw.reshape(o, cg, kh, kw)
    return run


KERNELS = {"matmul": _matmul, "linear": _linear, "conv2d": _conv2d, "conv2d_grad_input": _conv2d_grad_input,
           "conv2d_grad_weight": _conv2d_grad_weight}
