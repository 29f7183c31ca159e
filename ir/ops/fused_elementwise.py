"""``fused_elementwise``: a chain of elementwise ops run as one loop over memory.

The ``fuse_elementwise`` pass groups elementwise nodes of one shape (the relu6 gradient's
``gt, where, lt, where``; Adam's thirteen ops per parameter) into one node whose ``body`` is a
nested graph of those ops, as a jaxpr's ``cond`` holds its branches. The node holds data only,
so a plan saves and loads as any other; the executor compiles the body into one kernel from the
scalar rules below, or runs the body's nodes one by one with their own kernels.

Each entry of :data:`SCALAR_RULES` is an op's value at one element, ``rule(attrs, dtype) ->
fn(*scalars)``, written so that numba compiles it and so that it gives what the op's numpy kernel
gives, bit for bit, for the IEEE operations (``+ - * /``, sqrt, comparisons, selects): constants
take the output's dtype (float32 stays float32), max and min propagate NaN as numpy's do.
exp, log, tanh, sigmoid and erf come from the compiler's math library (within an ulp or two of
numpy's, and of graphc's float64 erf).
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import ShapeError
from ..registry import Attr, OpDef, get_op, register


# Rules call no helper of their own (numba compiles the lambdas and the numpy functions they
# name, nothing else), so numpy's maximum is spelt out where it is used: the first NaN wins,
# and of two equal values the second (maximum(-0.0, 0.0) is 0.0, as x86's maxps gives it).
def _binary(fn):
    return lambda attrs, dtype: fn


def _relu(attrs, dtype):
    zero = dtype.type(0)
    return lambda x: x if (x > zero or x != x) else zero  # np.maximum(x, 0): max(-0.0, 0) is 0


def _relu_grad(attrs, dtype):
    zero, one = dtype.type(0), dtype.type(1)
    return lambda g, y: g * one if y > zero else g * zero  # g * (y > 0): 0 * inf is NaN as in numpy


def _sigmoid_grad(attrs, dtype):
    one = dtype.type(1)
    return lambda g, y: ((one - y) * y) * g  # the numpy kernel's order of operations


def _tanh_grad(attrs, dtype):
    one = dtype.type(1)
    return lambda g, y: (one - y * y) * g


def _hardtanh(attrs, dtype):
    low, high = dtype.type(attrs["min_val"]), dtype.type(attrs["max_val"])

    # np.clip keeps x on ties (clip(-0.0, 0, 6) is -0.0) and NaN
    return lambda x: low if x < low else (high if x > high else x)


def _leaky_relu(attrs, dtype):
    slope = dtype.type(attrs["negative_slope"])
    if slope <= 1:  # the numpy kernel: maximum(x, slope * x), or minimum for a slope above 1
        return lambda x: x if (x > x * slope or x != x) else x * slope
    return lambda x: x if (x < x * slope or x != x) else x * slope


def _cast(attrs, dtype):
    if dtype == np.bool_:
        return lambda x: x != 0
    convert = dtype.type
    return lambda x: convert(x)


def _div(attrs, dtype):
    return (lambda a, b: a / b) if attrs["rounding_mode"] is None else None


def _sigmoid(attrs, dtype):
    one = dtype.type(1)
    # the numpy kernel: 1 / (1 + exp(-x)), and exp(x) below the point where exp(-x) overflows
    overflow = dtype.type(1.0 - math.log(float(np.finfo(dtype).max)))
    return lambda x: np.exp(x) if x < overflow else one / (one + np.exp(-x))


def _erf(attrs, dtype):
    return lambda x: math.erf(x)  # numba: the C library's erff for float32 (within an ulp)


def _unary_math(name):
    def rule(attrs, dtype):
        fn = getattr(np, name)
        return lambda x: fn(x)
    return rule


SCALAR_RULES = {
    "add": _binary(lambda a, b: a + b), "sub": _binary(lambda a, b: a - b), "mul": _binary(lambda a, b: a * b),
    "div": _div, "neg": _binary(lambda a: -a), "abs": _binary(lambda a: abs(a)),
    "maximum": _binary(lambda a, b: a if (a > b or a != a) else b),
    "minimum": _binary(lambda a, b: a if (a < b or a != a) else b),
    "gt": _binary(lambda a, b: a > b), "lt": _binary(lambda a, b: a < b), "ge": _binary(lambda a, b: a >= b),
    "le": _binary(lambda a, b: a <= b), "eq": _binary(lambda a, b: a == b), "ne": _binary(lambda a, b: a != b),
    "where": _binary(lambda c, a, b: a if c else b),
    "relu": _relu, "relu_grad": _relu_grad, "sigmoid_grad": _sigmoid_grad, "tanh_grad": _tanh_grad, "hardtanh": _hardtanh, "leaky_relu": _leaky_relu, "cast": _cast,
    "sqrt": _unary_math("sqrt"), "exp": _unary_math("exp"), "log": _unary_math("log"), "tanh": _unary_math("tanh"),
    "sigmoid": _sigmoid, "erf": _erf,
}
# computed exactly as numpy's kernels compute them (IEEE arithmetic, selects): fused and unfused
# plans agree bit for bit when a group uses only these
EXACT = frozenset(SCALAR_RULES) - {"exp", "log", "tanh", "sigmoid", "erf"}
DTYPES = frozenset({"float32", "float64", "bool"})
MAX_OUTPUTS = 8  # outputs one loop stores (Adam's group has three)


def scalar_rule(node):
    """The node's scalar function, or None when it cannot join a fused loop."""
    rule = SCALAR_RULES.get(node.op)
    return None if rule is None else rule(node.attrs, node.outputs[0].type.dtype.numpy)


