"""Kernels of the fused ops: linear_relu, conv_bn (eval), conv_bn_train and its backward."""
from __future__ import annotations

from ...ir.ops.norm import batch_norm_affine
from .base import writes_out
from .conv import conv2d_kernel, conv2d_grad_input_kernel, conv2d_grad_weight_kernel
from .linalg import linear_kernel
from ._channels import ChannelPlanes
from .norm import batch_norm_train_kernel, batch_norm_train_grad_kernel, out_buffers


def _linear_relu(xp, spec):
    linear = linear_kernel(xp, spec)

    def run(*args, out=None):
        out = linear(*args, out=out)  # GEMM into the output buffer, bias in place,
        return xp.maximum(out, 0, out=out)  # then relu in place
    return writes_out(run)


def _conv2d_relu(xp, spec):
    conv = conv2d_kernel(xp, spec)

    def run(*args, out=None):
        out = conv(*args, out=out)
        return xp.maximum(out, 0, out=out)
    return writes_out(run)


def _sub_spec(spec, in_types, out_types, **attrs):
    return spec._replace(attrs={**spec.attrs, **attrs}, in_types=tuple(in_types), out_types=tuple(out_types))


def _conv_bn(xp, spec):
    conv = conv2d_kernel(xp, _sub_spec(spec, spec.in_types[:2], spec.out_types[:1]))
    has_bias = len(spec.in_types) == 7
    ch = ChannelPlanes(xp, spec.out_types[0].shape, spec.out_types[0].dtype.numpy, 2)
    eps, relu = spec.attrs["eps"], spec.attrs["relu"]

    def run(x, w, *rest, out=None):
        gamma, beta, mean, var = rest[-4:]
        scale, shift = batch_norm_affine(xp, gamma, beta, mean, var, eps)
        if has_bias:
            shift = shift + rest[0] * scale
        out = conv(x, w, out=out)
        out3 = ch.rows(out)
        out3 *= ch.plane(0, scale)
        out3 += ch.plane(1, shift)
        return xp.maximum(out, 0, out=out) if relu else out
    return writes_out(run)


def _conv_bn_train(xp, spec):
    out_t, stat_t = spec.out_types[0], spec.out_types[2]
    conv = conv2d_kernel(xp, _sub_spec(spec, spec.in_types[:-4], [out_t]))
    bn = batch_norm_train_kernel(xp, _sub_spec(spec, [out_t, stat_t, stat_t, stat_t, stat_t], [out_t] + [stat_t] * 4))
    relu = spec.attrs["relu"]

    def run(x, w, *rest, out=None):
        y, conv_out, mean, invstd, new_mean, new_var = out_buffers(xp, spec, out)
        conv(x, w, *rest[:-4], out=conv_out)
        bn(conv_out, *rest[-4:], out=(y, mean, invstd, new_mean, new_var))
        if relu:
            xp.maximum(y, 0, out=y)
        return y, conv_out, mean, invstd, new_mean, new_var
    return writes_out(run)


def _conv_bn_train_grad(xp, spec):
    g_t, x_t, w_t, conv_t, y_t, gamma_t, mean_t, invstd_t = spec.in_types
    a = spec.attrs
    bn_grad = batch_norm_train_grad_kernel(xp, _sub_spec(spec, [conv_t, conv_t, gamma_t, mean_t, invstd_t],
                                                   [conv_t, gamma_t, gamma_t]))
    grad_w = conv2d_grad_weight_kernel(xp, _sub_spec(spec, [conv_t, x_t], [w_t]))
    grad_x = conv2d_grad_input_kernel(xp, _sub_spec(spec, [conv_t, w_t], [x_t])) if a["input_grad"] else None
    relu, has_bias = a["relu"], a["has_bias"]
    dtype = conv_t.dtype.numpy
    masked = xp.empty(conv_t.shape, dtype=dtype)
    positive = xp.empty(conv_t.shape, dtype=bool)
    g_conv = xp.empty(conv_t.shape, dtype=dtype)

    def run(g, x, w, conv_out, y, gamma, mean, invstd, out=None):
        outs = list(out_buffers(xp, spec, out))
        if relu:
            xp.greater(y, 0, out=positive)
            g = xp.multiply(g, positive, out=masked)
        g_gamma, g_beta = outs[-2:]
        bn_grad(g, conv_out, gamma, mean, invstd, out=(g_conv, g_gamma, g_beta))
        k = 0
        if grad_x is not None:
            grad_x(g_conv, w, out=outs[0])
            k = 1
        grad_w(g_conv, x, out=outs[k])
        if has_bias:
            g_conv.sum(axis=(0, 2, 3), out=outs[k + 1])
        return tuple(outs)
    return writes_out(run)


KERNELS = {"linear_relu": _linear_relu, "conv2d_relu": _conv2d_relu, "conv_bn": _conv_bn, "conv_bn_train": _conv_bn_train,
           "conv_bn_train_grad": _conv_bn_train_grad}
