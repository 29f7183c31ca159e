"""Normalisation and probability kernels: batch norm (eval, training and its backward),
softmax, log_softmax, dropout, one_hot. Per-step scratch arrays are allocated once per kernel."""
from __future__ import annotations

from ...ir.errors import GraphcError, ShapeError
from ...ir.ops.norm import batch_norm_affine
from ._channels import ChannelPlanes
from .base import writes_out


def reduced_count(shape, axes) -> int:
    """How many elements each output of a reduction over ``axes`` combines."""
    count = 1
    for a in axes:
        count *= shape[a]
    return count


def out_buffers(xp, spec, out):
    if out is not None:
        return out
    return tuple(xp.empty(t.shape, dtype=t.dtype.numpy) for t in spec.out_types)


def _batch_norm(xp, spec):
    shape = spec.in_types[0].shape
    eps = spec.attrs["eps"]
    ch = ChannelPlanes(xp, shape, spec.out_types[0].dtype.numpy, 2)

    def run(x, w, b, mean, var, out=None):
        scale, shift = batch_norm_affine(xp, w, b, mean, var, eps)
        out = out_buffers(xp, spec, out)[0] if out is None else out
        y3 = ch.rows(out)
        xp.multiply(ch.rows(x), ch.plane(0, scale), out=y3)
        y3 += ch.plane(1, shift)
        return out
    return writes_out(run)


def batch_norm_train_kernel(xp, spec):
    shape = spec.in_types[0].shape
    eps, momentum = spec.attrs["eps"], spec.attrs["momentum"]
    count = reduced_count(shape, [0, *range(2, len(shape))])
    if count <= 1:
        raise ShapeError(f"batch_norm in training needs more than 1 value per channel, got input {list(shape)}")
    unbias = count / (count - 1)
    dtype = spec.in_types[0].dtype.numpy
    ch = ChannelPlanes(xp, shape, dtype, 2)
    centered = ch.rows(xp.empty(shape, dtype=dtype))

    def run(x, w, b, running_mean, running_var, out=None):
        y, mean, invstd, new_mean, new_var = out_buffers(xp, spec, out)
        ch.sum(ch.rows(x), out=mean)
        mean /= count
        xp.subtract(ch.rows(x), ch.plane(0, mean), out=centered)
        var = ch.dot(centered, centered) / count  # two passes: no cancellation when |mean| >> std
        xp.add(var, eps, out=invstd)
        xp.sqrt(invstd, out=invstd)
        xp.reciprocal(invstd, out=invstd)
        xp.add(running_mean * (1 - momentum), mean * momentum, out=new_mean)
        xp.add(running_var * (1 - momentum), var * (momentum * unbias), out=new_var)
        y3 = ch.rows(y)
        xp.multiply(centered, ch.plane(0, invstd * w), out=y3)
        y3 += ch.plane(1, b)
        return y, mean, invstd, new_mean, new_var
    return writes_out(run)


def batch_norm_train_grad_kernel(xp, spec):
    """dx = w * invstd * (g - sum(g) / M) - w * invstd^3 * sum(g * (x - mean)) / M * (x - mean)."""
    shape = spec.in_types[1].shape
    count = reduced_count(shape, [0, *range(2, len(shape))])
    dtype = spec.in_types[1].dtype.numpy
    ch = ChannelPlanes(xp, shape, dtype, 2)
    centered = ch.rows(xp.empty(shape, dtype=dtype))

    def run(g, x, w, mean, invstd, out=None):
        gx, gw, gb = out_buffers(xp, spec, out)
        g3, gx3 = ch.rows(g), ch.rows(gx)
        ch.sum(g3, out=gb)
        xp.subtract(ch.rows(x), ch.plane(0, mean), out=centered)
        dot = ch.dot(g3, centered)
        xp.multiply(dot, invstd, out=gw)
        scale = w * invstd
        xp.multiply(centered, ch.plane(0, scale * invstd * invstd * dot / -count), out=centered)
        xp.subtract(g3, ch.plane(1, gb / count), out=gx3)
        gx3 *= ch.plane(0, scale)
        gx3 += centered
        return gx, gw, gb
    return writes_out(run)


def _softmax_axis(spec):
    return spec.attrs["dim"] if spec.in_types[0].rank else None


def _softmax(xp, spec):
    axis = _softmax_axis(spec)

    def run(x, out=None):
        out = out_buffers(xp, spec, None)[0] if out is None else out
        e = xp.subtract(x, x.max(axis=axis, keepdims=True), out=out)
        xp.exp(e, out=e)
        e /= e.sum(axis=axis, keepdims=True)
        return e
    return writes_out(run)


def _log_softmax(xp, spec):
    axis = _softmax_axis(spec)

    def run(x, out=None):
        out = out_buffers(xp, spec, None)[0] if out is None else out
        shifted = xp.subtract(x, x.max(axis=axis, keepdims=True), out=out)
        shifted -= xp.log(xp.exp(shifted).sum(axis=axis, keepdims=True))
        return shifted
    return writes_out(run)


def _dropout(xp, spec):
    p = spec.attrs["p"]
    shape = spec.in_types[0].shape
    dtype = spec.in_types[0].dtype.numpy
    scale = dtype.type(1.0 / (1.0 - p))
    rng = spec.rng
    draws = xp.empty(shape, dtype=dtype)
    keep = xp.empty(shape, dtype=bool)
    on_host = xp.__name__ == "numpy"

    def run(x, out=None):
        y, mask = out_buffers(xp, spec, out)
        if on_host:
            rng.random(shape, dtype=dtype, out=draws)
        else:  # the plan's one generator also drives GPU plans: same masks on every device
            draws.set(rng.random(shape, dtype=dtype))
        xp.greater_equal(draws, p, out=keep)
        xp.multiply(keep, scale, out=mask)
        xp.multiply(x, mask, out=y)
        return y, mask
    return writes_out(run)


def _one_hot(xp, spec):
    classes = spec.attrs["num_classes"]
    dtype = spec.out_types[0].dtype.numpy
    ids = xp.arange(classes)

    def run(labels):
        if labels.size and (int(labels.min()) < 0 or int(labels.max()) >= classes):
            raise GraphcError(f"class index out of range: labels must be in [0, {classes}), "
                              f"got min {int(labels.min())}, max {int(labels.max())}")
        return (labels[..., None] == ids).astype(dtype)
    return run


KERNELS = {"one_hot": _one_hot, "batch_norm": _batch_norm, "batch_norm_train": batch_norm_train_kernel, "batch_norm_train_grad": batch_norm_train_grad_kernel,
           "softmax": _softmax, "log_softmax": _log_softmax, "dropout": _dropout}