def _infer(in_types, attrs):
    body = attrs["body"]
    want = [v.type for v in body.inputs]
    if list(in_types) != want:
        raise ShapeError(f"fused_elementwise: its body reads ({', '.join(map(str, want))}), "
                         f"got ({', '.join(map(str, in_types))})")
    check_body(body)
    return [v.type for v in body.outputs]


def fusible(node) -> bool:
    """An elementwise node with a scalar rule, of a supported dtype, whose inputs have its shape
    or one element: what the fuse_elementwise pass groups and what a loaded body may hold."""
    if len(node.outputs) != 1 or get_op(node.op).effects != "pure" or scalar_rule(node) is None:
        return False
    out = node.outputs[0].type
    if is_scalar_like(out.shape) or any(v.type.dtype.name not in DTYPES for v in [*node.inputs, node.outputs[0]]):
        return False
    if any(v.type.shape != out.shape and not is_scalar_like(v.type.shape) for v in node.inputs):
        return False
    if node.op == "cast":
        return True
    operands = node.inputs[1:] if node.op == "where" else node.inputs
    if node.op == "where" and node.inputs[0].type.dtype.name != "bool":
        return False
    return len({v.type.dtype for v in operands}) == 1  # no mixed-dtype promotion inside a loop


def check_body(body) -> None:
    """A body read from a file holds fusible nodes only (so the loop builder knows every op it
    meets, in the dtypes its rules assume), each output one of its nodes'."""
    produced = {id(v) for n in body.nodes for v in n.outputs}
    for node in body.nodes:
        if node.op not in SCALAR_RULES or not fusible(node):
            raise ShapeError(f"fused_elementwise: op {node.op!r} cannot be fused (its dtypes or shapes, or the op)")
    if not body.outputs or len(body.outputs) > MAX_OUTPUTS or any(id(v) not in produced for v in body.outputs):
        raise ShapeError(f"fused_elementwise: its body needs 1..{MAX_OUTPUTS} outputs made by its nodes")
    if body.state or body.constants:
        raise ShapeError("fused_elementwise: its body holds no state or constants (they are its inputs)")
    shape = body.outputs[0].type.shape
    if any(v.type.shape != shape for n in body.nodes for v in n.outputs) or any(
            v.type.shape != shape and not is_scalar_like(v.type.shape) for v in body.inputs):
        raise ShapeError(f"fused_elementwise: every op makes shape {shape}; inputs have it or one element")


def is_scalar_like(shape) -> bool:
    """One element (a 0-d constant, or a (1, 1) one), broadcast to every element of the loop."""
    return all(d == 1 for d in shape)


register(OpDef(
    "fused_elementwise", _infer, attrs={"body": Attr("graph")}, inputs=(1, None),
    no_gradient="fused_elementwise is made after autodiff (the fuse_elementwise pass runs last)",
    doc="elementwise ops of one shape run as one loop; body: the ops, as a nested graph"))
