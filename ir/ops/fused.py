"""Fused ops created by the fusion passes, with fused backwards.

- ``linear_relu``: GEMM, bias and relu in one kernel; its backward takes the relu mask from
  the output, so the pre-activation is never kept.
- ``conv_bn_train``: convolution, batch statistics, normalisation, affine, optional relu and
  the running-stat update; outputs ``(y, conv_out, mean, invstd, new_rm, new_rv)``; its
  backward ``conv_bn_train_grad`` does relu mask, BN backward and both conv gradients.
- ``conv_bn``: eval form, convolution with BN applied as a per-channel scale and shift.
- ``conv2d_relu``: convolution with the relu applied in place (what export leaves after
  folding BN into the convolution).
"""
from __future__ import annotations

from ..errors import GraphcError
from ..registry import Attr, OpDef, register
from .conv import CONV_ATTRS, conv2d_rule, conv2d_vjp, conv_attrs
from .linalg import linear_rule, linear_vjp
from .norm import EPS, MOMENTUM, check_channel_params, eval_bn_vjp

_BN = {"eps": EPS, "relu": Attr("bool", False)}


def _vjp_linear_relu(b, node, cts, needs):
    g = b.emit1("relu_grad", [cts[0], node.outputs[0]])
    return linear_vjp(b, node, [g], needs)


def _vjp_conv2d_relu(b, node, cts, needs):
    return conv2d_vjp(b, node, [b.emit1("relu_grad", [cts[0], node.outputs[0]])], needs)


def _split_conv_bn_inputs(in_types_or_values):
    """(x, w, [b], gamma, beta, running_mean, running_var) -> (conv part, bn part)."""
    return in_types_or_values[:-4], in_types_or_values[-4:]


def _conv_bn(in_types, attrs):
    conv, bn = _split_conv_bn_inputs(in_types)
    out = conv2d_rule(conv, attrs)[0]
    check_channel_params(out, bn, "conv_bn")
    return [out]


def _vjp_conv_bn(b, node, cts, needs):
    """Eval-form BN's rule (shared with batch_norm) on the conv output, then the conv grads.
    dgamma and dvar need the conv output: recomputed (frozen-BN fine-tuning only)."""
    conv, (gamma, _, mean, var) = _split_conv_bn_inputs(node.inputs)
    y, x, w = node.outputs[0], conv[0], conv[1]
    g = b.emit1("relu_grad", [cts[0], y]) if node.attrs["relu"] else cts[0]
    window = conv_attrs(node.attrs)
    k = len(conv)
    bn_needs = [any(needs[:k])] + list(needs[k:])
    g_conv, ggamma, gbeta, gmean, gvar = eval_bn_vjp(b, g, y.type, lambda: b.emit1("conv2d", list(conv), window),
                                                     gamma, mean, var, node.attrs["eps"], bn_needs)
    grads = [b.emit1("conv2d_grad_input", [g_conv, w], {**window, "input_shape": list(x.type.shape)}) if needs[0] else None,
             b.emit1("conv2d_grad_weight", [g_conv, x], {**window, "weight_shape": list(w.type.shape)}) if needs[1] else None]
    if k == 3:
        grads.append(b.emit1("sum", [g_conv], {"dims": [0, 2, 3]}) if needs[2] else None)
    return grads + [ggamma, gbeta, gmean, gvar]


def _conv_bn_train(in_types, attrs):
    conv, bn = _split_conv_bn_inputs(in_types)
    out = conv2d_rule(conv, attrs)[0]
    stat = check_channel_params(out, bn, "conv_bn_train")
    return [out, out, stat, stat, stat, stat]


def _vjp_conv_bn_train(b, node, cts, needs):
    if any(ct is not None for ct in cts[1:]):
        raise GraphcError("gradients through conv_bn_train's saved outputs are not supported")
    conv, bn = _split_conv_bn_inputs(node.inputs)
    has_bias = len(conv) == 3
    y, conv_out, mean, invstd = node.outputs[:4]
    attrs = conv_attrs(node.attrs)
    attrs.update(relu=node.attrs["relu"], input_grad=needs[0], has_bias=has_bias)
    grads = b.emit("conv_bn_train_grad", [cts[0], conv[0], conv[1], conv_out, y, bn[0], mean, invstd], attrs)
    gx = grads.pop(0) if needs[0] else None
    gw = grads.pop(0)
    gb = grads.pop(0) if has_bias else None
    ggamma, gbeta = grads
    return [gx, gw] + ([gb] if has_bias else []) + [ggamma, gbeta, None, None]


def _conv_bn_train_grad(in_types, attrs):
    g, x, w, conv_out, y, gamma, mean, invstd = in_types
    out = conv2d_rule([x, w], attrs)[0]
    for what, t in (("cotangent", g), ("conv output", conv_out), ("output", y)):
        if t.shape != out.shape:
            raise GraphcError(f"conv_bn_train_grad: {what} {t} does not match the convolution's {out}")
    check_channel_params(out, [gamma, mean, invstd], "conv_bn_train_grad")
    outs = [x] if attrs["input_grad"] else []
    outs.append(w)
    if attrs["has_bias"]:
        outs.append(gamma.with_shape((w.shape[0],)))
    return outs + [gamma, gamma]


register(OpDef("linear_relu", linear_rule, inputs=(2, 3), vjp=_vjp_linear_relu, promotes_inputs=True,
               doc="relu(x @ w.T + b) in one kernel (fused by fuse_linear_relu)"))
register(OpDef("conv2d_relu", conv2d_rule, attrs=CONV_ATTRS, inputs=(2, 3), vjp=_vjp_conv2d_relu,
               doc="relu(conv2d(x, w, b)) in one kernel (fused by fuse_conv_relu, e.g. after BN folding)"))
register(OpDef("conv_bn", _conv_bn, attrs={**CONV_ATTRS, **_BN}, inputs=(6, 7), vjp=_vjp_conv_bn, promotes_inputs=True,
               doc="eval form: (x, w, [b], gamma, beta, running_mean, running_var) -> y"))
register(OpDef("conv_bn_train", _conv_bn_train, attrs={**CONV_ATTRS, **_BN, "momentum": MOMENTUM}, inputs=(6, 7),
               vjp=_vjp_conv_bn_train, promotes_inputs=True, differentiable_outputs=(0,),
               doc="training form: (x, w, [b], gamma, beta, rm, rv) -> (y, conv_out, mean, invstd, new_rm, new_rv)"))
register(OpDef("conv_bn_train_grad", _conv_bn_train_grad,
               attrs={**CONV_ATTRS, "relu": Attr("bool"), "input_grad": Attr("bool"), "has_bias": Attr("bool")},
               inputs=(8, 8), doc="(g, x, w, conv_out, y, gamma, mean, invstd) -> ([dx], dw, [db], dgamma, dbeta)"))
