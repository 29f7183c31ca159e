"""Arithmetic and comparisons on shapes that hold symbolic dims, while importing.

A shape read from a graph value with ``Shape`` is an object array whose symbolic entries are
graphc dims (``"N"``, ``"N*64"``). Exporters compute on such shapes: PyTorch's TorchScript
exporter writes ``Where(Equal(shape, -1), 1, shape)`` before an ``Expand`` (Vision
Transformers' class token), Swin multiplies the batch by the number of windows. These helpers
compute what is certain for every size the symbols can take (a dim is never negative): ``N * 4``
is ``"N*4"``, ``"N*4" / 4`` is ``"N"``, ``N == -1`` is False, ``N + 0`` is ``N``. Anything that
depends on the symbol's size (``N == 3``, ``N + 1``) returns None, and the reader refuses.

>>> symbolic_binary("mul", np.array(["N", 3], object), np.array([4, 2]))
array(['N*4', 6], dtype=object)
>>> symbolic_binary("eq", np.array(["N", -1, 5], object), np.array(-1)).tolist()
[False, True, False]
>>> symbolic_binary("add", np.array(["N"], object), np.array([1])) is None
True
"""
from __future__ import annotations

import operator

import numpy as np

from ..ir.types import dim_div, dim_mul

_INT_OPS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "eq": operator.eq, "ne": operator.ne,
            "lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge,
            "maximum": max, "minimum": min}
COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")


class _Unknown(Exception):
    """The answer depends on the symbol's size: the reader refuses."""


def _is_dim(x) -> bool:
    return isinstance(x, str)


def _one(op: str, a, b):
    if not _is_dim(a) and not _is_dim(b):
        return _INT_OPS[op](int(a), int(b)) if op in _INT_OPS else _integer_division(op, int(a), int(b))
    if op == "mul":
        if any(not _is_dim(v) and int(v) < 0 for v in (a, b)):
            raise _Unknown
        return dim_mul(a, b)
    if op in ("div", "floor_div"):
        if _is_dim(b) or int(b) <= 0:
            raise _Unknown
        quotient = dim_div(a, int(b))
        if quotient is None:
            raise _Unknown
        return quotient
    if op == "add" and not _is_dim(a) and int(a) == 0:
        return b
    if op in ("add", "sub") and not _is_dim(b) and int(b) == 0:
        return a
    if op == "sub" and a == b:
        return 0
    if op in COMPARISONS:
        return _compare(op, a, b)
    if op in ("maximum", "minimum"):
        symbolic, number = (a, b) if _is_dim(a) else (b, a)
        if _is_dim(number) or int(number) > 0:
            raise _Unknown
        return symbolic if op == "maximum" else number
    raise _Unknown


def _integer_division(op: str, a: int, b: int) -> int:
    if b == 0:
        raise _Unknown
    quotient = a // b
    if op == "div" and quotient < 0 and a % b:  # ONNX's integer Div truncates toward zero
        quotient += 1
    return quotient


def _compare(op: str, a, b) -> bool:
    """A comparison that holds whatever size the symbols take (a dim is never negative)."""
    if _is_dim(a) and _is_dim(b):
        if a != b:
            raise _Unknown
        return op in ("eq", "le", "ge")
    flipped = {"lt": "gt", "gt": "lt", "le": "ge", "ge": "le"}.get(op, op)
    symbolic, number, op = (a, int(b), op) if _is_dim(a) else (b, int(a), flipped)
    if number >= 0:
        raise _Unknown  # the dim may be that number, or either side of it
    return {"eq": False, "ne": True, "gt": True, "ge": True, "lt": False, "le": False}[op]


def symbolic_binary(op: str, a, b):
    """``op`` of two known arrays, one of them holding symbolic dims: the result (object array,
    or bool for comparisons), or None when it depends on a symbol's size."""
    a, b = np.asarray(a, object), np.asarray(b, object)
    a, b = np.broadcast_arrays(a, b)
    try:
        out = np.array([_one(op, x, y) for x, y in zip(a.reshape(-1).tolist(), b.reshape(-1).tolist())],
                       object).reshape(a.shape)
    except _Unknown:
        return None
    if op in COMPARISONS:
        return out.astype(bool)
    if not any(_is_dim(v) for v in out.reshape(-1)):
        return out.astype(np.int64)
    return out
