"""Elementwise kernels: unary math (``erf`` too), binary ops with broadcasting, comparisons,
where, cast, and the activation backwards. Ufunc kernels write into the planner's ``out`` buffers."""
from __future__ import annotations

import math

from ...ir.errors import GraphcError
from ...ir.ops._shapes import result_dtype
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


def _rounding(name):
    """floor, ceil, round (numpy's rint: halves to even, as PyTorch's) and trunc of floats;
    integers pass through unchanged, as in PyTorch."""
    def make(xp, spec):
        if spec.out_types[0].dtype.is_float:
            return _ufunc_kernel(getattr(xp, name), spec)
        return writes_out(lambda x, out=None: x.copy() if out is None else _finish(xp, x, out), alias_safe=True)
    return make


def _as_output_dtype(spec):
    """Cast every input to the output's dtype (bool or uint8 next to int64 computes in int64)."""
    want = spec.out_types[0].dtype.numpy
    return lambda *arrays: [a if a.dtype == want else a.astype(want) for a in arrays]


def _finish(xp, result, out):
    if out is None:
        return result
    xp.copyto(out, result)
    return out


def _div(xp, spec):
    mode = spec.attrs.get("rounding_mode")
    if mode is None:
        return _ufunc_kernel(xp.true_divide, spec)
    if spec.out_types[0].dtype.is_float:
        if mode == "floor":
            return _float_floor_div(xp, spec)
        return _float_trunc_div(xp, spec)
    return _int_div(xp, spec, mode)


def _float_floor_div(xp, spec):
    """PyTorch's div_floor of floats: q = (a - fmod(a, b)) / b, one less where the remainder's
    sign differs from b's, rounded to the nearest whole number (1 // 0.1 is 9, floor(1 / 0.1)
    is 10); a / b where b is 0. numpy's floor_divide computes exactly that in one pass; cupy's
    is floor(a / b), so other array modules spell it out."""
    if xp.__name__ == "numpy":
        return _ufunc_kernel(xp.floor_divide, spec)
    want = spec.out_types[0].dtype.numpy

    def run(a, b, out=None):
        a, b = a.astype(want, copy=False), b.astype(want, copy=False)
        remainder = xp.fmod(a, b)
        q = (a - remainder) / b
        q -= (remainder != 0) & ((b < 0) != (remainder < 0))
        whole = xp.floor(q)
        whole += (q - whole) > 0.5
        return _finish(xp, xp.where(b == 0, a / b, whole), out)
    return writes_out(run)


def _float_trunc_div(xp, spec):
    divide = _ufunc_kernel(xp.true_divide, spec)  # PyTorch: trunc(a / b), so 1 / 0.1 gives 10 (floor gives 9)
    return writes_out(lambda a, b, out=None: xp.trunc(divide(a, b, out=out), out=out))


def _int_div(xp, spec, mode):
    """Integer floor or trunc division. Division by zero raises, as PyTorch's ZeroDivisionError:
    numpy would give 0 silently (a number that means nothing)."""
    cast = _as_output_dtype(spec)

    def run(a, b, out=None):
        a, b = cast(a, b)
        if bool((b == 0).any()):
            raise GraphcError(f"div: integer division by zero (rounding_mode={mode!r}), as PyTorch refuses it")
        q = xp.floor_divide(a, b, out=out)
        if mode == "trunc":  # the floor is one below the truncation where the remainder is nonzero and signs differ
            q += (xp.remainder(a, b) != 0) & ((a < 0) != (b < 0))
        return q
    return writes_out(run)


def _pow(xp, spec):
    if spec.out_types[0].dtype.is_float:
        return _ufunc_kernel(xp.power, spec)
    cast = _as_output_dtype(spec)

    def run(a, e, out=None):
        """PyTorch's integer power: a negative exponent gives 0, except 1 for a base of 1 and
        +-1 for a base of -1 (numpy raises instead)."""
        a, e = cast(a, e)
        negative = e < 0
        if not bool(negative.any()):
            return xp.power(a, e, out=out)
        powered = xp.power(a, xp.where(negative, 0, e))
        minus_one = xp.where(xp.bitwise_and(e, 1) == 1, -1, 1)  # (-1) ** e by the parity of e
        below = xp.where(a == 1, 1, xp.where(a == -1, minus_one, 0)).astype(powered.dtype)
        return _finish(xp, xp.where(negative, below, powered), out)
    return writes_out(run)


