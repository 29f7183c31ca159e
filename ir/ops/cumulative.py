"""Scans along one dim: ``cumulative`` (running sums or running log-sum-exps, forward or
reversed), ``cummax`` (running max or min) and ``cummax_indices`` (the index each of those
values came from: a second op, as max_pool2d_indices, so that the values' op has only float
outputs and its vjp reads the indices by emitting that op). Primitives
because a composite needs the dim's size (a triangular mask, one slice per step), which a
symbolic batch dim does not have. Their gradients are scans again: a reversed running sum,
a reversed log-sum-exp of the cotangent (PyTorch's stable formula), a scatter to the indices.
"""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..registry import Attr, OpDef, register
from ..types import DType, TensorType
from ._shapes import norm_axis
from ._vjp import scalar

KINDS = ("sum", "logsumexp")


def _axis(x: TensorType, dim: int, op: str) -> int:
    if not -max(x.rank, 1) <= dim < max(x.rank, 1):
        raise ShapeError(f"{op}: dim {dim} is out of range for a rank-{x.rank} tensor")
    return norm_axis(dim, x.rank) if x.rank else 0


def _cumulative(in_types, attrs):
    x = in_types[0]
    if attrs["kind"] not in KINDS:
        raise ShapeError(f"cumulative: kind must be one of {KINDS}, got {attrs['kind']!r}")
    _axis(x, attrs["dim"], "cumulative")
    if attrs["kind"] == "logsumexp" and not x.dtype.is_float:
        raise ShapeError(f"cumulative logsumexp needs a floating-point input, got {x.dtype.name}")
    dtype = DType.int64 if x.dtype in (DType.bool, DType.uint8) else x.dtype  # PyTorch's cumsum
    return [TensorType(x.shape, dtype)]


def _cummax(in_types, attrs):
    x = in_types[0]
    _axis(x, attrs["dim"], "cummax")
    return [TensorType(x.shape, x.dtype)]


def _cummax_indices(in_types, attrs):
    x = in_types[0]
    _axis(x, attrs["dim"], "cummax_indices")
    return [TensorType(x.shape, DType.int64)]


def _vjp_cumulative(b, node, cts, needs):
    x, g = node.inputs[0], cts[0]
    attrs = dict(node.attrs, reverse=not node.attrs["reverse"])
    if node.attrs["kind"] == "sum":
        return [b.emit1("cumulative", [g], attrs)]
    # d out_i / d x_j = exp(x_j - out_i) for j on i's side: sum_i g_i exp(x_j - out_i), the
    # positive and negative parts of g each as a log-sum-exp (no overflow for any x).
    dtype = g.type.dtype
    lowest = scalar(b, np.finfo(dtype.numpy).min, dtype)
    log_abs = b.emit1("log", [b.emit1("abs", [g])])
    zero = scalar(b, 0.0, dtype)
    parts = []
    for test in ("gt", "lt"):
        logs = b.emit1("where", [b.emit1(test, [g, zero]), log_abs, lowest])
        scanned = b.emit1("cumulative", [b.emit1("sub", [logs, node.outputs[0]])], attrs)
        parts.append(b.emit1("exp", [b.emit1("add", [scanned, x])]))
    return [b.emit1("sub", parts)]


def _vjp_cummax(b, node, cts, needs):
    x, g = node.inputs[0], cts[0]
    if g is None:
        return [None]
    zeros = b.emit1("full", [], {"shape": list(x.type.shape), "value": 0.0, "dtype": g.type.dtype.name})
    if x.type.rank == 0:
        return [g]
    indices = b.emit1("cummax_indices", [x], dict(node.attrs))
    return [b.emit1("scatter", [zeros, indices, g], {"dim": node.attrs["dim"], "reduce": "sum"})]


register(OpDef("cumulative", _cumulative,
               attrs={"kind": Attr("str"), "dim": Attr("int"), "reverse": Attr("bool", False)},
               vjp=_vjp_cumulative,
               doc="running sums or log-sum-exps along dim (reverse: from the end); integers and bools sum in int64"))
_CUMMAX_ATTRS = {"dim": Attr("int"), "largest": Attr("bool", True)}
register(OpDef("cummax", _cummax, attrs=dict(_CUMMAX_ATTRS), vjp=_vjp_cummax,
               doc="running max (largest) or min along dim (NaN propagates, as PyTorch's cummax/cummin)"))
register(OpDef("cummax_indices", _cummax_indices, attrs=dict(_CUMMAX_ATTRS),
               doc="int64 index along dim of each running max/min (the latest on ties, the latest NaN after one)"))
