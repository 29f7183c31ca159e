"""Elementwise kernels (unary, binary with broadcasting, comparisons, where, cast)."""
from __future__ import annotations

from ...ir.types import promote


def _casting(xp, spec, dtype=None):
    """Return a function making inputs the compute dtype (numpy would widen int64+f32 to f64)."""
    want = (dtype or spec.out_types[0].dtype).numpy
    flags = tuple(t.dtype.numpy != want for t in spec.in_types)
    if not any(flags):
        return None
    return lambda arrays: [a.astype(want) if f else a for a, f in zip(arrays, flags)]


def _unary(fn):
    def factory(xp, spec):
        f = fn(xp)
        return f
    return factory


def _sigmoid(xp):
    # 0.5 * (1 + tanh(x / 2)) is exact sigmoid without exp overflow for large |x|.
    def run(x):
        y = xp.tanh(x * 0.5)
        y += 1
        y *= 0.5
        return y
    return run


def _rsqrt(xp):
    return lambda x: xp.reciprocal(xp.sqrt(x))


def _leaky_relu(xp, spec):
    slope = spec.attrs["negative_slope"]
    dtype = spec.out_types[0].dtype.numpy
    return lambda x: xp.where(x > 0, x, x * dtype.type(slope))


def _binary(name):
    def factory(xp, spec):
        ufunc = getattr(xp, name)
        cast = _casting(xp, spec)
        if cast is None:
            return ufunc
        return lambda a, b: ufunc(*cast([a, b]))
    return factory


def _compare(name):
    def factory(xp, spec):
        ufunc = getattr(xp, name)
        cast = _casting(xp, spec, promote(spec.in_types[0].dtype, spec.in_types[1].dtype))
        if cast is None:
            return ufunc
        return lambda a, b: ufunc(*cast([a, b]))
    return factory


def _where(xp, spec):
    dtype = spec.out_types[0].dtype.numpy
    flags = tuple(t.dtype.numpy != dtype for t in spec.in_types[1:])
    if not any(flags):
        return xp.where
    return lambda c, a, b: xp.where(c, a.astype(dtype), b.astype(dtype))


def _cast(xp, spec):
    dtype = spec.out_types[0].dtype.numpy
    return lambda x: x.astype(dtype)


def _div(xp, spec):
    cast = _casting(xp, spec)
    if cast is None:
        return xp.true_divide
    return lambda a, b: xp.true_divide(*cast([a, b]))


def _relu_grad(xp, spec):
    return lambda g, y: g * (y > 0)


def _sigmoid_grad(xp, spec):
    def run(g, y):
        out = 1 - y
        out *= y
        out *= g
        return out
    return run


def _tanh_grad(xp, spec):
    def run(g, y):
        out = y * y
        xp.subtract(1, out, out=out)
        out *= g
        return out
    return run


KERNELS = {
    "relu_grad": _relu_grad,
    "sigmoid_grad": _sigmoid_grad,
    "tanh_grad": _tanh_grad,
    "neg": _unary(lambda xp: xp.negative),
    "abs": _unary(lambda xp: xp.abs),
    "sign": _unary(lambda xp: xp.sign),
    "relu": _unary(lambda xp: (lambda x: xp.maximum(x, 0))),
    "exp": _unary(lambda xp: xp.exp),
    "log": _unary(lambda xp: xp.log),
    "log1p": _unary(lambda xp: xp.log1p),
    "sqrt": _unary(lambda xp: xp.sqrt),
    "rsqrt": _unary(_rsqrt),
    "tanh": _unary(lambda xp: xp.tanh),
    "sigmoid": _unary(_sigmoid),
    "logical_not": _unary(lambda xp: xp.logical_not),
    "leaky_relu": _leaky_relu,
    "add": _binary("add"),
    "sub": _binary("subtract"),
    "mul": _binary("multiply"),
    "div": _div,
    "pow": _binary("power"),
    "maximum": _binary("maximum"),
    "minimum": _binary("minimum"),
    "eq": _compare("equal"),
    "ne": _compare("not_equal"),
    "lt": _compare("less"),
    "le": _compare("less_equal"),
    "gt": _compare("greater"),
    "ge": _compare("greater_equal"),
    "where": _where,
    "cast": _cast,
}
