"""Op table entries of the elementwise math of issue #34 (ir/ops/elementwise_math.py): inputs
from this module's own seeded generator, so no other entry's inputs change."""
from __future__ import annotations

import numpy as np

from op_table import F32, F64, OpInfo, S, _unary_samples, ew, fortran, torch_binary, torch_unary

_RNG = np.random.default_rng(3411)


def _between(lo, hi):
    return lambda shape, dt: _RNG.uniform(lo, hi, shape).astype(dt)


UNARY = {  # op -> (reference in float64, inputs over the op's domain)
    "tan": (np.tan, _between(-1.2, 1.2)),
    "asin": (np.arcsin, _between(-0.9, 0.9)),
    "acos": (np.arccos, _between(-0.9, 0.9)),
    "atan": (np.arctan, _between(-4.0, 4.0)),
    "sinh": (np.sinh, _between(-3.0, 3.0)),
    "cosh": (np.cosh, _between(-3.0, 3.0)),
    "asinh": (np.arcsinh, _between(-4.0, 4.0)),
    "acosh": (np.arccosh, _between(1.2, 5.0)),
    "atanh": (np.arctanh, _between(-0.9, 0.9)),
    "expm1": (np.expm1, _between(-2.0, 2.0)),
    "exp2": (np.exp2, _between(-3.0, 3.0)),
    "log2": (np.log2, _between(0.1, 5.0)),
    "log10": (np.log10, _between(0.1, 5.0)),
    "reciprocal": (np.reciprocal, lambda shape, dt: (np.where(_RNG.random(shape) < 0.5, -1, 1)
                                                     * _RNG.uniform(0.3, 3.0, shape)).astype(dt)),
}


def _ints(shape, lo=1, hi=6):
    return _RNG.integers(lo, hi, shape, dtype=np.int64)


def _away_from_zero(shape, dt):
    return (np.where(_RNG.random(shape) < 0.5, -1, 1) * _RNG.uniform(0.3, 3.0, shape)).astype(dt)


def _mod_pair(dt):
    """x = y * (n + u) with u in [0.2, 0.8]: away from fmod's and remainder's jumps."""
    y = _away_from_zero((3, 4), dt)
    x = y * (_RNG.integers(-3, 4, (3, 4)) + _RNG.uniform(0.2, 0.8, (3, 4)))
    return [x.astype(dt), y]


def _noncontig(pair):
    return [fortran(pair[0]), pair[1]]


def _binary_samples(fn, gen, out="float"):
    ref = ew(fn, out)
    return [S([gen((3, 4), F32), gen((3, 4), F32)], ref, "f32"),
            S([gen((2, 3), F64), gen((3,), F64)], ref, "broadcast-f64"),
            S([gen((), F32), gen((2, 2), F32)], ref, "scalar-tensor"),
            S([fortran(gen((4, 3), F32)), gen((4, 3), F32)], ref, "noncontig-transposed"),
            S([_ints((3, 2)), _ints((3, 2))], ref, "int64", grad=False)]


def _special_values(dt):
    return np.array([-np.inf, -2.0, -0.0, 0.0, 1.5, np.inf, np.nan], dt)


def math_table():
    t = {}
    for op, (fn, gen) in UNARY.items():
        t[op] = OpInfo(op, _unary_samples(fn, gen, [S([_ints((3, 2), -2, 3) if op in ("atan", "sinh", "expm1")
                                                       else _ints((3, 2))], ew(fn, "float"), "int64", grad=False)]),
                       torch_unary(op))
    for op, fn in (("isnan", np.isnan), ("isinf", np.isinf)):
        nt = dict(grad=False, no_torch="inf/NaN inputs: the recorded references' input fingerprint takes moments")
        t[op] = OpInfo(op, [S([_special_values(F32)], ew(fn, "bool"), "special-f32", **nt),
                            S([_special_values(F64).reshape(7, 1)], ew(fn, "bool"), "special-f64", **nt),
                            S([_between(-3.0, 3.0)((2, 3), F32)], ew(fn, "bool"), "finite-f32", grad=False),
                            S([_ints((3, 2), -5, 5)], ew(fn, "bool"), "int64", grad=False),
                            S([fortran(_special_values(F32)[:6].reshape(2, 3))], ew(fn, "bool"), "noncontig", **nt)], torch_unary(op))
    for op, fn in (("logical_and", np.logical_and), ("logical_or", np.logical_or), ("logical_xor", np.logical_xor)):
        bools = lambda shape: _RNG.random(shape) < 0.5  # noqa: E731
        floats = np.array([[0.0, 1.5, -0.0], [2.0, 0.0, -3.0]], F32)
        t[op] = OpInfo(op, [S([floats, -floats.T.T[:, ::-1].copy()], ew(fn, "bool"), "f32", grad=False),
                            S([bools((3, 4)), bools((3, 4))], ew(fn, "bool"), "bool", grad=False),
                            S([floats, _ints((2, 3), -1, 2)], ew(fn, "bool"), "f32-int64", grad=False),
                            S([floats, bools((3,))], ew(fn, "bool"), "broadcast-bool", grad=False),
                            S([fortran(floats.T.astype(F64)), floats.T], ew(fn, "bool"), "noncontig-f64", grad=False)],
                       torch_binary(op))
    t["atan2"] = OpInfo("atan2", _binary_samples(np.arctan2, _away_from_zero), torch_binary("atan2"))
    t["hypot"] = OpInfo("hypot", _binary_samples(np.hypot, _away_from_zero)[:4], torch_binary("hypot"))
    t["copysign"] = OpInfo("copysign", _binary_samples(np.copysign, _away_from_zero), torch_binary("copysign"))
    for op, fn in (("fmod", np.fmod), ("remainder", np.remainder)):
        signed = _RNG.integers(-9, 10, (3, 4))
        divisor = _RNG.choice([-4, -3, -2, 2, 3, 5], (3, 4))
        t[op] = OpInfo(op, [S(_mod_pair(F32), ew(fn), "f32"), S(_mod_pair(F64), ew(fn), "f64"),
                            S([signed, divisor], ew(fn), "int64", grad=False),
                            S(_noncontig(_mod_pair(F32)), ew(fn), "noncontig")],
                       torch_binary(op))
    return list(t.values())
