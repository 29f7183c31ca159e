"""Reduction kernels (sum, mean, max, argmax, the reduce_grad backward) and the non-finite guard."""
from __future__ import annotations

from ...ir.errors import NonFiniteError
from .base import writes_out
from .norm import reduced_count


def _reduce(method):
    def factory(xp, spec):
        axes, rank = spec.attrs["dims"], spec.in_types[0].rank
        axes = None if axes is None or rank == 0 else tuple(a % rank for a in axes)
        keepdim = spec.attrs["keepdim"]
        dtype = spec.out_types[0].dtype.numpy
        if method == "max":
            return writes_out(lambda x, out=None: x.max(axis=axes, keepdims=keepdim, out=out))
        return writes_out(lambda x, out=None: getattr(x, method)(axis=axes, keepdims=keepdim, dtype=dtype, out=out))
    return factory


def _argmax(xp, spec):
    dim = spec.attrs["dim"]  # keepdim is in the output shape the result is reshaped to
    out_shape = spec.out_types[0].shape
    if dim is None:
        return lambda x: xp.argmax(x).reshape(out_shape)
    return lambda x: xp.argmax(x, axis=dim).reshape(out_shape)


def _reduce_grad(xp, spec):
    shape = spec.out_types[0].shape
    axes = tuple(a % len(shape) for a in spec.attrs["dims"]) if shape else ()  # a 0-d input's dim 0/-1 is itself
    keep = tuple(1 if i in axes else d for i, d in enumerate(shape))
    count = reduced_count(shape, axes)
    scale = spec.out_types[0].dtype.numpy.type(1.0 / max(count, 1)) if spec.attrs["mean"] else None

    def run(g, out=None):
        g = xp.broadcast_to(g.reshape(keep), shape)
        if out is None:
            out = xp.empty(shape, dtype=g.dtype)
        if scale is None:
            xp.copyto(out, g)
            return out
        return xp.multiply(g, scale, out=out)
    return writes_out(run)


def _assert_finite(xp, spec):
    names = spec.attrs["names"]

    def run(*arrays):
        for name, a in zip(names, arrays):
            # One reduction per array: NaN and inf survive a sum. A sum can also overflow to inf
            # from large finite values, so only then look element by element.
            if not bool(xp.isfinite(a.sum())) and not bool(xp.isfinite(a).all()):
                nan, inf = int(xp.isnan(a).sum()), int(xp.isinf(a).sum())
                raise NonFiniteError(f"{name} is not finite ({nan} NaN and {inf} infinite of {a.size} values)")
        return xp.asarray(True)
    return run


KERNELS = {"assert_finite": _assert_finite, "reduce_grad": _reduce_grad, "sum": _reduce("sum"), "mean": _reduce("mean"),
           "max": _reduce("max"), "argmax": _argmax}
