"""Elementwise kernels: unary math, binary ops with broadcasting, comparisons, where, cast,
and the activation backwards. Ufunc kernels write into the planner's ``out`` buffers."""
from __future__ import annotations

from ...ir.types import promote
from .base import writes_out


def _casting(spec, dtype=None):
    """Flags of inputs that need casting to the compute dtype (numpy would widen int64+f32
    to f64, graphc's rule gives f32); None when all inputs already have it."""
    want = (dtype or spec.out_types[0].dtype).numpy
    flags = tuple(t.dtype.numpy != want for t in spec.in_types)
    return (want, flags) if any(flags) else None


def _ufunc_kernel(ufunc, spec, dtype=None):
    cast = _casting(spec, dtype)
    if cast is None:
        if len(spec.in_types) == 1:
            return writes_out(lambda x, out=None: ufunc(x, out=out), alias_safe=True)
        return writes_out(lambda a, b, out=None: ufunc(a, b, out=out), alias_safe=True)
    want, flags = cast
    return writes_out(lambda *arrays, out=None: ufunc(*(a.astype(want) if f else a for a, f in zip(arrays, flags)),
                                                      out=out), alias_safe=True)


def _ufunc(name):
    return lambda xp, spec: _ufunc_kernel(getattr(xp, name), spec)


def _relu(xp, spec):
    return writes_out(lambda x, out=None: xp.maximum(x, 0, out=out), alias_safe=True)


def _sigmoid(xp, spec):
    # Stable for both signs, as PyTorch: with e = exp(-|x|) (never overflows),
    # sigmoid(x) = 1 / (1 + e) for x >= 0 and e / (1 + e) for x < 0. The tanh form
    # 0.5 * (1 + tanh(x / 2)) cancels to 0 for x < -17 and loses digits well before.
    shape, dtype = spec.in_types[0].shape, spec.out_types[0].dtype.numpy
    denominator, positive = xp.empty(shape, dtype), xp.empty(shape, bool)  # reused every step

    def run(x, out=None):
        out = xp.empty(shape, dtype) if out is None else out
        e = xp.exp(xp.negative(xp.abs(x, out=out), out=out), out=out)
        xp.add(e, 1, out=denominator)
        xp.copyto(out, 1, where=xp.greater_equal(x, 0, out=positive))
        return xp.divide(out, denominator, out=out)
    return writes_out(run)


def _rsqrt(xp, spec):
    def run(x, out=None):
        y = xp.sqrt(x, out=out)
        return xp.reciprocal(y, out=out)
    return writes_out(run)


def _leaky_relu(xp, spec):
    slope = spec.out_types[0].dtype.numpy.type(spec.attrs["negative_slope"])
    pick = xp.maximum if slope <= 1 else xp.minimum  # leaky(x) = max(x, slope * x) for slope <= 1

    def run(x, out=None):
        y = xp.multiply(x, slope, out=out)
        return pick(x, y, out=out)
    return writes_out(run)


def _compare(name):
    def factory(xp, spec):
        return _ufunc_kernel(getattr(xp, name), spec, promote(spec.in_types[0].dtype, spec.in_types[1].dtype))
    return factory


def _where(xp, spec):
    dtype = spec.out_types[0].dtype.numpy
    flags = tuple(t.dtype.numpy != dtype for t in spec.in_types[1:])
    if not any(flags):
        return xp.where
    return lambda c, a, b: xp.where(c, a.astype(dtype), b.astype(dtype))


def _cast(xp, spec):
    dtype = spec.out_types[0].dtype.numpy

    def run(x, out=None):
        if out is None:
            return x.astype(dtype)
        xp.copyto(out, x, casting="unsafe")
        return out
    return writes_out(run)


def _relu_grad(xp, spec):
    positive = xp.empty(spec.in_types[1].shape, dtype=bool)  # reused every step

    def run(g, y, out=None):
        xp.greater(y, 0, out=positive)
        return xp.multiply(g, positive, out=out)
    return writes_out(run)


def _sigmoid_grad(xp, spec):
    def run(g, y, out=None):
        out = xp.empty(spec.out_types[0].shape, spec.out_types[0].dtype.numpy) if out is None else out
        r = xp.subtract(1, y, out=out)  # into an array even for 0-d inputs (ufuncs return scalars)
        r = xp.multiply(r, y, out=r)
        return xp.multiply(r, g, out=r)
    return writes_out(run)


def _tanh_grad(xp, spec):
    def run(g, y, out=None):
        out = xp.empty(spec.out_types[0].shape, spec.out_types[0].dtype.numpy) if out is None else out
        r = xp.multiply(y, y, out=out)
        r = xp.subtract(1, r, out=r)
        return xp.multiply(r, g, out=r)
    return writes_out(run)


KERNELS = {
    "neg": _ufunc("negative"), "abs": _ufunc("abs"), "sign": _ufunc("sign"), "exp": _ufunc("exp"),
    "log": _ufunc("log"), "log1p": _ufunc("log1p"), "sqrt": _ufunc("sqrt"), "tanh": _ufunc("tanh"),
    "logical_not": _ufunc("logical_not"), "relu": _relu, "rsqrt": _rsqrt, "sigmoid": _sigmoid,
    "leaky_relu": _leaky_relu,
    "add": _ufunc("add"), "sub": _ufunc("subtract"), "mul": _ufunc("multiply"), "div": _ufunc("true_divide"),
    "pow": _ufunc("power"), "maximum": _ufunc("maximum"), "minimum": _ufunc("minimum"),
    "eq": _compare("equal"), "ne": _compare("not_equal"), "lt": _compare("less"), "le": _compare("less_equal"),
    "gt": _compare("greater"), "ge": _compare("greater_equal"),
    "where": _where, "cast": _cast,
    "relu_grad": _relu_grad, "sigmoid_grad": _sigmoid_grad, "tanh_grad": _tanh_grad,
}
