"""Readers of ONNX's reductions and the ops along one axis (see ``readers`` for the contract):
ReduceMean/Sum/Max, ArgMax, Softmax/LogSoftmax."""
from __future__ import annotations

import numpy as np

from ..ir.graph import Value
from .elementwise_readers import scalar
from .shape_readers import _axes, _rank, _shape


def _softmax(op: str):
    def read(r, args):
        rank = _rank(args[0])
        axis = int(r.attrs().get("axis", -1 if r.opset >= 13 else 1)) % rank
        if r.opset < 13 and axis != rank - 1:  # before opset 13 softmax flattened the trailing dims
            raise r.error(f"{op} over axis {axis} of a rank-{rank} input in opset {r.opset} (the 2-D coercion)")
        return [r.emit(op, args[:1], {"dim": axis})]
    return read


def _reduce(op: str, axes_input_from: int):
    def read(r, args):
        attrs = r.attrs()
        x, rank = args[0], _rank(args[0])
        axes = _axes(r, args, 1, attrs, rank) if r.opset >= axes_input_from else attrs.get("axes")
        if axes is None or axes == []:
            if attrs.get("noop_with_empty_axes", 0):
                return [x]
            axes = list(range(rank))
        dims = sorted({int(a) % rank for a in axes})
        keepdim = bool(attrs.get("keepdims", 1))
        if op == "max" and any(_shape(x)[d] == 0 for d in dims):
            return [_max_of_nothing(r, x, dims, keepdim)]
        if op == "mean" and np.dtype(r.value(x).type.dtype.numpy).kind in "iu":
            return [_integer_mean(r, x, dims, keepdim)]
        return [r.emit(op, [x], {"dims": dims, "keepdim": keepdim})]
    return read


def _reduced_shape(x, dims: list, keepdim: bool) -> list:
    return [1 if i in dims else d for i, d in enumerate(_shape(x)) if keepdim or i not in dims]


def _max_of_nothing(r, x, dims: list, keepdim: bool) -> Value:
    """ReduceMax over an empty axis: the identity of max (-inf, the least integer, False), as
    onnx's reference and onnxruntime give; numpy and PyTorch refuse the reduction instead."""
    dtype = np.dtype(r.value(x).type.dtype.numpy)
    least = -np.inf if dtype.kind == "f" else 0.0 if dtype == np.bool_ else float(np.iinfo(dtype).min)
    return r.emit("full", [], {"shape": _reduced_shape(x, dims, keepdim), "value": least,
                               "dtype": r.value(x).type.dtype.name})


def _integer_mean(r, x, dims: list, keepdim: bool) -> Value:
    """ReduceMean of integers stays integer: the sum divided by the count, truncated toward zero
    (onnxruntime's integer division; graphc's ``mean`` takes floats only, as PyTorch's)."""
    count = 1
    for d in dims:
        if not isinstance(_shape(x)[d], int):
            raise r.error("ReduceMean of an integer tensor over the batch dim; graphc divides by a static count")
        count *= _shape(x)[d]
    if count == 0:
        raise r.error("ReduceMean of an integer tensor over an empty axis has no value")
    total = r.emit("sum", [x], {"dims": dims, "keepdim": keepdim})
    return r.emit("div", [total, scalar(r, x, count)], {"rounding_mode": "trunc"})


def _argmax(r, args):
    attrs = r.attrs()
    if attrs.get("select_last_index", 0):
        raise r.error("ArgMax with select_last_index=1; graphc returns the first maximum")
    return [r.emit("argmax", args[:1], {"dim": int(attrs.get("axis", 0)), "keepdim": bool(attrs.get("keepdims", 1))})]


REDUCE_READERS = {"Softmax": _softmax("softmax"), "LogSoftmax": _softmax("log_softmax"),
                  "ReduceMean": _reduce("mean", 18), "ReduceSum": _reduce("sum", 13), "ReduceMax": _reduce("max", 18),
                  "ArgMax": _argmax}
