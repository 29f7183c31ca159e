"""Kernels of the fused ops: linear_relu, conv_bn (eval), conv_bn_train and its backward."""
from __future__ import annotations

from .conv import _conv2d, _conv2d_grad_input, _conv2d_grad_weight
from .norm import _batch_norm_train, _batch_norm_train_grad, channel_layout


def _linear_relu(xp, spec):
    has_bias = len(spec.in_types) == 3

    def run(x, w, b=None):
        out = xp.matmul(x, w.T)
        if has_bias:
            out += b
        return xp.maximum(out, 0, out=out)
    return run


def _sub_spec(spec, in_types, out_types, **attrs):
    return spec._replace(attrs={**spec.attrs, **attrs}, in_types=tuple(in_types), out_types=tuple(out_types))


def _conv_part(xp, spec, with_bias: bool):
    conv_types = spec.in_types[:-4] if with_bias else spec.in_types[:2]
    return _conv2d(xp, _sub_spec(spec, conv_types, spec.out_types[:1]))


def _conv_bn(xp, spec):
    conv = _conv_part(xp, spec, with_bias=False)
    has_bias = len(spec.in_types) == 7
    _, bshape = channel_layout(spec.out_types[0].shape)
    eps, relu = spec.attrs["eps"], spec.attrs["relu"]

    def run(x, w, *rest):
        bias = rest[0] if has_bias else None
        gamma, beta, mean, var = rest[-4:]
        scale = gamma / xp.sqrt(var + eps)
        shift = beta - mean * scale
        if bias is not None:
            shift = shift + bias * scale
        out = conv(x, w)
        out *= scale.reshape(bshape)
        out += shift.reshape(bshape)
        return xp.maximum(out, 0, out=out) if relu else out
    return run


def _conv_bn_train(xp, spec):
    conv = _conv_part(xp, spec, with_bias=len(spec.in_types) == 7)
    out_t = spec.out_types[0]
    stat_t = spec.out_types[2]
    bn = _batch_norm_train(xp, _sub_spec(spec, [out_t, stat_t, stat_t, stat_t, stat_t], [out_t] + [stat_t] * 4))
    relu = spec.attrs["relu"]

    def run(x, w, *rest):
        conv_out = conv(x, w, *rest[:-4])
        y, mean, invstd, new_mean, new_var = bn(conv_out, *rest[-4:])
        if relu:
            xp.maximum(y, 0, out=y)
        return y, conv_out, mean, invstd, new_mean, new_var
    return run


def _conv_bn_train_grad(xp, spec):
    g_t, x_t, w_t, conv_t, y_t, gamma_t, mean_t, invstd_t = spec.in_types
    a = spec.attrs
    bn_grad = _batch_norm_train_grad(xp, _sub_spec(spec, [conv_t, conv_t, gamma_t, mean_t, invstd_t],
                                                   [conv_t, gamma_t, gamma_t]))
    grad_w = _conv2d_grad_weight(xp, _sub_spec(spec, [conv_t, x_t], [w_t]))
    grad_x = _conv2d_grad_input(xp, _sub_spec(spec, [conv_t, w_t], [x_t])) if a["input_grad"] else None
    relu, has_bias = a["relu"], a["has_bias"]

    def run(g, x, w, conv_out, y, gamma, mean, invstd):
        if relu:
            g = g * (y > 0)
        g_conv, g_gamma, g_beta = bn_grad(g, conv_out, gamma, mean, invstd)
        outs = [grad_x(g_conv, w)] if grad_x is not None else []
        outs.append(grad_w(g_conv, x))
        if has_bias:
            outs.append(g_conv.sum(axis=(0, 2, 3)))
        return tuple(outs) + (g_gamma, g_beta)
    return run


KERNELS = {"linear_relu": _linear_relu, "conv_bn": _conv_bn, "conv_bn_train": _conv_bn_train,
           "conv_bn_train_grad": _conv_bn_train_grad}

