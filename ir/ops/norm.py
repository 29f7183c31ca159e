"""Batch norm (eval and training forms), dropout, softmax, log_softmax and one_hot."""
from __future__ import annotations

from ..errors import GraphcError, ShapeError
from ..registry import Attr, OpDef, register
from ..types import DType, TensorType
from ._shapes import need_float, need_rank, norm_axis
from ._vjp import scalar

# eps is added to the variance: positive, and finite once cast to float32 (1e308 would be inf there)
EPS = Attr("float", 1e-5, minimum=0, exclusive_minimum=True, maximum=3.4028234663852886e38)
MOMENTUM = Attr("float", 0.1, minimum=0, maximum=1)  # running = (1 - m) * running + m * batch


def batch_norm_affine(xp, weight, bias, mean, var, eps):
    """Eval-mode batch norm as a per-channel affine map ``y = x * scale + shift``: the one
    definition its kernel, the fused conv_bn kernel and BN folding (in float64) all use."""
    scale = weight / xp.sqrt(var + eps)
    return scale, bias - mean * scale


def check_channel_params(x, params, op):
    need_rank(x, (2, 3, 4), op)
    need_float(x, op)
    c = x.shape[1]
    for p in params:
        if p.shape != (c,):
            raise ShapeError(f"{op}: per-channel tensor {p} should be [{c}] for input {x}")
        if p.dtype is not x.dtype:  # PyTorch refuses mixed dtypes here (graphc used to promote)
            raise ShapeError(f"{op}: per-channel tensor {p} is {p.dtype.name} but the input is {x.dtype.name}; "
                             f"cast one (model.to(gc.{x.dtype.name}))")
    return TensorType((c,), x.dtype)


def _channel_axes(x_type) -> list:
    return [0] + list(range(2, x_type.rank))


def per_channel(b, v, x_type):
    """Reshape a (C,) value to broadcast against x: (1, C, 1, 1) for NCHW."""
    return b.emit1("reshape", [v], {"shape": [1, x_type.shape[1]] + [1] * (x_type.rank - 2)})


def _batch_norm(in_types, attrs):
    check_channel_params(in_types[0], in_types[1:], "batch_norm")
    return [in_types[0]]


def eval_bn_vjp(b, g, x_type, make_x, w, mean, var, eps, needs):
    """Gradients of eval-mode BN ``y = (x - mean) * w * rsqrt(var + eps) + beta`` for
    (x, w, beta, mean, var), None where not needed: the one rule batch_norm and the fused
    conv_bn share. ``make_x()`` builds x only when a gradient needs it (conv_bn recomputes its
    convolution then)."""
    axes = _channel_axes(x_type)
    invstd = b.emit1("rsqrt", [b.emit1("add", [var, scalar(b, eps, var.type.dtype)])])
    scale = b.emit1("mul", [w, invstd])
    g_sum = b.emit1("sum", [g], {"dims": axes}) if needs[2] or needs[3] else None
    g_dot = None
    if needs[1] or needs[4]:  # both need sum(g * (x - mean))
        centered = b.emit1("sub", [make_x(), per_channel(b, mean, x_type)])
        g_dot = b.emit1("sum", [b.emit1("mul", [g, centered])], {"dims": axes})
    grads = [b.emit1("mul", [g, per_channel(b, scale, x_type)]) if needs[0] else None,
             b.emit1("mul", [g_dot, invstd]) if needs[1] else None,
             g_sum if needs[2] else None,
             b.emit1("neg", [b.emit1("mul", [g_sum, scale])]) if needs[3] else None, None]
    if needs[4]:  # d/dvar of (x - mean) * w * (var + eps)^-1/2 = -0.5 * w * invstd^3 * (x - mean)
        cube = b.emit1("mul", [invstd, b.emit1("mul", [invstd, invstd])])
        grads[4] = b.emit1("mul", [b.emit1("mul", [g_dot, w]), b.emit1("mul", [cube, scalar(b, -0.5, w.type.dtype)])])
    return grads


def _vjp_batch_norm(b, node, cts, needs):
    x, w, _, mean, var = node.inputs
    return eval_bn_vjp(b, cts[0], x.type, lambda: x, w, mean, var, node.attrs["eps"], needs)


