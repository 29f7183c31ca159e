"""Readers of ONNX's reductions and the ops along one axis (see ``readers`` for the contract):
the Reduce* family, ArgMax/ArgMin, CumSum/CumProd, TopK, Hardmax, Softmax/LogSoftmax. The
reductions PyTorch also has are read as graphc's functions (``composite.composing``); ONNX keeps
the input's element type where PyTorch promotes integers, so results are cast back."""
from __future__ import annotations

import numpy as np

import graphc as ops  # the torch namespace: its functions are the composites read here (composite.py)
from ..ir.graph import Value
from .composite import composing
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
                return [_unreduced(r, op, x)]
            axes = list(range(rank))
        dims = sorted({int(a) % rank for a in axes})
        keepdim = bool(attrs.get("keepdims", 1))
        if op in _EMPTY and any(_shape(x)[d] == 0 for d in dims):
            return [_reduce_nothing(r, x, dims, keepdim, _EMPTY[op])]
        if op == "mean" and np.dtype(r.value(x).type.dtype.numpy).kind in "iu":
            return [_integer_mean(r, x, dims, keepdim)]
        if op in _COMPOSED:
            return [_composed(r, op, x, dims, keepdim)]
        return [r.emit(op, [x], {"dims": dims, "keepdim": keepdim})]
    return read


_COMPOSED = {"min", "prod", "l1", "l2", "sum_square", "log_sum", "log_sum_exp"}

# the value of each reduction over an empty axis, as onnx's reference gives (numpy and PyTorch
# refuse max/min of nothing): None is the dtype's least value, "most" its greatest
_EMPTY = {"max": None, "min": "most", "prod": 1.0, "l1": 0.0, "l2": 0.0, "sum_square": 0.0,
          "log_sum": -np.inf, "log_sum_exp": -np.inf}


def _composed(r, op: str, x, dims: list, keepdim: bool):
    """The reductions PyTorch has as functions; the result keeps x's element type."""
    with composing(r) as t:
        v = t(x)
        like = v.dtype
        if op == "min":
            out = ops.amin(v.long() if like.name in ("uint8", "bool") else v, dims, keepdim)
        elif op == "prod":
            out = v
            for d in sorted(dims, reverse=True):
                out = ops.prod(out, d, keepdim)
        elif op == "l1":
            out = ops.sum(v.abs(), dims, keepdim)
        elif op == "sum_square":
            out = ops.sum(v * v, dims, keepdim)
        elif op == "l2":
            out = ops.sqrt(ops.sum((v * v).double() if not like.is_float else v * v, dims, keepdim))
        elif op == "log_sum":
            out = ops.log(ops.sum(v, dims, keepdim))
        else:  # log_sum_exp
            out = ops.logsumexp(v, dims, keepdim)
        return t.value(out.cast(like))


def _unreduced(r, op: str, x):
    """A reduction with no axes and noop_with_empty_axes=1: x itself, with the elementwise part
    of the reduction still applied (ReduceSumSquare squares, ReduceL1 takes abs), as onnx's
    reference does."""
    if op not in ("l1", "l2", "sum_square", "log_sum", "log_sum_exp"):
        return x
    with composing(r) as t:
        v = t(x)
        out = {"l1": lambda: v.abs(), "l2": lambda: v.abs(), "sum_square": lambda: v * v,
               "log_sum": lambda: ops.log(v), "log_sum_exp": lambda: v}[op]()
        return t.value(out)


def _reduced_shape(x, dims: list, keepdim: bool) -> list:
    return [1 if i in dims else d for i, d in enumerate(_shape(x)) if keepdim or i not in dims]