def _sign(xp, spec):
    if spec.in_types[0].dtype.name == "bool":  # numpy has no bool sign; it is the value itself
        return writes_out(lambda x, out=None: _finish(xp, x.copy(), out))
    return _ufunc_kernel(xp.sign, spec)


def _relu(xp, spec):
    return writes_out(lambda x, out=None: xp.maximum(x, 0, out=out), alias_safe=True)


def sigmoid_into(xp, x, out):
    """``out`` <- sigmoid(x) = 1 / (1 + exp(-x)) (``out`` may be ``x``): PyTorch's formula, four
    passes. exp(-x) overflows to inf for x below about -88 (float32), giving 0 where sigmoid is
    under 1e-38, as PyTorch gives (plans and eager ops run under ``errstate(all="ignore")``)."""
    e = xp.exp(xp.negative(x, out=out), out=out)
    return xp.reciprocal(xp.add(e, 1, out=out), out=out)


def _sigmoid(xp, spec):
    """sigmoid_into, then, only when some x is below the point where exp(-x) overflows, those
    entries as exp(x) (sigmoid's value there to the last subnormal bit). It replaced a
    two-branch form (e / (1 + e) with e = exp(-|x|) for x < 0) of seven passes, one a
    ``copyto(where=)``: 18.8 -> 3.6 ms on 3.2M floats (PyTorch 3.2 ms, which gives 0 below -88)."""
    shape, dtype = spec.in_types[0].shape, spec.out_types[0].dtype.numpy
    try:  # on a GPU the test would read a value back to the host every step: PyTorch's 0 there
        overflow = 1.0 - math.log(float(xp.finfo(dtype).max)) if xp.__name__ == "numpy" else None
    except (TypeError, ValueError):  # a dtype numpy has no finfo for
        overflow = None

    def run(x, out=None):
        needs_tail = overflow is not None and x.size and float(x.min()) < overflow  # before out may overwrite x
        tail = (x < overflow) if needs_tail else None
        small = xp.exp(x[tail]) if needs_tail else None
        out = sigmoid_into(xp, x, xp.empty(shape, dtype) if out is None else out)
        if needs_tail:
            out[tail] = small
        return out
    return writes_out(run, alias_safe=True)  # elementwise: out may be x


def _rsqrt(xp, spec):
    def run(x, out=None):
        y = xp.sqrt(x, out=out)
        return xp.reciprocal(y, out=out)
    return writes_out(run)


# erf: numpy has no ufunc and scipy is not a dependency, so W. J. Cody's rational Chebyshev
# approximations (Math. Comp. 23, 1969; netlib specfun CALERF), about 1e-16 relative in float64:
# erf itself on |x| <= 0.46875, erfc(|x|) = exp(-x^2) * R(|x|) beyond, with R in 1/x^2 past 4.
_ERF_A = (3.16112374387056560e00, 1.13864154151050156e02, 3.77485237685302021e02, 3.20937758913846947e03,
          1.85777706184603153e-1)
_ERF_B = (2.36012909523441209e01, 2.44024637934444173e02, 1.28261652607737228e03, 2.84423683343917062e03)
_ERFC_C = (5.64188496988670089e-1, 8.88314979438837594e00, 6.61191906371416295e01, 2.98635138197400131e02,
           8.81952221241769090e02, 1.71204761263407058e03, 2.05107837782607147e03, 1.23033935479799725e03,
           2.15311535474403846e-8)
_ERFC_D = (1.57449261107098347e01, 1.17693950891312499e02, 5.37181101862009858e02, 1.62138957456669019e03,
           3.29079923573345963e03, 4.36261909014324716e03, 3.43936767414372164e03, 1.23033935480374942e03)
_ERFC_P = (3.05326634961232344e-1, 3.60344899949804439e-1, 1.25781726111229246e-1, 1.60837851487422766e-2,
           6.58749161529837803e-4, 1.63153871373020978e-2)
