"""ONNX form of the running sum of ir/ops/cumulative.py: ``cumulative`` with kind ``sum`` ->
CumSum (its ``reverse`` attr is ONNX's), bools and uint8 cast to int64 first (graphc sums
them in int64, as PyTorch). The running log-sum-exp and ``cummax`` have no single ONNX op and
are refused by the exporter with the op's name."""
from __future__ import annotations

import numpy as np

from ..ir.errors import GraphcError


def _cumulative(w, node, ins, out):
    if node.attrs["kind"] != "sum":
        raise GraphcError(f"ONNX export: cumulative {node.attrs['kind']} has no ONNX form (only running sums: CumSum)",
                          node.location())
    x = ins[0]
    if node.inputs[0].type.dtype is not node.outputs[0].type.dtype:
        x = w.fresh("as_int64")
        w.node("Cast", ins, [x], node.meta, to=7)  # TensorProto.INT64
    rank = node.inputs[0].type.rank
    if rank == 0:  # a 0-d running sum is the value itself
        w.node("Identity", [x], [out], node.meta)
        return
    axis = w.constant(np.array(node.attrs["dim"] % rank, np.int64), "axis")
    w.node("CumSum", [x, axis], [out], node.meta, reverse=int(node.attrs["reverse"]))


WRITERS = {"cumulative": _cumulative}
