"""Readers of ONNX's elementwise ops (see ``readers`` for the contract).

ONNX's arithmetic keeps its inputs' element type where PyTorch's promotes: integer ``Div``
truncates toward zero and stays integer (graphc's ``div`` with ``rounding_mode="trunc"``),
``Pow`` gives the base's type whatever the exponent's, and ``Clip`` takes integers. Each reader
computes on known arrays (initializers, shapes) with the same rules, so a folded constant and
the plan's kernels agree, and both agree with onnx's reference evaluator.
"""
from __future__ import annotations

import math

import numpy as np

import graphc as gc  # ones_like for Dropout's mask (composite.py)
from ..ir.graph import Value
from ..ir.types import DType
from .composite import composing
from .dtypes import DTYPES as _DTYPES, type_name
from .quant_readers import low_precision_cast
from .shape_readers import _known
from .symbolic_shapes import symbolic_binary

_NUMPY_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "eq": np.equal, "lt": np.less,
                 "gt": np.greater, "le": np.less_equal, "ge": np.greater_equal, "maximum": np.maximum,
                 "minimum": np.minimum}


def _dtype(r, x) -> np.dtype:
    return np.asarray(x).dtype if _known(x) else np.dtype(r.value(x).type.dtype.numpy)


def _static_operands(r, op: str, a, b) -> None:
    """Known operands of shape arithmetic: refuse the symbolic batch dim, bound the result's size."""
    if np.asarray(a).dtype == object or np.asarray(b).dtype == object:
        raise r.error(f"{op} on a shape that holds the batch dim; graphc keeps such shapes symbolic "
                      "only through Shape, Gather, Concat, Unsqueeze and Reshape")
    r.allow(np.broadcast_shapes(np.shape(a), np.shape(b)), np.result_type(a, b), op)


def _binary(op: str):
    def read(r, args):
        a, b = args
        if _known(a, b):  # shape arithmetic, done now
            symbolic = _on_symbolic_shape(op, a, b)
            if symbolic is not None:
                return [symbolic]
            _static_operands(r, op, a, b)
            return [_NUMPY_BINARY[op](a, b)]
        return [r.emit(op, [a, b])]
    return read


def _on_symbolic_shape(op: str, a, b):
    """``op`` on a shape holding symbolic dims, where the answer holds for every size
    (symbolic_shapes); None for numeric operands or an answer that depends on a size."""
    if np.asarray(a).dtype != object and np.asarray(b).dtype != object:
        return None
    return symbolic_binary(op, a, b)


def truncated_division(a, b) -> np.ndarray:
    """ONNX's integer Div on known arrays: the quotient rounded toward zero, in integer
    arithmetic (a float64 quotient would round int64 values over 2**53).

    >>> truncated_division(np.array([7, -7, 2**62 + 1]), np.array([2, 2, 1])).tolist()
    [3, -3, 4611686018427387905]
    """
    quotient = np.floor_divide(a, b)
    inexact_negative = (np.remainder(a, b) != 0) & ((np.asarray(a) < 0) != (np.asarray(b) < 0))
    return (quotient + inexact_negative).astype(quotient.dtype)


def _div(r, args):
    a, b = args
    integer = _dtype(r, a).kind in "iu"
    if _known(a, b):
        symbolic = _on_symbolic_shape("div", a, b)  # a shape's dims are integers (ONNX's int64 Div)
        if symbolic is not None:
            return [symbolic]
        _static_operands(r, "div", a, b)
        if not integer:
            return [np.divide(a, b)]
        if np.any(np.asarray(b) == 0):  # the plan's kernel refuses it too (ONNX leaves it undefined)
            raise r.error("integer Div by zero")
        return [truncated_division(a, b)]
    return [r.emit("div", [a, b], {"rounding_mode": "trunc"} if integer else None)]