def _reduce_nothing(r, x, dims: list, keepdim: bool, value) -> Value:
    """A reduction over an empty axis: the identity of the reduction (max's is the least value
    of the dtype, min's the greatest), as onnx's reference and onnxruntime give."""
    dtype = np.dtype(r.value(x).type.dtype.numpy)
    if value is None or value == "most":
        largest = value == "most"
        if dtype.kind == "f":
            value = np.inf if largest else -np.inf
        elif dtype == np.bool_:
            value = float(largest)
        else:
            value = float(np.iinfo(dtype).max if largest else np.iinfo(dtype).min)
    return r.emit("full", [], {"shape": _reduced_shape(x, dims, keepdim), "value": value,
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


def _arg(largest: bool):
    """ArgMax/ArgMin; with select_last_index=1 the last extreme, found as the first one of the
    input reversed along the axis."""
    def read(r, args):
        attrs = r.attrs()
        rank = _rank(args[0])
        dim, keepdim = int(attrs.get("axis", 0)) % max(rank, 1), bool(attrs.get("keepdims", 1))
        last = bool(attrs.get("select_last_index", 0))
        with composing(r) as t:
            x = t(args[0])
            if last:
                x = ops.flip(x, [dim])
            index = (ops.argmax if largest else ops.argmin)(x, dim, keepdim)
            if last:
                index = (_shape(args[0])[dim] - 1) - index
            return [t.value(index)]
    return read


def _cumulative(kind: str):
    """CumSum / CumProd: the axis is an input; exclusive shifts the running values by one (the
    first is the identity), reverse runs from the end."""
    def read(r, args):
        attrs = r.attrs()
        axis = int(np.asarray(r.static(args[1], f"{kind}'s axis")).reshape(-1)[0]) % _rank(args[0])
        exclusive, reverse = bool(attrs.get("exclusive", 0)), bool(attrs.get("reverse", 0))
        with composing(r) as t:
            x = t(args[0])
            like = x.dtype
            if reverse:
                x = ops.flip(x, [axis])
            out = (ops.cumsum if kind == "CumSum" else ops.cumprod)(x, axis)
            if exclusive:
                size = _shape(args[0])[axis]
                identity = ops.full_like(ops.narrow(x, axis, 0, 1), 0 if kind == "CumSum" else 1).cast(out.dtype.name)
                out = ops.cat([identity, ops.narrow(out, axis, 0, size - 1)], axis) if size else out
            if reverse:
                out = ops.flip(out, [axis])
            return [t.value(out.cast(like))]
    return read


def _topk(r, args):
    attrs = r.attrs()
    rank = _rank(args[0])
    axis = int(attrs.get("axis", -1)) % rank
    k = int(np.asarray(r.static(args[1], "TopK's k") if len(args) > 1 else attrs["k"]).reshape(-1)[0])
    largest = bool(attrs.get("largest", 1))
    if k == 0:
        shape = [0 if d == axis else s for d, s in enumerate(_shape(args[0]))]
        return [np.zeros(shape, np.dtype(r.value(args[0]).type.dtype.numpy)), np.zeros(shape, np.int64)]
    with composing(r) as t:
        values, indices = ops.topk(t(args[0]), k, axis, largest)
        return [t.value(values), t.value(indices)]


def _hardmax(r, args):
    rank = _rank(args[0])
    axis = int(r.attrs().get("axis", -1 if r.opset >= 13 else 1)) % rank
    if r.opset < 13 and axis != rank - 1:
        raise r.error(f"Hardmax over axis {axis} of a rank-{rank} input in opset {r.opset} (the 2-D coercion)")
    with composing(r) as t:
        x = t(args[0])
        first = ops.argmax(x, axis, True)
        positions = ops.arange(_shape(args[0])[axis]).reshape(*[-1 if d == axis else 1 for d in range(rank)])
        return [t.value((positions == first).cast(x.dtype.name))]


REDUCE_READERS = {"Softmax": _softmax("softmax"), "LogSoftmax": _softmax("log_softmax"),
                  "ReduceMean": _reduce("mean", 18), "ReduceSum": _reduce("sum", 13), "ReduceMax": _reduce("max", 18),
                  "ReduceMin": _reduce("min", 18), "ReduceProd": _reduce("prod", 18), "ReduceL1": _reduce("l1", 18),
                  "ReduceL2": _reduce("l2", 18), "ReduceSumSquare": _reduce("sum_square", 18),
                  "ReduceLogSum": _reduce("log_sum", 18), "ReduceLogSumExp": _reduce("log_sum_exp", 18),
                  "ArgMax": _arg(True), "ArgMin": _arg(False), "CumSum": _cumulative("CumSum"),
                  "CumProd": _cumulative("CumProd"), "TopK": _topk, "Hardmax": _hardmax}
