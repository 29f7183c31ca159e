"""The op registry: one :class:`OpDef` per op, holding everything about it in one place.

An OpDef keeps the attr schema, the shape/dtype rule, the vjp rule and the op's effects
together (as JAX keeps a primitive's rules together). Backend kernel tables in
``executor/backends`` use the same names as keys.

The vjp slot takes ``(b, node, cotangents)`` where ``b`` is an :class:`ir.builder.Builder`
that emits IR nodes, ``cotangents`` has one Value (or None) per node output, and it returns
one cotangent Value (or None) per node input.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .errors import GraphcError, ShapeError
from .types import DType

REQUIRED = object()

# Attr kinds: each names a plain-data type the plan file can hold.
_ATTR_CHECKS = {
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "bool": lambda v: isinstance(v, bool),
    "str": lambda v: isinstance(v, str),
    "ints": lambda v: isinstance(v, (list, tuple)) and all(_ATTR_CHECKS["int"](x) for x in v),
    "dims": lambda v: isinstance(v, (list, tuple)) and all(_ATTR_CHECKS["int"](x) or isinstance(x, str) for x in v),
    "dtype": lambda v: isinstance(v, str) and v in {d.name for d in DType},
    "slices": lambda v: isinstance(v, (list, tuple)) and all(
        isinstance(s, (list, tuple)) and len(s) == 3 and all(x is None or _ATTR_CHECKS["int"](x) for x in s) for s in v),
}


@dataclass(frozen=True)
class Attr:
    kind: str
    default: object = REQUIRED
    optional: bool = False  # the value may also be None


@dataclass(frozen=True)
class OpDef:
    """Everything graphc knows about one op.

    ``infer(in_types, attrs) -> [out TensorType, ...]`` raises ShapeError on bad input.
    ``effects`` is ``"pure"`` or ``"random"`` (draws from the plan's RNG; never CSE'd).
    """

    name: str
    infer: Callable
    attrs: dict = field(default_factory=dict)
    inputs: tuple = (1, 1)  # (min, max) input count; max None means variadic
    vjp: Callable | None = None
    effects: str = "pure"
    doc: str = ""

    def normalize_attrs(self, attrs: dict) -> dict:
        """Fill defaults, check kinds, turn lists into tuples (hashable, plain data)."""
        unknown = set(attrs) - set(self.attrs)
        if unknown:
            raise GraphcError(f"op {self.name!r} got unknown attrs {sorted(unknown)}")
        out = {}
        for key, spec in self.attrs.items():
            value = attrs.get(key, spec.default)
            if value is REQUIRED:
                raise GraphcError(f"op {self.name!r} needs attr {key!r}")
            value = _freeze(value)
            if not ((value is None and spec.optional) or _ATTR_CHECKS[spec.kind](value)):
                raise GraphcError(f"op {self.name!r}: attr {key}={value!r} is not a valid {spec.kind}")
            out[key] = value
        return out

    def check_arity(self, n: int) -> None:
        lo, hi = self.inputs
        if n < lo or (hi is not None and n > hi):
            want = f"{lo}" if lo == hi else f"{lo}..{hi if hi is not None else ''}"
            raise ShapeError(f"op {self.name!r} takes {want} inputs, got {n}")


def _freeze(value):
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    return value


REGISTRY: dict[str, OpDef] = {}


def register(opdef: OpDef) -> OpDef:
    if opdef.name in REGISTRY:
        raise GraphcError(f"op {opdef.name!r} registered twice")
    REGISTRY[opdef.name] = opdef
    return opdef


def get_op(name) -> OpDef:
    """Look an op up by name; unknown names are refused (this guards plan loading too)."""
    opdef = REGISTRY.get(name) if isinstance(name, str) else None
    if opdef is None:
        raise GraphcError(f"unknown op {name!r}")
    return opdef


def infer_types(opdef: OpDef, in_types: list, attrs: dict) -> list:
    opdef.check_arity(len(in_types))
    return list(opdef.infer(in_types, attrs))