_ERFC_Q = (2.56852019228982242e00, 1.87295284992346047e00, 5.27905102951428412e-1, 6.05183413124413191e-2,
           2.33520497626869185e-3)
_SMALL, _MID = 0.46875, 4.0
_ONE = 6.0  # erfc(6) = 2e-17 rounds away next to 1: erf is +-1 in float64 from here (inf too)


def _ratio(num, den, z, lead):
    """P(z) / Q(z) in Cody's nested (Horner) order: ``num[-1]`` is P's leading coefficient,
    then ``num[0..lead]``; Q is monic with ``den[0..lead]``. In place on two temporaries."""
    top, bottom = z * num[-1], z.copy()
    for a, b in zip(num[:lead], den[:lead]):
        top += a
        top *= z
        bottom += b
        bottom *= z
    top += num[lead]
    bottom += den[lead]
    top /= bottom
    return top


_ERF_BLOCK = 32768  # elements per block: a float64 block's temporaries stay in the L2 cache


def erf_float64(xp, x):
    """erf of a float64 array (any shape, 0-d too), computed as described above. On the CPU
    in blocks of 32768 elements: the formulas are some 40 numpy passes, and over a block that
    fits in cache they run 2-3x faster than over the whole array; each element's arithmetic,
    and so its value, is the same either way."""
    flat = x.reshape(-1)
    if xp.__name__ != "numpy" or flat.size <= _ERF_BLOCK:  # a GPU runs the whole array at once
        return _erf_block(xp, flat).reshape(x.shape)
    out = xp.empty_like(flat)
    for start in range(0, flat.size, _ERF_BLOCK):
        out[start:start + _ERF_BLOCK] = _erf_block(xp, flat[start:start + _ERF_BLOCK])
    return out.reshape(x.shape)


def _erf_block(xp, flat):
    y = xp.abs(flat)
    out = xp.empty_like(flat)
    small = y <= _SMALL
    xs = flat[small]
    out[small] = xs * _ratio(_ERF_A, _ERF_B, xs * xs, 3)
    mid = (y > _SMALL) & (y <= _MID)
    xm = flat[mid]
    out[mid] = _erf_from_erfc(xp, xm, _ratio(_ERFC_C, _ERFC_D, xp.abs(xm), 7))
    far = ~(small | mid)  # beyond 4, infinities and NaN (which stays NaN)
    out[far] = _erf_from_erfc(xp, flat[far], _erfc_tail(xp, y[far]))
    return out


def _erfc_tail(xp, y):
    """erfc(y) * exp(y^2) for y > 4, as a rational function of 1/y^2."""
    y = xp.minimum(y, _ONE)
    z = 1.0 / (y * y)
    return (1.0 / math.sqrt(math.pi) - z * _ratio(_ERFC_P, _ERFC_Q, z, 4)) / y


def _erf_from_erfc(xp, x, scaled):
    """sign(x) * (1 - erfc(|x|)) from ``scaled`` = erfc(|x|) * exp(x^2), in place."""
    y = xp.minimum(xp.abs(x), _ONE)
    hi = y * 16.0  # exp(-y^2) = exp(-hi^2) * exp(-(y-hi)(y+hi)), hi = trunc(16 y) / 16: hi^2 is exact
    xp.trunc(hi, out=hi)
    hi /= 16.0
    lo = y - hi
    y += hi
    lo *= y
    xp.negative(lo, out=lo)
    xp.exp(lo, out=lo)
    xp.multiply(hi, hi, out=hi)
    xp.negative(hi, out=hi)
    xp.exp(hi, out=hi)
    hi *= lo
    hi *= scaled
    xp.subtract(1.0, hi, out=hi)
    return xp.copysign(hi, x, out=hi)


def _erf(xp, spec):
    dtype = spec.out_types[0].dtype.numpy

    def run(x, out=None):
        y = erf_float64(xp, x.astype(xp.float64))  # float32 inputs too: the float64 result rounds once
        if out is None:
            return y.astype(dtype)
        xp.copyto(out, y, casting="unsafe")
        return out
    return writes_out(run)


