"""Index-tensor data movement along one dim: ``scatter`` (PyTorch's ``Tensor.scatter`` /
``scatter_reduce`` with ``include_self=True``, ONNX's ScatterElements) and its gradient's
``gather`` (``torch.gather``, ONNX's GatherElements).

``scatter(x, index, src)`` is ``x`` with, for every position ``i`` of ``index``,
``out[i with dim replaced by index[i]] = src[i]`` (``reduce="none"``; which duplicate wins is
unspecified, as in PyTorch and ONNX) or combined with what is there (``"sum"``, ``"prod"``,
``"amax"``, ``"amin"``). ``gather(x, index)`` reads ``x[i with dim replaced by index[i]]``.
Indices are int64 in ``[-size, size)`` (negative ones count from the end, as ONNX's); ``src``
is shaped like ``index``, and ``index`` is no larger than ``x`` along the other dims.

Gradients: ``scatter`` with ``"none"`` sends ``x`` the cotangent with the written positions
zeroed and ``src`` the cotangent gathered; with ``"sum"`` ``x`` gets it whole. ``gather``'s is a
sum-scatter into zeros. ``prod``/``amax``/``amin`` have none (their ties make it ambiguous).
"""
from __future__ import annotations

from ..errors import GraphcError, ShapeError
from ..registry import Attr, OpDef, register
from ..types import DType
from ._shapes import norm_axis

SCATTER_REDUCTIONS = ("none", "sum", "prod", "amax", "amin")


def _check_index(op, x, index, dim):
    if index.dtype is not DType.int64:
        raise ShapeError(f"{op}: index must be int64, got {index}")
    if index.rank != x.rank:
        raise ShapeError(f"{op}: index {index} and input {x} must have the same rank")
    axis = norm_axis(dim, x.rank)
    for d, (i, s) in enumerate(zip(index.shape, x.shape)):
        if d != axis and isinstance(i, int) and isinstance(s, int) and i > s:
            raise ShapeError(f"{op}: index {index} is larger than the input {x} along dim {d}")
    return axis


def _scatter(in_types, attrs):
    x, index, src = in_types
    _check_index("scatter", x, index, attrs["dim"])
    if attrs["reduce"] not in SCATTER_REDUCTIONS:
        raise ShapeError(f"scatter: reduce must be one of {', '.join(SCATTER_REDUCTIONS)}, got {attrs['reduce']!r}")
    if src.dtype is not x.dtype or tuple(src.shape) != tuple(index.shape):
        raise ShapeError(f"scatter: src {src} must have the input's dtype ({x.dtype.name}) and the index's shape "
                         f"{tuple(index.shape)}")
    return [x]


def _gather(in_types, attrs):
    x, index = in_types
    _check_index("gather", x, index, attrs["dim"])
    return [index.with_dtype(x.dtype)]


def _vjp_scatter(b, node, cts, needs):
    x, index, src = node.inputs
    reduce, dim = node.attrs["reduce"], node.attrs["dim"]
    if reduce not in ("none", "sum"):
        raise GraphcError(f"scatter with reduce={reduce!r} has no gradient in graphc (only 'none' and 'sum')")
    g = cts[0]
    gx = None
    if needs[0]:
        if reduce == "sum":
            gx = g
        else:
            zeros = b.emit1("full", [], {"shape": list(src.type.shape), "value": 0.0, "dtype": g.type.dtype.name})
            gx = b.emit1("scatter", [g, index, zeros], {"dim": dim, "reduce": "none"})
    gsrc = b.emit1("gather", [g, index], {"dim": dim}) if needs[2] else None
    return [gx, None, gsrc]


def _vjp_gather(b, node, cts, needs):
    x, index = node.inputs
    zeros = b.emit1("full", [], {"shape": list(x.type.shape), "value": 0.0, "dtype": cts[0].type.dtype.name})
    return [b.emit1("scatter", [zeros, index, cts[0]], {"dim": node.attrs["dim"], "reduce": "sum"}), None]


register(OpDef("scatter", _scatter, attrs={"dim": Attr("int"), "reduce": Attr("str", "none")}, inputs=(3, 3),
               vjp=_vjp_scatter, doc="(x, index, src) -> x with src written (or reduced) at index along dim "
                                     "(Tensor.scatter / scatter_reduce, ONNX ScatterElements)"))
register(OpDef("gather", _gather, attrs={"dim": Attr("int")}, inputs=(2, 2), vjp=_vjp_gather,
               doc="(x, index) -> x read at index along dim (torch.gather, ONNX GatherElements)"))
