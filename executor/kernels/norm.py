"""Normalisation and probability kernels: batch norm (eval and training), softmax,
log_softmax, dropout."""
from __future__ import annotations

from ...ir.errors import ShapeError


def channel_layout(shape):
    """Reduction axes and the per-channel broadcast shape for (N,C), (N,C,L), (N,C,H,W)."""
    axes = (0,) + tuple(range(2, len(shape)))
    bshape = (1, shape[1]) + (1,) * (len(shape) - 2)
    return axes, bshape


def _batch_norm(xp, spec):
    _, bshape = channel_layout(spec.in_types[0].shape)
    eps = spec.attrs["eps"]

    def run(x, w, b, mean, var):
        scale = w / xp.sqrt(var + eps)
        shift = b - mean * scale
        out = x * scale.reshape(bshape)
        out += shift.reshape(bshape)
        return out
    return run


def _batch_norm_train(xp, spec):
    shape = spec.in_types[0].shape
    axes, bshape = channel_layout(shape)
    eps, momentum = spec.attrs["eps"], spec.attrs["momentum"]
    count = 1
    for a in axes:
        count *= shape[a]
    if count <= 1:
        raise ShapeError(f"batch_norm in training needs more than 1 value per channel, got input {list(shape)}")
    unbias = count / (count - 1)

    def run(x, w, b, running_mean, running_var):
        mean = x.mean(axis=axes)
        centered = x - mean.reshape(bshape)
        var = xp.square(centered).mean(axis=axes)
        invstd = 1.0 / xp.sqrt(var + eps)
        out = centered * (invstd * w).reshape(bshape)
        out += b.reshape(bshape)
        new_mean = running_mean * (1 - momentum) + mean * momentum
        new_var = running_var * (1 - momentum) + var * (momentum * unbias)
        return out, mean, invstd.astype(x.dtype), new_mean, new_var.astype(x.dtype)
    return run


def _batch_norm_train_grad(xp, spec):
    shape = spec.in_types[1].shape
    axes, bshape = channel_layout(shape)
    count = 1
    for a in axes:
        count *= shape[a]

    def run(g, x, w, mean, invstd):
        xhat = x - mean.reshape(bshape)
        xhat *= invstd.reshape(bshape)
        gb = g.sum(axis=axes)
        gw = (g * xhat).sum(axis=axes)
        # dx = w * invstd / M * (M * g - sum(g) - xhat * sum(g * xhat))
        xhat *= gw.reshape(bshape)
        gx = g * count
        gx -= gb.reshape(bshape)
        gx -= xhat
        gx *= (w * invstd / count).reshape(bshape)
        return gx, gw, gb
    return run


def _softmax(xp, spec):
    axis = spec.attrs["dim"]

    def run(x):
        e = xp.exp(x - x.max(axis=axis, keepdims=True))
        e /= e.sum(axis=axis, keepdims=True)
        return e
    return run


def _log_softmax(xp, spec):
    axis = spec.attrs["dim"]

    def run(x):
        shifted = x - x.max(axis=axis, keepdims=True)
        shifted -= xp.log(xp.exp(shifted).sum(axis=axis, keepdims=True))
        return shifted
    return run


def _dropout(xp, spec):
    p = spec.attrs["p"]
    shape = spec.in_types[0].shape
    dtype = spec.in_types[0].dtype.numpy
    scale = dtype.type(1.0 / (1.0 - p))
    rng = spec.rng

    def run(x):
        mask = (rng.random(shape, dtype=dtype) >= p).astype(dtype)
        mask *= scale
        return x * mask, mask
    return run


KERNELS = {"batch_norm": _batch_norm, "batch_norm_train": _batch_norm_train, "batch_norm_train_grad": _batch_norm_train_grad, "softmax": _softmax,
           "log_softmax": _log_softmax, "dropout": _dropout}
