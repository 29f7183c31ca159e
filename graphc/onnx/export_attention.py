"""ONNX form of graphc's fused attention core (``attention``: softmax(q @ k.T * scale + mask) @ v)
in standard ops: MatMul, Mul, Add or Where for the mask, Softmax, MatMul. With a mask, rows
that keep no key give zeros as the op does (the composite path's safe softmax: ReduceMax,
Equal, Where around the Softmax); a causal mask is a constant, or Trilu of ones shaped at run
time where the lengths are symbolic (opset 14 and later)."""
from __future__ import annotations

import numpy as np

from ..ir.errors import GraphcError
from .export_fill import shape_tensor


def write_attention(w, node, ins, out) -> None:
    q, k = node.inputs[:2]
    meta, dtype = node.meta, q.type.dtype.numpy
    rank = q.type.rank
    perm = list(range(rank))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    k_t, scores, scaled = w.fresh("key_t"), w.fresh("scores"), w.fresh("scaled")
    w.node("Transpose", [ins[1]], [k_t], meta, perm=perm)
    w.node("MatMul", [ins[0], k_t], [scores], meta)
    w.node("Mul", [scores, w.constant(np.array(node.attrs["scale"], dtype), "scale")], [scaled], meta)
    keep = None
    if len(ins) == 4:
        if node.inputs[3].type.dtype.is_float:
            masked = w.fresh("masked")
            w.node("Add", [scaled, ins[3]], [masked], meta)
            scaled = masked
        else:
            keep = ins[3]
    elif node.attrs["is_causal"]:
        keep = _causal(w, node, q.type.shape[-2], k.type.shape[-2])
    if keep is not None:
        masked = w.fresh("masked")
        w.node("Where", [keep, scaled, w.constant(np.array(-np.inf, dtype), "neg_inf")], [masked], meta)
        scaled = masked
    weights = w.fresh("weights")
    if len(ins) == 4:  # a mask may leave a row no key: zeros there, not Softmax's NaN
        _safe_softmax(w, meta, scaled, weights, dtype)
    else:
        w.node("Softmax", [scaled], [weights], meta, axis=-1)
    w.node("MatMul", [weights, ins[2]], [out], meta)


def _safe_softmax(w, meta, scores, weights, dtype) -> None:
    top, dead, live, raw = w.fresh("row_max"), w.fresh("dead_row"), w.fresh("live"), w.fresh("softmax")
    if w.opset >= 18:
        w.node("ReduceMax", [scores, w.constant(np.array([-1], np.int64), "axes")], [top], meta, keepdims=1)
    else:
        w.node("ReduceMax", [scores], [top], meta, axes=[-1], keepdims=1)
    w.node("Equal", [top, w.constant(np.array(-np.inf, dtype), "neg_inf")], [dead], meta)
    zero = w.constant(np.array(0, dtype), "zero")
    w.node("Where", [dead, zero, scores], [live], meta)
    w.node("Softmax", [live], [raw], meta, axis=-1)
    w.node("Where", [dead, zero, raw], [weights], meta)


def _causal(w, node, rows, cols) -> str:
    """A bool (rows, cols) tensor keeping j <= i."""
    if isinstance(rows, int) and isinstance(cols, int):
        return w.constant(np.tri(rows, cols, dtype=bool), "causal")
    if w.opset < 14:
        raise GraphcError(f"ONNX export: a causal attention over the symbolic lengths ({rows}, {cols}) needs Trilu, "
                          f"opset 14 or later (asked for {w.opset})", node.location())
    ones, keep = w.fresh("ones"), w.fresh("causal")
    value = w.onnx.numpy_helper.from_array(np.array([True]), "value")
    w.node("ConstantOfShape", [shape_tensor(w, node, [rows, cols])], [ones], node.meta, value=value)
    w.node("Trilu", [ones], [keep], node.meta, upper=0)
    return keep
