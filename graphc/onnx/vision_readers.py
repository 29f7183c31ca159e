"""Readers of the ONNX vision ops: ``MaxPool`` (ceil_mode, dilations, the Indices output) and
``AveragePool`` (ceil_mode, count_include_pad), ``LpPool``/``GlobalLpPool``, ``MaxUnpool``,
``LRN``, and the activations ``PRelu``, ``Elu``, ``Selu``, ``Celu``, ``Mish``, ``Softsign``,
``Softplus``, ``ThresholdedRelu``, each as the graphc ops PyTorch's layers use.

ONNX's pooling indices count over the whole (N, C, H, W) tensor and graphc's (PyTorch's) within
each (n, c) plane: MaxPool's Indices add the plane offsets (known only for a static batch),
MaxUnpool takes them modulo the plane. LRN sums ``floor((size-1)/2)`` channels before and
``ceil((size-1)/2)`` after (PyTorch: ``size // 2`` before), written as a 1x1 convolution with a
banded weight.
"""
from __future__ import annotations

import numpy as np

from .elementwise_readers import scalar
from .conv_readers import _as_2d, _same_pads
from .pool_readers import general_pool, needs_general_pool
from .shape_readers import _known, _rank, _shape


def _as_image(r, x):
    """``(x as (N, C, H, W), the node's attrs for it, undo)``: a 1-D input becomes a height-1
    image (its attrs gain a leading 1) and ``undo`` drops that height again."""
    attrs = r.attrs()
    if _rank(x) == 4:
        return x, attrs, lambda y: y
    if _rank(x) != 3:
        raise r.error(f"pooling a rank-{_rank(x)} input; graphc imports 1-D and 2-D pooling")
    n, c, length = _shape(x)
    image = r.emit("reshape", [x], {"shape": [n, c, 1, length]})
    return image, _as_2d(dict(attrs)), lambda y: r.emit("reshape", [y], {"shape": [n, c, _shape(y)[3]]})


def _pool_attrs(r, attrs, x, kernel: list, max_pool: bool) -> dict:
    strides = list(attrs.get("strides", [1, 1]))
    dilations = list(attrs.get("dilations", [1, 1]))
    pads = _same_pads(r, attrs, _shape(x)[2:], kernel, strides, dilations)
    out = {"kernel_size": kernel, "stride": strides, "padding": pads, "ceil_mode": bool(attrs.get("ceil_mode", 0))}
    if max_pool:
        out["dilation"] = dilations
    elif dilations != [1, 1]:
        raise r.error("AveragePool with dilations; graphc's avg_pool2d has none")
    return out


def _max_pool(r, args):
    x, attrs, undo = _as_image(r, args[0])
    pool = _pool_attrs(r, attrs, x, list(attrs["kernel_shape"]), True)
    y = undo(r.emit("max_pool2d", [x], pool))
    if len([o for o in r.node.output if o]) < 2:
        return [y]
    n, c, h, w = _shape(x)
    if not isinstance(n, (int, np.integer)):
        raise r.error("MaxPool's Indices over a symbolic batch: ONNX counts over the whole tensor, graphc per "
                      "(n, c) plane, and the batch offsets need a static batch size")
    plane = r.emit("max_pool2d_indices", [x], pool)  # h * W + w
    if attrs.get("storage_order", 0):  # column-major: w * H + h
        width = np.array(int(w), np.int64)
        row = r.emit("div", [plane, width], {"rounding_mode": "floor"})
        col = r.emit("sub", [plane, r.emit("mul", [row, width])])
        plane = r.emit("add", [r.emit("mul", [col, np.array(int(h), np.int64)]), row])
    offsets = (np.arange(int(n) * int(c), dtype=np.int64) * (int(h) * int(w))).reshape(int(n), int(c), 1, 1)
    return [y, undo(r.emit("add", [plane, offsets]))]


def _avg_pool(r, args):
    x, attrs, undo = _as_image(r, args[0])
    pool = _pool_attrs(r, attrs, x, list(attrs["kernel_shape"]), False)
    pool["count_include_pad"] = bool(attrs.get("count_include_pad", 0))
    return [undo(r.emit("avg_pool2d", [x], pool))]


def _lp_pool(r, args):
    """``(sum over the window of |x|^p)^(1/p)``, padded cells counting 0: an average pool with
    the padding counted, times the window size."""
    x, attrs, undo = _as_image(r, args[0])
    kernel = list(attrs["kernel_shape"])
    pool = _pool_attrs(r, attrs, x, kernel, False)
    p = float(attrs.get("p", 2))
    powered = r.emit("pow", [r.emit("abs", [x]), scalar(r, x, p)])
    mean = r.emit("avg_pool2d", [powered], {**pool, "count_include_pad": True})
    total = r.emit("mul", [mean, scalar(r, x, kernel[0] * kernel[1])])
    return [undo(r.emit("pow", [total, scalar(r, x, 1.0 / p)]))]


def _global_lp_pool(r, args):
    x = args[0]
    p = float(r.attrs().get("p", 2))
    powered = r.emit("pow", [r.emit("abs", [x]), scalar(r, x, p)])
    total = r.emit("sum", [powered], {"dims": list(range(2, _rank(x))), "keepdim": True})
    return [r.emit("pow", [total, scalar(r, x, 1.0 / p)])]