def _pow(r, args):
    """The result has the base's type. An integer base with a float exponent is computed in
    float64 and cast back, as onnx's reference does (2 ** 0.5 is 1)."""
    base, exponent = args
    base_dtype = _dtype(r, base)
    if _known(base, exponent):
        _static_operands(r, "pow", base, exponent)
        if base_dtype.kind in "iu" and _dtype(r, exponent).kind in "iu":
            return [integer_power(np.asarray(base), np.asarray(exponent))]
        with np.errstate(all="ignore"):  # overflow to inf, as the plan's kernels
            return [np.power(base, exponent).astype(base_dtype)]
    if base_dtype.kind in "iu" and _dtype(r, exponent).kind == "f":
        wide = [r.emit("cast", [x], {"dtype": "float64"}) for x in (base, exponent)]
        return [r.emit("cast", [r.emit("pow", wide)], {"dtype": DType.from_any(base_dtype).name})]
    out = r.emit("pow", [base, exponent])
    if np.dtype(out.type.dtype.numpy) != base_dtype:  # a float32 base to a float64 power stays float32
        out = r.emit("cast", [out], {"dtype": DType.from_any(base_dtype).name})
    return [out]


def integer_power(base: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    """Integer Pow on known arrays with the plan kernel's rule (PyTorch's, and what
    onnxruntime's truncated std::pow gives): a negative exponent gives 0, except 1 for a base
    of 1 and +-1 for a base of -1 (numpy raises instead).

    >>> integer_power(np.array([2, 1, -1, 3]), np.array([3, -2, -3, -1])).tolist()
    [8, 1, -1, 0]
    """
    negative = exponent < 0
    powered = np.power(base, np.where(negative, 0, exponent).astype(exponent.dtype))
    minus_one = np.where(np.bitwise_and(exponent, 1) == 1, -1, 1)  # (-1) ** e by the parity of e
    below = np.where(base == 1, 1, np.where(base == -1, minus_one, 0))
    return np.where(negative, below, powered).astype(base.dtype)


def _variadic(op: str):
    def read(r, args):
        out = args[0]
        for other in args[1:]:
            out = _binary(op)(r, [out, other])[0]
        return [out]
    return read


def _unary(op: str):
    def read(r, args):
        if op == "logical_not" and _known(args[0]):  # a condition on shapes (onnx's expanded Attention)
            return [np.logical_not(args[0])]
        return [r.emit(op, args[:1])]
    return read


def _identity(r, args):
    return [args[0]]


def _dropout(r, args):
    """The identity, and its mask all True (what onnx's reference gives out of training, or with
    ratio 0); the mask is bool from Dropout-10 on, graphc reads no earlier mask."""
    if len(args) > 2 and args[2] is not None and bool(np.asarray(r.static(args[2], "training_mode"))):
        ratio = 0.5 if len(args) < 2 or args[1] is None else float(np.asarray(r.static(args[1], "ratio")))
        if ratio != 0.0:
            raise r.error("Dropout in training mode: an imported model is an inference plan")
    if len([name for name in r.node.output if name]) < 2:
        return [args[0]]
    if r.version < 10:
        raise r.error(f"Dropout-{r.version}'s mask output (of the input's type, before Dropout-10's bool mask)")
    with composing(r) as t:
        return [args[0], t.value(gc.ones_like(t(args[0]), dtype="bool"))]


def scalar(r, x, value) -> np.ndarray:
    """``value`` as a 0-d array of ``x``'s dtype (a constant operand for an elementwise op)."""
    return np.asarray(value, dtype=_dtype(r, x))


def _reciprocal(r, args):
    return [r.emit("div", [scalar(r, args[0], 1.0), args[0]])]  # with a Sqrt before it, fuse_rsqrt makes rsqrt


def _leaky_relu(r, args):
    return [r.emit("leaky_relu", args[:1], {"negative_slope": float(r.attrs().get("alpha", 0.01))})]


def _hard_sigmoid(r, x, alpha: float, beta: float) -> Value:
    scaled = r.emit("add", [r.emit("mul", [x, scalar(r, x, alpha)]), scalar(r, x, beta)])
    return r.emit("hardtanh", [scaled], {"min_val": 0.0, "max_val": 1.0})


def _hardsigmoid_reader(r, args):
    a = r.attrs()
    return [_hard_sigmoid(r, args[0], float(a.get("alpha", 0.2)), float(a.get("beta", 0.5)))]


def _hardswish(r, args):
    return [r.emit("mul", [args[0], _hard_sigmoid(r, args[0], 1 / 6, 0.5)])]


def _gelu(r, args):
    x = args[0]
    if r.attrs().get("approximate", "none") == "tanh":
        cube = r.emit("pow", [x, scalar(r, x, 3.0)])
        inner = r.emit("add", [x, r.emit("mul", [scalar(r, x, 0.044715), cube])])
        gate = r.emit("tanh", [r.emit("mul", [inner, scalar(r, x, math.sqrt(2 / math.pi))])])
    else:
        gate = r.emit("erf", [r.emit("mul", [x, scalar(r, x, 1 / math.sqrt(2))])])
    half = r.emit("mul", [x, scalar(r, x, 0.5)])
    return [r.emit("mul", [half, r.emit("add", [gate, scalar(r, x, 1.0)])])]


def _clip(r, args):
    """Known float bounds on a float tensor are ``hardtanh`` (one clip pass); integer tensors
    and bounds computed by the graph are ``maximum`` then ``minimum``."""
    x, low, high = (list(args) + [None, None])[:3]
    a = r.attrs()
    low = a.get("min") if low is None else low
    high = a.get("max") if high is None else high
    if low is not None and high is not None and _known(low, high) and _dtype(r, x).kind == "f":
        return [r.emit("hardtanh", [x], {"min_val": float(low), "max_val": float(high)})]
    for op, bound in (("maximum", low), ("minimum", high)):
        if bound is not None:
            x = _binary(op)(r, [x, scalar(r, x, bound) if _known(bound) else bound])[0]
    return [x]


def _where(r, args):
    if _known(*args):
        r.allow(np.broadcast_shapes(*(np.shape(a) for a in args)), np.result_type(*args[1:]), "Where")
        return [np.where(*args)]
    return [r.emit("where", args)]


def _cast(r, args):
    to = r.attrs()["to"]
    known = _DTYPES.get(to)
    if known is None:
        raise r.error(f"Cast to {type_name(to)}, which graphc cannot hold")
    dtype = known.numpy
    x = args[0]
    if known.is_low_precision and known not in (DType.float16, DType.bfloat16):  # float8/float4: onnx's rules
        attrs = r.attrs()
        return [low_precision_cast(r, x, known, bool(attrs.get("saturate", 1)), attrs.get("round_mode", "up"))]
    if _known(x):
        return [x if np.asarray(x).dtype == object else np.asarray(x).astype(dtype)]
    return [r.emit("cast", [x], {"dtype": DType.from_any(np.dtype(dtype)).name})]


ELEMENTWISE_READERS = {
    "Add": _binary("add"), "Sub": _binary("sub"), "Mul": _binary("mul"), "Div": _div, "Pow": _pow,
    "Equal": _binary("eq"), "Less": _binary("lt"), "Greater": _binary("gt"), "LessOrEqual": _binary("le"),
    "GreaterOrEqual": _binary("ge"), "Max": _variadic("maximum"), "Min": _variadic("minimum"),
    "Sum": _variadic("add"), "Where": _where, "Not": _unary("logical_not"), "Relu": _unary("relu"),
    "Sigmoid": _unary("sigmoid"), "Tanh": _unary("tanh"), "Exp": _unary("exp"), "Log": _unary("log"),
    "Sqrt": _unary("sqrt"), "Neg": _unary("neg"), "Abs": _unary("abs"), "Erf": _unary("erf"),
    "Sign": _unary("sign"), "Reciprocal": _reciprocal, "Identity": _identity, "Dropout": _dropout, "Cast": _cast,
    "LeakyRelu": _leaky_relu, "HardSigmoid": _hardsigmoid_reader, "HardSwish": _hardswish, "Gelu": _gelu,
    "Clip": _clip,
}
