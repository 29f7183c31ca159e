"""The op registry: one :class:`OpDef` per op, holding everything about it in one place.

An OpDef keeps the attr schema, the shape/dtype rule, the vjp rule and the op's effects
together (as JAX keeps a primitive's rules together). Backend kernel tables in
``executor/backends`` use the same names as keys.

The vjp slot takes ``(b, node, cotangents)`` where ``b`` is an :class:`ir.builder.Builder`
that emits IR nodes, ``cotangents`` has one Value (or None) per node output, and it returns
one cotangent Value (or None) per node input.
"""
from __future__ import annotations

import math
import operator
import sys
from dataclasses import dataclass, field
from typing import Callable

from . import complex_support
from .errors import GraphcError, ShapeError, show
from .graph import Graph
from .types import DType

REQUIRED = object()

# Attr kinds: each names a plain-data type the plan file can hold.
_ATTR_CHECKS = {
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "bool": lambda v: isinstance(v, bool),
    "str": lambda v: isinstance(v, str),
    "strs": lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v),
    "ints": lambda v: isinstance(v, (list, tuple)) and all(_ATTR_CHECKS["int"](x) for x in v),
    "dims": lambda v: isinstance(v, (list, tuple)) and all(_ATTR_CHECKS["int"](x) or isinstance(x, str) for x in v),
    "dtype": lambda v: isinstance(v, str) and v in {d.name for d in DType},
    "graph": lambda v: isinstance(v, Graph),  # a call's body: an ir.Graph of registry ops (ONNX's GRAPH attr)
    "slices": lambda v: isinstance(v, (list, tuple)) and all(
        isinstance(s, (list, tuple)) and len(s) == 3 and all(x is None or _ATTR_CHECKS["int"](x) for x in s) for s in v),
}


@dataclass(frozen=True)
class Attr:
    """An attr's kind, default and valid range. For ``ints`` the range applies to every entry.
    Floats must be finite unless ``finite=False`` (a fill value may be -inf)."""

    kind: str
    default: object = REQUIRED
    optional: bool = False  # the value may also be None
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False  # minimum < value instead of minimum <= value
    finite: bool = True

    def range_error(self, value) -> str | None:
        """Why ``value`` (of the right kind) is out of range, or None when it is fine."""
        if value is None or self.kind not in ("int", "float", "ints"):
            return None
        for v in value if self.kind == "ints" else (value,):
            if self.kind == "float" and self.finite and not math.isfinite(v):
                return f"must be a finite number{self._describe_range()}"
            low_ok = self.minimum is None or (v > self.minimum if self.exclusive_minimum else v >= self.minimum)
            if not low_ok or (self.maximum is not None and v > self.maximum):
                return f"must be{self._describe_range() or ' in range'}"
        return None

    def _describe_range(self) -> str:
        parts = []
        if self.minimum is not None:
            parts.append(f"{'>' if self.exclusive_minimum else '>='} {self.minimum:g}")
        if self.maximum is not None:
            parts.append(f"<= {self.maximum:g}")
        return (" " + " and ".join(parts)) if parts else ""


@dataclass(frozen=True)
class OpDef:
    """Everything graphc knows about one op.

    ``infer(in_types, attrs) -> [out TensorType, ...]`` raises ShapeError on bad input.
    ``effects`` is ``"pure"``, ``"random"`` (draws from the plan's RNG; never CSE'd) or
    ``"check"`` (raises on bad values; kept by DCE though nothing reads its output) or
    ``"collective"`` (talks to the other processes of a data-parallel job: never CSE'd or
    folded, since every process must run it in the same order).
    """

    name: str
    infer: Callable
    attrs: dict = field(default_factory=dict)
    inputs: tuple = (1, 1)  # (min, max) input count; max None means variadic
    vjp: Callable | None = None
    effects: str = "pure"
    doc: str = ""
    # Mixed input dtypes (int64 @ f32) compute in the output's dtype; numpy would widen to f64.
    promotes_inputs: bool = False
    # Outputs whose cotangent the vjp takes (None: every float output). Batch norm's statistics
    # feed state updates, never the loss. A function of the attrs where it depends on the node
    # (a custom op's saved intermediates follow its outputs).
    differentiable_outputs: tuple | Callable | None = None
    # why an op without a vjp has no gradient, for the error autodiff raises (default: a generic one)
    no_gradient: str = ""
    # takes complex inputs and its vjp is exact for complex cotangents (ir/complex_support.py)
    complex_vjp: bool = False
    # sums many terms (matmul, convolution, reductions, softmax): float16/bfloat16/float8 inputs
    # compute in float32 and round once at the end, as PyTorch's CPU kernels and onnxruntime do
    # (numpy would round every partial sum to the narrow type)
    accumulates: bool = False

    def outputs_with_gradients(self, attrs: dict) -> tuple | None:
        """The indices of the outputs whose cotangents the vjp reads (None: all float ones)."""
        wanted = self.differentiable_outputs
        return wanted(attrs) if callable(wanted) else wanted

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
                raise GraphcError(f"op {self.name!r}: attr {key}={show(value)} is not a valid {spec.kind}")
            problem = spec.range_error(value)
            if problem:
                raise GraphcError(f"op {self.name!r}: attr {key}={show(value)} {problem}")
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
    if value is None or isinstance(value, (bool, int, float, str, Graph)):
        return value
    if hasattr(value, "__index__"):  # numpy ints; a traced Python int gives its example value (or refuses)
        return operator.index(value)
    if hasattr(value, "__float__"):
        return float(value)
    return value


REGISTRY: dict[str, OpDef] = {}
FAMILY: dict[str, str] = {}  # op name -> the ir/ops module declaring it (its kernel lives in the mirror file)


def register(opdef: OpDef) -> OpDef:
    if opdef.name in REGISTRY:
        raise GraphcError(f"op {opdef.name!r} registered twice")
    REGISTRY[opdef.name] = opdef
    FAMILY[opdef.name] = sys._getframe(1).f_globals["__name__"].rsplit(".", 1)[-1]
    return opdef


def get_op(name) -> OpDef:
    """Look an op up by name; unknown names are refused (this guards plan loading too)."""
    opdef = REGISTRY.get(name) if isinstance(name, str) else None
    if opdef is None:
        raise GraphcError(f"unknown op {name!r}")
    return opdef


def infer_types(opdef: OpDef, in_types: list, attrs: dict) -> list:
    opdef.check_arity(len(in_types))
    complex_support.check_inputs(opdef, in_types, attrs)
    return list(opdef.infer(in_types, attrs))