def _max_unpool(r, args):
    x, idx = args[:2]
    attrs = r.attrs()
    if _rank(x) != 4:
        raise r.error(f"MaxUnpool on a rank-{_rank(x)} input; graphc imports 2-D unpooling")
    kernel = list(attrs["kernel_shape"])
    strides = list(attrs.get("strides", [1, 1]))
    pads = list(attrs.get("pads", [0, 0, 0, 0]))
    if len(args) > 2 and args[2] is not None:
        raise r.error("MaxUnpool with an output_shape input is not imported yet")
    else:
        size = [(_shape(x)[2 + i] - 1) * strides[i] - pads[i] - pads[i + 2] + kernel[i] for i in range(2)]
    count = np.array(size[0] * size[1], np.int64)
    plane = r.emit("sub", [idx, r.emit("mul", [r.emit("div", [idx, count], {"rounding_mode": "floor"}), count])])
    return [r.emit("max_unpool2d", [x, plane], {"output_size": size})]


def _lrn(r, args):
    x = args[0]
    attrs = r.attrs()
    if _rank(x) != 4:
        raise r.error(f"LRN on a rank-{_rank(x)} input; graphc imports it on (N, C, H, W)")
    size, c = int(attrs["size"]), int(_shape(x)[1])
    alpha, beta, bias = float(attrs.get("alpha", 1e-4)), float(attrs.get("beta", 0.75)), float(attrs.get("bias", 1.0))
    before, after = (size - 1) // 2, -(-(size - 1) // 2)
    band = np.zeros((c, c, 1, 1), np.dtype(x.type.dtype.numpy))
    for out in range(c):
        band[out, max(0, out - before):min(c, out + after + 1)] = 1.0
    total = r.emit("conv2d", [r.emit("mul", [x, x]), band], {"stride": [1, 1], "padding": [0, 0],
                                                               "dilation": [1, 1], "groups": 1})
    base = r.emit("add", [r.emit("mul", [total, scalar(r, x, alpha / size)]), scalar(r, x, bias)])
    return [r.emit("div", [x, r.emit("pow", [base, scalar(r, x, beta)])])]


def _negative_part(r, x, fn):
    """``x`` where x > 0, else ``fn(min(x, 0))`` (the branch not taken stays finite)."""
    low = r.emit("minimum", [x, scalar(r, x, 0.0)])
    return r.emit("where", [r.emit("gt", [x, scalar(r, x, 0.0)]), x, fn(low)])


def _expm1_scaled(r, x, alpha, inner=1.0):
    """``alpha * (exp(x * inner) - 1)``."""
    e = r.emit("exp", [r.emit("mul", [x, scalar(r, x, inner)]) if inner != 1.0 else x])
    return r.emit("mul", [r.emit("sub", [e, scalar(r, x, 1.0)]), scalar(r, x, alpha)])


def _elu(r, args):
    alpha = float(r.attrs().get("alpha", 1.0))
    return [_negative_part(r, args[0], lambda low: _expm1_scaled(r, low, alpha))]


def _celu(r, args):
    alpha = float(r.attrs().get("alpha", 1.0))
    return [_negative_part(r, args[0], lambda low: _expm1_scaled(r, low, alpha, 1.0 / alpha))]


def _selu(r, args):
    a = r.attrs()
    alpha, gamma = float(a.get("alpha", 1.67326319217681884765625)), float(a.get("gamma", 1.05070102214813232421875))
    x = args[0]
    return [r.emit("mul", [_negative_part(r, x, lambda low: _expm1_scaled(r, low, alpha)), scalar(r, x, gamma)])]


def _prelu(r, args):
    """Before opset 7 a 1-D slope of one value per channel applies along dim 1 (PyTorch's
    PReLU as its early exporter wrote it); from 7 on the slope broadcasts numpy's way."""
    x, slope = args
    if r.version < 7 and len(_shape(slope)) == 1 and len(_shape(x)) > 2 and _shape(slope)[0] == _shape(x)[1] != 1:
        channels = [_shape(x)[1]] + [1] * (len(_shape(x)) - 2)
        slope = np.reshape(slope, channels) if _known(slope) else r.emit("reshape", [slope], {"shape": channels})
    return [r.emit("where", [r.emit("lt", [x, scalar(r, x, 0.0)]), r.emit("mul", [x, slope]), x])]


def softplus(r, x):
    """``max(x, 0) + log1p(exp(-|x|))``: finite for every x."""
    tail = r.emit("log1p", [r.emit("exp", [r.emit("neg", [r.emit("abs", [x])])])])
    return r.emit("add", [r.emit("maximum", [x, scalar(r, x, 0.0)]), tail])


def _mish(r, args):
    x = args[0]
    return [r.emit("mul", [x, r.emit("tanh", [softplus(r, x)])])]


def _softsign(r, args):
    x = args[0]
    return [r.emit("div", [x, r.emit("add", [r.emit("abs", [x]), scalar(r, x, 1.0)])])]


def _thresholded_relu(r, args):
    x = args[0]
    alpha = float(r.attrs().get("alpha", 1.0))
    return [r.emit("where", [r.emit("gt", [x, scalar(r, x, alpha)]), x, scalar(r, x, 0.0)])]


def _pooling(kind: str, common):
    """The 2-D kernels' reader where they pool as the reference does, pool_readers' otherwise."""
    general = general_pool(kind)

    def read(r, args):
        return (general if needs_general_pool(r, r.attrs(), args[0], kind) else common)(r, args)
    return read


VISION_READERS = {
    "MaxPool": _pooling("MaxPool", _max_pool), "AveragePool": _pooling("AveragePool", _avg_pool),
    "LpPool": _pooling("LpPool", _lp_pool), "GlobalLpPool": _global_lp_pool,
    "MaxUnpool": _max_unpool, "LRN": _lrn, "PRelu": _prelu, "Elu": _elu, "Celu": _celu, "Selu": _selu,
    "Mish": _mish, "Softsign": _softsign, "Softplus": lambda r, args: [softplus(r, args[0])],
    "ThresholdedRelu": _thresholded_relu,
}
