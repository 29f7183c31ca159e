"""One reader per ONNX op: ``reader(r, args) -> [output, ...]``.

``r`` is the ``graph_reader.GraphReader`` reading the graph (``r.attrs()``,
``r.emit(op, inputs, attrs)``, ``r.static(x, what)``, ``r.error(message)``); ``args`` holds
one entry per ONNX input: a graph ``Value``, a numpy array known while importing
(initializers, constants, shapes), or None for an omitted optional input. Readers of shape
ops compute on known arrays directly, so ``Shape -> Gather -> Concat -> Reshape`` chains leave
no node behind; a shape may then hold the batch dim as the symbolic ``"N"`` (an object array).
"""
from __future__ import annotations

import math

import numpy as np

from ..ir.graph import Value
from .elementwise_readers import ELEMENTWISE_READERS, scalar
from .shape_readers import SHAPE_READERS, _axes, _known, _rank, _shape

# ---- linear algebra, convolution, normalization --------------------------------------------------
def _matmul(r, args):
    x, w = args
    if _known(x, w):
        if np.ndim(x) >= 2 and np.ndim(w) >= 2:  # with a 1-D operand the product is smaller than the inputs
            shape = np.broadcast_shapes(np.shape(x)[:-2], np.shape(w)[:-2]) + (np.shape(x)[-2], np.shape(w)[-1])
            r.allow(shape, np.result_type(x, w), "MatMul")
        return [np.matmul(x, w)]
    if _known(w) and np.ndim(w) == 2 and np.asarray(w).dtype.kind == "f":  # a weight: nn.Linear's own op
        return [r.emit("linear", [x, _transposed(r, w)])]
    return [r.emit("matmul", args)]


def _transposed(r, x):
    if _known(x):
        return r.name_like(np.ascontiguousarray(np.swapaxes(x, -1, -2)), x)
    return r.emit("permute", [x], {"perm": [1, 0]})


def _gemm(r, args):
    a, b, c = (list(args) + [None])[:3]
    attrs = r.attrs()
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    if attrs.get("transA", 0):
        a = _transposed(r, a)
    out_features = _shape(b)[0 if attrs.get("transB", 0) else 1]
    if alpha == 1.0 and beta == 1.0 and (c is None or (_known(c) and np.size(c) == out_features)):
        weight = b if attrs.get("transB", 0) else _transposed(r, b)  # linear's weight is (out, in)
        bias = [] if c is None else [c if np.shape(c) == (out_features,) else np.reshape(c, (out_features,))]
        return [r.emit("linear", [a, weight, *bias])]
    product = r.emit("matmul", [a, _transposed(r, b) if attrs.get("transB", 0) else b])
    integer = product.type.dtype if not product.type.dtype.is_float else None
    if integer is not None and not (alpha.is_integer() and beta.is_integer()):
        # onnx's reference scales integer products by the float attrs in float64, then truncates
        product, c = (None if v is None else r.emit("cast", [v], {"dtype": "float64"}) for v in (product, c))
    if alpha != 1.0:
        product = r.emit("mul", [product, scalar(r, product, alpha)])
    if c is not None:
        product = r.emit("add", [product, r.emit("mul", [c, scalar(r, product, beta)]) if beta != 1.0 else c])
    if integer is not None and product.type.dtype != integer:
        product = r.emit("cast", [product], {"dtype": integer.name})
    return [product]


