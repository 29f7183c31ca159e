"""Readers of ONNX's normalization ops (see ``readers`` for the contract): BatchNormalization
(inference), LayerNormalization, InstanceNormalization."""
from __future__ import annotations

import numpy as np

from ..ir.graph import Value
from .elementwise_readers import scalar
from .shape_readers import _known, _rank


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


NORM_READERS = {"BatchNormalization": _batch_norm, "LayerNormalization": _layer_norm,
                "InstanceNormalization": _instance_norm}
