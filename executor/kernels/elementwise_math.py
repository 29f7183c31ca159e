"""Kernels of ir/ops/elementwise_math.py: numpy ufuncs (cupy has the same names). Float math
gets inputs already cast to the output dtype (the OpDefs promote_inputs); fmod and remainder
of integers refuse a zero divisor, as PyTorch's ZeroDivisionError (numpy would give 0)."""
from __future__ import annotations

from ...ir.errors import GraphcError
from .base import writes_out
from .elementwise import _ufunc, _ufunc_kernel


def _integer_mod(name, ufunc_name):
    def make(xp, spec):
        run = _ufunc_kernel(getattr(xp, ufunc_name), spec)
        if spec.out_types[0].dtype.is_float:
            return run

        def checked(a, b, out=None):
            if bool((xp.asarray(b) == 0).any()):
                raise GraphcError(f"{name}: integer division by zero, as PyTorch refuses it")
            return run(a, b, out=out)
        return writes_out(checked)
    return make


def _float_test(ufunc_name):
    def make(xp, spec):
        if spec.in_types[0].dtype.is_float:
            return _ufunc_kernel(getattr(xp, ufunc_name), spec, spec.in_types[0].dtype)
        shape = spec.out_types[0].shape
        return writes_out(lambda x, out=None: xp.zeros(shape, bool) if out is None else _fill(out))
    return make


def _fill(out):
    out[...] = False
    return out


def _logical(ufunc_name):
    def make(xp, spec):
        ufunc = getattr(xp, ufunc_name)
        return writes_out(lambda a, b, out=None: ufunc(a, b, out=out), alias_safe=True)
    return make


KERNELS = {
    "tan": _ufunc("tan"), "asin": _ufunc("arcsin"), "acos": _ufunc("arccos"), "atan": _ufunc("arctan"),
    "sinh": _ufunc("sinh"), "cosh": _ufunc("cosh"), "asinh": _ufunc("arcsinh"), "acosh": _ufunc("arccosh"),
    "atanh": _ufunc("arctanh"), "expm1": _ufunc("expm1"), "exp2": _ufunc("exp2"), "log2": _ufunc("log2"),
    "log10": _ufunc("log10"), "reciprocal": _ufunc("reciprocal"),
    "isnan": _float_test("isnan"), "isinf": _float_test("isinf"),
    "logical_and": _logical("logical_and"), "logical_or": _logical("logical_or"),
    "logical_xor": _logical("logical_xor"),
    "atan2": _ufunc("arctan2"), "hypot": _ufunc("hypot"), "copysign": _ufunc("copysign"),
    "fmod": _integer_mod("fmod", "fmod"), "remainder": _integer_mod("remainder", "remainder"),
}
