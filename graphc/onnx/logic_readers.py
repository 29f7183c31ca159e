"""Readers of ``Mod``, ``And``/``Or``/``Xor``, ``CastLike`` and ``Pad`` (constant mode): the
ops PyTorch's TorchScript exporter writes around its attention (``Mod`` of head counts) and
onnx's function expansion of ``Attention`` uses (the ``test_attention_*_expanded`` backend
cases: ``CastLike`` of ``-inf``, ``And`` of the grouped-query conditions, ``Pad`` of a short
mask). Same contract as ``readers``: known arrays are computed on at once, with ONNX's rules.
"""
from __future__ import annotations

import numpy as np

from ..ir.types import DType
from .elementwise_readers import _dtype, _static_operands
from .quant_readers import low_precision_cast
from .shape_readers import _known, _shape


def _mod(r, args):
    """``fmod=0``: the remainder takes the divisor's sign (Python's ``%``; onnx's spec asks for
    fmod=1 on floats, but its reference and backend cases take floats with fmod=0 as numpy's
    ``mod``: graphc's ``remainder``); ``fmod=1``: the dividend's (C's ``fmod``). Integers are
    built as ``a - q * b`` with ``q`` the quotient rounded down or toward zero."""
    a, b = args
    fmod = bool(r.attrs().get("fmod", 0))
    if not fmod and (_dtype(r, a).kind == "f" or _dtype(r, b).kind == "f") and not _known(a, b):
        return [r.emit("remainder", [a, b])]  # floats with fmod=0: numpy's mod, as onnx's reference
    if _known(a, b):
        _static_operands(r, "mod", a, b)
        if _dtype(r, b).kind in "iu" and np.any(np.asarray(b) == 0):
            raise r.error("integer Mod by zero")
        return [(np.fmod if fmod else np.mod)(a, b)]
    integer = _dtype(r, a).kind in "iu"
    if integer:
        quotient = r.emit("div", [a, b], {"rounding_mode": "trunc" if fmod else "floor"})
    else:
        quotient = r.emit("trunc", [r.emit("div", [a, b])])
    return [r.emit("sub", [a, r.emit("mul", [quotient, b])])]


def _logical(op: str):
    def read(r, args):
        a, b = args
        if _dtype(r, a) != np.bool_ or _dtype(r, b) != np.bool_:
            raise r.error(f"{op} of {_dtype(r, a)} and {_dtype(r, b)}; ONNX's takes booleans")
        if _known(a, b):
            _static_operands(r, op, a, b)
            return [{"And": np.logical_and, "Or": np.logical_or, "Xor": np.logical_xor}[op](a, b)]
        if op == "Xor":
            return [r.emit("ne", [a, b])]
        # a and b = where(a, b, a); a or b = where(a, a, b) (graphc has no logical binary ops)
        return [r.emit("where", [a, b, a] if op == "And" else [a, a, b])]
    return read


def _cast_like(r, args):
    x, like = args[:2]
    target = _dtype(r, like)
    to = DType.from_any(target)
    if to.is_low_precision and to not in (DType.float16, DType.bfloat16):  # float8/float4: onnx's rules
        attrs = r.attrs()
        return [low_precision_cast(r, x, to, bool(attrs.get("saturate", 1)), attrs.get("round_mode", "up"))]
    if _known(x):
        return [x if np.asarray(x).dtype == object else np.asarray(x).astype(target)]
    if _dtype(r, x) == target:
        return [x]
    return [r.emit("cast", [x], {"dtype": DType.from_any(target).name})]


def _pad(r, args):
    """Constant-mode ``Pad`` with non-negative pads: known arrays with ``np.pad``, graph values
    by concatenating ``full`` blocks (a symbolic dim may be padded along, not padded itself)."""
    x, pads, value = (list(args) + [None, None, None])[:3]
    axes_arg = args[3] if len(args) > 3 else None
    mode = r.attrs().get("mode", "constant")
    if mode != "constant":
        raise r.error(f"Pad with mode={mode!r}; graphc imports constant padding")
    rank = len(_shape(x))
    pads = [int(p) for p in np.asarray(r.static(pads, "Pad's pads")).reshape(-1)]
    axes = list(range(rank)) if axes_arg is None else [int(a) % rank for a in r.static(axes_arg, "Pad's axes")]
    if len(pads) != 2 * len(axes) or any(p < 0 for p in pads):
        raise r.error(f"Pad with pads {pads} for axes {axes}; graphc pads by non-negative amounts")
    fill = 0 if value is None else np.asarray(r.static(value, "Pad's constant_value")).reshape(-1)[0]
    if _known(x):
        widths = [(0, 0)] * rank
        for k, axis in enumerate(axes):
            widths[axis] = (pads[k], pads[k + len(axes)])
        return [np.pad(x, widths, constant_values=fill)]
    for k, axis in enumerate(axes):
        before, after = pads[k], pads[k + len(axes)]
        parts = []
        for amount in (before, after):
            shape = list(x.type.shape)
            shape[axis] = amount
            parts.append(None if not amount else r.emit(
                "full", [], {"shape": shape, "value": float(fill), "dtype": x.type.dtype.name}))
        if parts[0] is not None or parts[1] is not None:
            x = r.emit("concat", [p for p in (parts[0], x, parts[1]) if p is not None], {"dim": axis})
    return [x]


LOGIC_READERS = {"Mod": _mod, "And": _logical("And"), "Or": _logical("Or"), "Xor": _logical("Xor"),
                 "CastLike": _cast_like, "Pad": _pad}