def _same_pads(r, attrs: dict, spatial: tuple, kernel: list, strides: list, dilations: list) -> list:
    """Symmetric per-dim padding from ``pads`` or ``auto_pad`` (graphc pads both sides alike)."""
    auto = attrs.get("auto_pad", "NOTSET")
    rank = len(kernel)
    if auto in ("NOTSET", ""):
        pads = list(attrs.get("pads", [0] * 2 * rank))
    elif auto == "VALID":
        pads = [0] * 2 * rank
    else:  # SAME_UPPER / SAME_LOWER: output = ceil(input / stride)
        total = [max((math.ceil(n / s) - 1) * s + (k - 1) * d + 1 - n, 0)
                 for n, k, s, d in zip(spatial, kernel, strides, dilations)]
        pads = [t // 2 for t in total] + [t - t // 2 for t in total]
    if pads[:rank] != pads[rank:]:
        raise r.error(f"asymmetric padding {pads} (begins then ends); graphc pads both sides of a dim alike")
    return [int(p) for p in pads[:rank]]


def _window_attrs(r, attrs: dict, x, kernel: list) -> dict:
    rank = len(kernel)
    strides = list(attrs.get("strides", [1] * rank))
    dilations = list(attrs.get("dilations", [1] * rank))
    spatial = _shape(x)[2:]
    pads = _same_pads(r, attrs, spatial, kernel, strides, dilations)
    if attrs.get("ceil_mode", 0):
        for n, k, s, d, p in zip(spatial, kernel, strides, dilations, pads):
            span = n + 2 * p - d * (k - 1) - 1
            if span % s and (span // s + 1) * s < n + p:  # ceil would add a window that floor drops
                raise r.error("ceil_mode=1 changes this pooling's output size; graphc pools with floor")
    return {"stride": strides, "padding": pads, "dilation": dilations}


def _as_2d(attrs: dict) -> dict:
    """A 1-D window's attributes for the same window over a height of 1."""
    out = dict(attrs)
    for key in ("strides", "dilations", "kernel_shape"):
        if key in attrs:
            out[key] = [1, *attrs[key]]
    if "pads" in attrs:
        out["pads"] = [0, attrs["pads"][0], 0, attrs["pads"][1]]
    return out


def _conv(r, args):
    x, w, bias = (list(args) + [None])[:3]
    attrs = r.attrs()
    if _rank(x) not in (3, 4):
        raise r.error(f"Conv on a rank-{_rank(x)} input; graphc imports 1-D and 2-D convolutions")
    one_d = _rank(x) == 3
    if one_d:  # a 1-D convolution is a 2-D one over a height of 1
        n, c, length = _shape(x)
        x = r.emit("reshape", [x], {"shape": [n, c, 1, length]})
        w = np.expand_dims(w, 2) if _known(w) else r.emit("reshape", [w], {"shape": [*_shape(w)[:2], 1, _shape(w)[2]]})
        attrs = _as_2d(attrs)
    kernel = list(_shape(w)[2:])
    window = _window_attrs(r, attrs, x, kernel)
    inputs = [x, w] + ([bias] if bias is not None else [])
    out = r.emit("conv2d", inputs, {**window, "groups": int(attrs.get("group", 1))})
    if one_d:
        out = r.emit("reshape", [out], {"shape": [_shape(out)[0], _shape(out)[1], _shape(out)[3]]})
    return [out]


def _pool(op: str):
    def read(r, args):
        attrs = r.attrs()
        if _rank(args[0]) != 4:
            raise r.error(f"{op} on a rank-{_rank(args[0])} input; graphc imports 2-D pooling")
        window = _window_attrs(r, attrs, args[0], list(attrs["kernel_shape"]))
        pool_attrs = {"kernel_size": list(attrs["kernel_shape"]), "stride": window["stride"],
                      "padding": window["padding"]}
        if op == "max_pool2d":
            pool_attrs["dilation"] = window["dilation"]
        else:
            if window["dilation"] != [1, 1]:
                raise r.error("AveragePool with dilations; graphc's avg_pool2d has none")
            pool_attrs["count_include_pad"] = bool(attrs.get("count_include_pad", 0))
        return [r.emit(op, args[:1], pool_attrs)]
    return read


def _global_avg_pool(r, args):
    if _rank(args[0]) == 4:
        return [r.emit("adaptive_avg_pool2d", args, {"output_size": [1, 1]})]
    return [r.emit("mean", args, {"dims": list(range(2, _rank(args[0]))), "keepdim": True})]


def _global_max_pool(r, args):
    return [r.emit("max", args, {"dims": list(range(2, _rank(args[0]))), "keepdim": True})]


def _batch_norm(r, args):
    attrs = r.attrs()
    if attrs.get("training_mode", 0):
        raise r.error("BatchNormalization in training mode: an imported model is an inference plan")
    return [r.emit("batch_norm", args[:5], {"eps": float(attrs.get("epsilon", 1e-5))})]


def _normalize(r, x, dims: list, eps: float) -> Value:
    """``(x - mean) / sqrt(var + eps)`` over ``dims`` (biased variance, as every norm layer)."""
    centered = r.emit("sub", [x, r.emit("mean", [x], {"dims": dims, "keepdim": True})])
    var = r.emit("mean", [r.emit("mul", [centered, centered])], {"dims": dims, "keepdim": True})
    return r.emit("mul", [centered, r.emit("rsqrt", [r.emit("add", [var, scalar(r, x, eps)])])])


def _layer_norm(r, args):
    x, scale, bias = (list(args) + [None])[:3]
    attrs = r.attrs()
    dims = list(range(int(attrs.get("axis", -1)) % _rank(x), _rank(x)))
    out = r.emit("mul", [_normalize(r, x, dims, float(attrs.get("epsilon", 1e-5))), scale])
    return [r.emit("add", [out, bias]) if bias is not None else out]


def _instance_norm(r, args):
    x, scale, bias = args
    rank = _rank(x)
    channel_shape = (-1,) + (1,) * (rank - 2)  # per-channel scale and bias broadcast over the spatial dims
    scale, bias = (np.reshape(p, channel_shape) if _known(p) else r.emit("reshape", [p], {"shape": list(channel_shape)})
                   for p in (scale, bias))
    out = _normalize(r, x, list(range(2, rank)), float(r.attrs().get("epsilon", 1e-5)))
    return [r.emit("add", [r.emit("mul", [out, scale]), bias])]


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


# the single-node readers, ONNX op type -> reader (tests/test_onnx_readers.py runs each one); the
# importer reads with importer.NODE_READERS, these and control_import's If, Loop and Scan
READERS = {
    **SHAPE_READERS, **ELEMENTWISE_READERS,
    "MatMul": _matmul, "Gemm": _gemm, "Conv": _conv, "MaxPool": _pool("max_pool2d"),
    "AveragePool": _pool("avg_pool2d"), "GlobalAveragePool": _global_avg_pool, "GlobalMaxPool": _global_max_pool,
    "BatchNormalization": _batch_norm, "LayerNormalization": _layer_norm,
    "InstanceNormalization": _instance_norm, "Softmax": _softmax("softmax"),
    "LogSoftmax": _softmax("log_softmax"), "ReduceMean": _reduce("mean", 18), "ReduceSum": _reduce("sum", 13),
    "ReduceMax": _reduce("max", 18), "ArgMax": _argmax,
}