def _leaky_relu(xp, spec):
    slope = spec.out_types[0].dtype.numpy.type(spec.attrs["negative_slope"])
    pick = xp.maximum if slope <= 1 else xp.minimum  # leaky(x) = max(x, slope * x) for slope <= 1

    def run(x, out=None):
        y = xp.multiply(x, slope, out=out)
        return pick(x, y, out=out)
    return writes_out(run)


def _hardtanh(xp, spec):
    dtype = spec.out_types[0].dtype.numpy.type
    low, high = dtype(spec.attrs["min_val"]), dtype(spec.attrs["max_val"])
    return writes_out(lambda x, out=None: xp.clip(x, low, high, out=out))


def _compare(name):
    def factory(xp, spec):
        return _ufunc_kernel(getattr(xp, name), spec, result_dtype(spec.in_types))  # PyTorch compares in it
    return factory


_SAME_WIDTH_INT = {1: "int8", 2: "int16", 4: "int32", 8: "int64"}


def _into(result, out):
    if out is None:
        return result
    out[...] = result
    return out


def _where(xp, spec):
    """A bitwise select, ``b ^ ((a ^ b) & mask)`` on the values' bits with mask all ones where
    c: exact for every value (NaN and inf included) and branch-free. numpy's where branches
    per element: 11.4 ms on a random 32x96x32x32 mask against 1.9 ms for this, and relu6's
    gradient is two wheres after every MobileNet conv."""
    dtype = spec.out_types[0].dtype.numpy
    if dtype.itemsize not in _SAME_WIDTH_INT:  # complex128: no integer that wide, numpy's select
        return writes_out(lambda c, a, b, out=None: _into(xp.where(c, a, b).astype(dtype, copy=False), out))
    bits = xp.dtype(_SAME_WIDTH_INT[dtype.itemsize])
    mask = xp.empty(spec.in_types[0].shape, dtype=bits)

    def as_bits(v):
        v = xp.asarray(v)
        return (v if v.dtype == dtype else v.astype(dtype)).view(bits)

    def run(c, a, b, out=None):
        if out is None:
            out = xp.empty(spec.out_types[0].shape, dtype=dtype)
        xp.negative(c, out=mask, dtype=bits, casting="unsafe")  # True -> all ones
        a, b, o = as_bits(a), as_bits(b), out.view(bits)
        xp.bitwise_xor(a, b, out=o)
        xp.bitwise_and(o, mask, out=o)
        xp.bitwise_xor(o, b, out=o)
        return out
    return writes_out(run)


def _cast(xp, spec):
    dtype = spec.out_types[0].dtype.numpy
    # complex to real keeps the real part, as PyTorch (numpy would warn ComplexWarning)
    to_real = spec.in_types[0].dtype.is_complex and not spec.out_types[0].dtype.is_complex

    def run(x, out=None):
        if to_real:
            x = x.real
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
    "neg": _ufunc("negative"), "abs": _ufunc("abs"), "sign": _sign, "exp": _ufunc("exp"),
    "floor": _rounding("floor"), "ceil": _rounding("ceil"), "round": _rounding("rint"), "trunc": _rounding("trunc"),
    "log": _ufunc("log"), "log1p": _ufunc("log1p"), "sqrt": _ufunc("sqrt"), "tanh": _ufunc("tanh"),
    "sin": _ufunc("sin"), "cos": _ufunc("cos"),
    "logical_not": _ufunc("logical_not"), "relu": _relu, "rsqrt": _rsqrt, "sigmoid": _sigmoid,
    "leaky_relu": _leaky_relu, "hardtanh": _hardtanh, "erf": _erf,
    "add": _ufunc("add"), "sub": _ufunc("subtract"), "mul": _ufunc("multiply"), "div": _div,
    "pow": _pow, "maximum": _ufunc("maximum"), "minimum": _ufunc("minimum"),
    "eq": _compare("equal"), "ne": _compare("not_equal"), "lt": _compare("less"), "le": _compare("less_equal"),
    "gt": _compare("greater"), "ge": _compare("greater_equal"),
    "where": _where, "cast": _cast,
    "relu_grad": _relu_grad, "sigmoid_grad": _sigmoid_grad, "tanh_grad": _tanh_grad,
}