def _batch_norm_train(in_types, attrs):
    stat = check_channel_params(in_types[0], in_types[1:], "batch_norm_train")
    return [in_types[0], stat, stat, stat, stat]


def _vjp_batch_norm_train(b, node, cts, needs):
    if any(ct is not None for ct in cts[1:]):
        raise GraphcError("gradients through batch_norm_train's statistics outputs are not supported")
    x, w = node.inputs[:2]
    mean, invstd = node.outputs[1], node.outputs[2]
    gx, gw, gb = b.emit("batch_norm_train_grad", [cts[0], x, w, mean, invstd])
    return [gx if needs[0] else None, gw if needs[1] else None, gb if needs[2] else None, None, None]


def _batch_norm_train_grad(in_types, attrs):
    g, x = in_types[:2]
    if g.shape != x.shape:
        raise ShapeError(f"batch_norm_train_grad: cotangent {g} does not match input {x}")
    stat = check_channel_params(x, in_types[2:], "batch_norm_train_grad")
    return [x, stat, stat]


def _dropout(in_types, attrs):
    need_float(in_types[0], "dropout")
    if not 0.0 <= attrs["p"] < 1.0:
        raise ShapeError(f"dropout probability must be in [0, 1), got {attrs['p']}")
    return [in_types[0], in_types[0]]


def _vjp_dropout(b, node, cts, needs):
    return [b.emit1("mul", [cts[0], node.outputs[1]])]


def _softmax(name):
    def rule(in_types, attrs):
        x = in_types[0]
        need_float(x, name)
        norm_axis(attrs["dim"], x.rank)
        return [x]
    return rule


def _vjp_softmax(b, node, cts, needs):
    y, g = node.outputs[0], cts[0]
    dot = b.emit1("sum", [b.emit1("mul", [g, y])], {"dims": [node.attrs["dim"]], "keepdim": True})
    return [b.emit1("mul", [y, b.emit1("sub", [g, dot])])]


def _vjp_log_softmax(b, node, cts, needs):
    y, g = node.outputs[0], cts[0]
    total = b.emit1("sum", [g], {"dims": [node.attrs["dim"]], "keepdim": True})
    return [b.emit1("sub", [g, b.emit1("mul", [b.emit1("exp", [y]), total])])]


def _one_hot(in_types, attrs):
    t = in_types[0]
    if t.dtype is not DType.int64:
        raise ShapeError(f"one_hot needs int64 class indices, got {t.dtype.name}")
    if attrs["num_classes"] <= 0:
        raise ShapeError(f"one_hot: num_classes must be positive, got {attrs['num_classes']}")
    return [TensorType(t.shape + (attrs["num_classes"],), attrs["dtype"])]


register(OpDef("batch_norm", _batch_norm, attrs={"eps": EPS}, inputs=(5, 5), vjp=_vjp_batch_norm, promotes_inputs=True,
               doc="eval form: (x, weight, bias, running_mean, running_var) -> y"))
register(OpDef("batch_norm_train", _batch_norm_train, attrs={"eps": EPS, "momentum": MOMENTUM},
               inputs=(5, 5), vjp=_vjp_batch_norm_train, promotes_inputs=True, differentiable_outputs=(0,),
               doc="training form: (x, weight, bias, running_mean, running_var) -> "
                   "(y, batch mean, batch invstd, new running_mean, new running_var (unbiased))"))
register(OpDef("batch_norm_train_grad", _batch_norm_train_grad, inputs=(5, 5),
               doc="(g, x, weight, batch mean, batch invstd) -> (dx, dweight, dbias)"))
register(OpDef("dropout", _dropout, attrs={"p": Attr("float", 0.5, minimum=0, maximum=1)}, effects="random", vjp=_vjp_dropout,
               doc="(x) -> (x * mask / (1 - p), mask / (1 - p)); the mask comes from the plan's RNG"))
register(OpDef("softmax", _softmax("softmax"), attrs={"dim": Attr("int")}, vjp=_vjp_softmax))
register(OpDef("log_softmax", _softmax("log_softmax"), attrs={"dim": Attr("int")}, vjp=_vjp_log_softmax))
register(OpDef("one_hot", _one_hot, attrs={"num_classes": Attr("int", minimum=1), "dtype": Attr("dtype", "float32")},
               doc="int64 class indices -> one-hot rows"))
