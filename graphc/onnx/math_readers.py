"""Readers of ONNX's remaining math ops (see ``readers`` for the contract): the trigonometric
and hyperbolic family, Ceil, IsNaN/IsInf, Mean, Size, Swish/SwiGLU, Shrink, Einsum, Det, the
window functions (Hann, Hamming, Blackman), BitShift and the Bitwise ops.

Semantics are onnx's reference implementation's: ``IsInf`` honours ``detect_negative`` and
``detect_positive``; ``Mean`` is the sum divided by the input count in the inputs' type;
``Shrink`` keeps integer inputs integer; the windows are computed while importing (their size
is a shape operand) with the reference's constants (Hamming's alpha is 25/46, not 0.54).
"""
from __future__ import annotations

import functools

import numpy as np

import graphc as gc  # the torch namespace: its functions are the composites read here (composite.py)

from ..ir.types import dim_mul
from .composite import composing
from .dtypes import DTYPES
from .elementwise_readers import _dtype, scalar
from .shape_readers import _known, _shape

_NUMPY_UNARY = {"cos": np.cos, "sin": np.sin, "tan": np.tan, "acos": np.arccos, "asin": np.arcsin,
                "atan": np.arctan, "cosh": np.cosh, "sinh": np.sinh, "acosh": np.arccosh, "asinh": np.arcsinh,
                "atanh": np.arctanh, "ceil": np.ceil, "isnan": np.isnan}


def _unary(op: str):
    def read(r, args):
        x = args[0]
        if _known(x):
            with np.errstate(all="ignore"):  # NaN outside the domain, as the kernel gives
                return [np.asarray(_NUMPY_UNARY[op](x)).astype(bool if op == "isnan" else np.asarray(x).dtype)]
        return [r.emit(op, [x])]
    return read


def _is_inf(r, args):
    attrs = r.attrs()
    negative, positive = bool(attrs.get("detect_negative", 1)), bool(attrs.get("detect_positive", 1))
    x = args[0]
    found = r.emit("isinf", [x])
    if negative and positive:
        return [found]
    if not negative and not positive:
        return [r.emit("full", [], {"shape": list(_shape(x)), "value": 0.0, "dtype": "bool"})]
    sign = r.emit("gt" if positive else "lt", [x, scalar(r, x, 0.0)])
    return [r.emit("where", [found, sign, found])]  # found and sign


def _mean(r, args):
    total = args[0]
    for x in args[1:]:
        total = r.emit("add", [total, x])
    if len(args) == 1:
        return [total]
    return [r.emit("div", [total, scalar(r, total if not _known(total) else args[0], float(len(args)))])]


def _size(r, args):
    """The element count: an int64 scalar, or the symbolic ``"N*k"`` when the batch dim is in it."""
    count = functools.reduce(dim_mul, _shape(args[0]), 1)
    return [np.asarray(count, object) if isinstance(count, str) else np.asarray(count, np.int64)]


def _swish(r, args):
    x, alpha = args[0], float(r.attrs().get("alpha", 1.0))
    scaled = x if alpha == 1.0 else r.emit("mul", [x, scalar(r, x, alpha)])
    return [r.emit("mul", [x, r.emit("sigmoid", [scaled])])]


def _swiglu(r, args):
    gate, value = args[:2]
    if _shape(gate) != _shape(value):
        raise r.error(f"SwiGLU of shapes {list(_shape(gate))} and {list(_shape(value))}; ONNX's takes equal shapes")
    return [r.emit("mul", [_swish(r, [gate])[0], value])]


def _shrink(r, args):
    """``x + bias`` below ``-lambd``, ``x - bias`` above ``lambd``, 0 between."""
    attrs = r.attrs()
    x, lambd, bias = args[0], float(attrs.get("lambd", 0.5)), float(attrs.get("bias", 0.0))
    below = r.emit("lt", [x, scalar(r, x, -lambd)])
    above = r.emit("gt", [x, scalar(r, x, lambd)])
    zero = scalar(r, x, 0)
    out = r.emit("where", [above, r.emit("sub", [x, scalar(r, x, bias)]), zero])
    return [r.emit("where", [below, r.emit("add", [x, scalar(r, x, bias)]), out])]


def _einsum(r, args):
    equation = r.attrs()["equation"].replace(" ", "")
    with composing(r) as t:
        operands = [t(x) for x in args]
        out = gc.einsum(equation, *operands)
        like = operands[0].dtype
        return [t.value(out.cast(like))]


def _det(r, args):
    with composing(r) as t:
        return [t.value(gc.linalg.det(t(args[0])))]


def _bitwise(op: str):
    def read(r, args):
        if _known(*args):
            fn = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
                  "bitwise_not": np.invert}[op]
            return [fn(*args)]
        return [r.emit(op, args)]
    return read


def _bit_shift(r, args):
    """ONNX's BitShift takes unsigned integers; a shift by the width or more gives 0, as numpy's."""
    direction = r.attrs().get("direction", "")
    if direction not in ("LEFT", "RIGHT"):
        raise r.error(f"BitShift with direction={direction!r}; ONNX's are LEFT and RIGHT")
    op = "bitwise_left_shift" if direction == "LEFT" else "bitwise_right_shift"
    if _known(*args):
        return [(np.left_shift if direction == "LEFT" else np.right_shift)(*args)]
    return [r.emit(op, args)]


def _window(kind: str):
    def read(r, args):
        attrs = r.attrs()
        size = int(np.asarray(r.static(args[0], f"{kind}'s size")).reshape(-1)[0])
        to = DTYPES.get(int(attrs.get("output_datatype", 1)))
        if to is None or not to.is_float:
            raise r.error(f"{kind} with output_datatype {attrs.get('output_datatype')}; graphc computes float windows")
        r.allow([size], np.float64, kind)
        n = np.arange(size, dtype=np.float64)
        period = size if attrs.get("periodic", 1) else size - 1
        with np.errstate(all="ignore"):  # a one-point symmetric window divides by zero, as the reference
            turn = n * (2 * np.pi) / period
            if kind == "HannWindow":
                window = 0.5 - 0.5 * np.cos(turn)
            elif kind == "HammingWindow":
                window = 25 / 46 - (1 - 25 / 46) * np.cos(turn)
            else:
                window = 0.42 - 0.5 * np.cos(turn) + 0.08 * np.cos(2 * turn)
        return [window.astype(to.numpy)]
    return read


MATH_READERS = {
    **{name: _unary(op) for name, op in (("Cos", "cos"), ("Sin", "sin"), ("Tan", "tan"), ("Acos", "acos"),
                                         ("Asin", "asin"), ("Atan", "atan"), ("Cosh", "cosh"), ("Sinh", "sinh"),
                                         ("Acosh", "acosh"), ("Asinh", "asinh"), ("Atanh", "atanh"),
                                         ("Ceil", "ceil"), ("IsNaN", "isnan"))},
    "IsInf": _is_inf, "Mean": _mean, "Size": _size, "Swish": _swish, "SwiGLU": _swiglu, "Shrink": _shrink,
    "Einsum": _einsum, "Det": _det, "HannWindow": _window("HannWindow"), "HammingWindow": _window("HammingWindow"),
    "BlackmanWindow": _window("BlackmanWindow"), "BitShift": _bit_shift, "BitwiseAnd": _bitwise("bitwise_and"),
    "BitwiseOr": _bitwise("bitwise_or"), "BitwiseXor": _bitwise("bitwise_xor"), "BitwiseNot": _bitwise("bitwise_not"),
}
