"""Op table entries of ir/ops/bitwise.py: integer and bool samples (no gradient: the values
are integers), references from numpy's ufuncs applied to the promoted inputs, PyTorch's
functions of the same names for parity; inputs from this module's own seeded generator."""
from __future__ import annotations

import numpy as np

from op_table import OpInfo, S, fortran, torch_binary, torch_unary

_RNG = np.random.default_rng(3838)


def _ref(fn):
    def ref(ins, attrs):
        dt = np.result_type(*ins)  # these samples mix only types numpy promotes as PyTorch does
        return [np.asarray(fn(*(np.asarray(a).astype(dt) for a in ins))).astype(dt)]
    return ref


def _ints(shape, dtype, lo=-100, hi=100):
    return _RNG.integers(lo, hi, shape).astype(dtype)


def _logic_samples(fn):
    bools = lambda shape: _RNG.random(shape) < 0.5  # noqa: E731
    return [S([_ints((3, 4), np.int64), _ints((3, 4), np.int64)], _ref(fn), "int64", grad=False),
            S([_ints((2, 3), np.int32), _ints((3,), np.int32)], _ref(fn), "broadcast-int32", grad=False),
            S([_ints((2, 3), np.uint8, 0, 255), _ints((2, 3), np.uint8, 0, 255)], _ref(fn), "uint8", grad=False),
            S([bools((3, 4)), bools((3, 4))], _ref(fn), "bool", grad=False),
            S([_ints((2, 3), np.int16), _ints((2, 3), np.int64)], _ref(fn), "int16-int64", grad=False),
            S([fortran(_ints((4, 3), np.int64)), _ints((4, 3), np.int64)], _ref(fn), "noncontig", grad=False)]


def _shift_samples(fn):
    return [S([_ints((3, 4), np.int64), _ints((3, 4), np.int64, 0, 70)], _ref(fn), "int64-past-the-width", grad=False),
            S([_ints((2, 3), np.int8), _ints((3,), np.int8, 0, 9)], _ref(fn), "broadcast-int8", grad=False),
            S([_ints((2, 3), np.uint8, 0, 255), _ints((2, 3), np.uint8, 0, 9)], _ref(fn), "uint8", grad=False),
            S([_ints((2, 3), np.int32), _ints((2, 3), np.int32, -3, 0)], _ref(fn), "negative-amounts", grad=False),
            S([fortran(_ints((4, 3), np.int64)), _ints((4, 3), np.int64, 0, 8)], _ref(fn), "noncontig", grad=False)]


def bitwise_table():
    out = [OpInfo(op, _logic_samples(fn), torch_binary(op))
           for op, fn in (("bitwise_and", np.bitwise_and), ("bitwise_or", np.bitwise_or),
                          ("bitwise_xor", np.bitwise_xor))]
    out += [OpInfo(op, _shift_samples(fn), torch_binary(op))
            for op, fn in (("bitwise_left_shift", np.left_shift), ("bitwise_right_shift", np.right_shift))]
    out.append(OpInfo("bitwise_not", [
        S([_ints((3, 4), np.int64)], _ref(np.invert), "int64", grad=False),
        S([_ints((2, 3), np.uint8, 0, 255)], _ref(np.invert), "uint8", grad=False),
        S([_RNG.random((3, 4)) < 0.5], _ref(np.invert), "bool", grad=False),
        S([fortran(_ints((4, 3), np.int16))], _ref(np.invert), "noncontig-int16", grad=False)], torch_unary("bitwise_not")))
    return out
