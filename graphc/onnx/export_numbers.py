"""ONNX export of graphc's number semantics: PyTorch's dtype promotion and ``div``'s rounding
modes, which ONNX's ops do not share.

ONNX's elementwise ops take one dtype for all their inputs (``Add(int64, float)`` is invalid)
and its float math refuses integers, while graphc promotes as PyTorch does; so an input whose
dtype is not the one the node computes in gets a ``Cast`` first. ONNX's integer ``Div``
truncates where graphc's true division gives floats, and ONNX has no floor or trunc division
of floats: :func:`write_div` spells each rounding mode out in ONNX ops, with the same results.
"""
from __future__ import annotations

import numpy as np

from ..ir.ops._shapes import result_dtype
from ..ir.types import DType
from .dtypes import ELEMENT_TYPES


# op -> the input positions that must have the output's dtype in ONNX (None: all of them)
_OUTPUT_DTYPE_INPUTS = {op: None for op in ("add", "sub", "mul", "div", "maximum", "minimum", "exp", "log", "sqrt",
                                            "rsqrt", "tanh", "sigmoid", "erf", "log1p", "neg", "abs", "relu",
                                            "hardtanh")}
_OUTPUT_DTYPE_INPUTS.update({"where": (1, 2), "pow": (0,)})
_COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")  # both inputs in their promoted dtype


def cast_inputs(w, node, ins: list) -> list:
    """``ins`` with a ``Cast`` in front of each input whose dtype is not the one ``node``
    computes in (the promoted dtype PyTorch's rules gave it)."""
    if node.op in _COMPARISONS:
        target, positions = result_dtype([v.type for v in node.inputs]), None
    elif node.op in _OUTPUT_DTYPE_INPUTS:
        target, positions = node.outputs[0].type.dtype, _OUTPUT_DTYPE_INPUTS[node.op]
    else:
        return ins
    out = list(ins)
    for i, value in enumerate(node.inputs):
        if (positions is None or i in positions) and value.type.dtype is not target:
            out[i] = cast(w, node, ins[i], target)
    return out


def cast(w, node, name: str, dtype: DType) -> str:
    result = w.fresh("cast")
    w.node("Cast", [name], [result], node.meta, to=ELEMENT_TYPES[dtype])
    return result


def write_div(w, node, ins, out) -> None:
    """``div`` in each rounding mode, with PyTorch's results."""
    mode, dtype = node.attrs.get("rounding_mode"), node.outputs[0].type.dtype
    if mode is None or mode == "trunc" and not dtype.is_float:  # ONNX's integer Div truncates
        w.node("Div", ins, [out], node.meta)
    elif mode == "trunc":  # trunc(q) = sign(q) * floor(|q|)
        q, size, whole, sign = (w.fresh(n) for n in ("quotient", "abs", "floor", "sign"))
        w.node("Div", ins, [q], node.meta)
        w.node("Abs", [q], [size], node.meta)
        w.node("Floor", [size], [whole], node.meta)
        w.node("Sign", [q], [sign], node.meta)
        w.node("Mul", [sign, whole], [out], node.meta)
    elif not dtype.is_float:  # a - mod(a, b) is a multiple of b; ONNX's integer Mod takes the divisor's sign
        remainder, multiple = w.fresh("mod"), w.fresh("multiple")
        w.node("Mod", ins, [remainder], node.meta)
        w.node("Sub", [ins[0], remainder], [multiple], node.meta)
        w.node("Div", [multiple, ins[1]], [out], node.meta)
    else:
        _float_floor_div(w, node, ins, out, dtype)


def _float_floor_div(w, node, ins, out, dtype: DType) -> None:
    """PyTorch's (and numpy's) float floor division: q = (a - fmod(a, b)) / b, one less where
    the remainder's sign differs from b's, then rounded to the nearest whole number (so
    1 // 0.1 is 9, where floor(1 / 0.1) is 10); a / b where b is 0."""
    a, b = ins
    zero, half = (w.constant(np.array(v, dtype.numpy), n) for v, n in ((0, "zero"), (0.5, "half")))

    def emit(op, inputs, **attrs):
        name = w.fresh(op.lower())
        w.node(op, inputs, [name], node.meta, **attrs)
        return name

    remainder = emit("Mod", [a, b], fmod=1)
    exact = emit("Div", [emit("Sub", [a, remainder]), b])
    signs_differ = emit("Xor", [emit("Less", [b, zero]), emit("Less", [remainder, zero])])
    adjust = emit("And", [emit("Not", [emit("Equal", [remainder, zero])]), signs_differ])
    q = emit("Sub", [exact, cast(w, node, adjust, dtype)])
    whole = emit("Floor", [q])
    rounded = emit("Add", [whole, cast(w, node, emit("Greater", [emit("Sub", [q, whole]), half]), dtype)])
    w.node("Where", [emit("Equal", [b, zero]), emit("Div", [a, b]), rounded], [out], node.meta)


def write_sign(w, node, ins, out) -> None:
    """ONNX's Sign has no bool form; the sign of a bool is itself."""
    op = "Identity" if node.inputs[0].type.dtype is DType.bool else "Sign"
    w.node(op, ins, [out], node.meta)
