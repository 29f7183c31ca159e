"""ONNX form of graphc's fused recurrent cells (graphc/ir/ops/recurrent_cell.py) in standard
ops: Split into the gates, Sigmoid / Tanh, Mul, Add, Sub; the backward's workspace output as a
Concat of the activations (an inference graph leaves it unread, but every output a node
declares is written). The cells have several outputs, so they are written as the control-flow
nodes are: ``writer(w, node, ins, outs)``."""
from __future__ import annotations

import numpy as np


def _split(w, node, packed: str, count: int, base: str) -> list:
    """``packed`` (..., count * H) -> ``count`` names of (..., H), with the sizes as an input
    (the form opsets 13 and later share)."""
    hidden = int(node.inputs[-1].type.shape[-1])
    parts = [w.fresh(f"{base}{k}") for k in range(count)]
    w.node("Split", [packed, w.constant(np.array([hidden] * count, np.int64), "split")], parts, node.meta, axis=-1)
    return parts


def _op(w, node, op_type: str, ins: list, base: str, out: str | None = None) -> str:
    out = out or w.fresh(base)
    w.node(op_type, ins, [out], node.meta)
    return out


def write_lstm_cell(w, node, ins, outs) -> None:
    """c' = sigmoid(f) * c + sigmoid(i) * tanh(g), h = sigmoid(o) * tanh(c')."""
    i, f, g, o = _split(w, node, ins[0], 4, "gate")
    i, f, o = (_op(w, node, "Sigmoid", [x], "sigmoid") for x in (i, f, o))
    g = _op(w, node, "Tanh", [g], "tanh")
    kept, new = _op(w, node, "Mul", [f, ins[1]], "keep"), _op(w, node, "Mul", [i, g], "write")
    _op(w, node, "Add", [kept, new], "c", outs[1])
    tc = _op(w, node, "Tanh", [outs[1]], "tanh_c")
    _op(w, node, "Mul", [o, tc], "h", outs[0])
    w.node("Concat", [i, f, g, o, tc], [outs[2]], node.meta, axis=-1)


def write_gru_cell(w, node, ins, outs) -> None:
    """r, z = sigmoid(gi + gh) per gate, n = tanh(i_n + r * h_n), h' = n + z * (h - n)."""
    i_r, i_z, i_n = _split(w, node, ins[0], 3, "gi")
    h_r, h_z, h_n = _split(w, node, ins[1], 3, "gh")
    r = _op(w, node, "Sigmoid", [_op(w, node, "Add", [i_r, h_r], "r_in")], "r")
    z = _op(w, node, "Sigmoid", [_op(w, node, "Add", [i_z, h_z], "z_in")], "z")
    n = _op(w, node, "Tanh", [_op(w, node, "Add", [i_n, _op(w, node, "Mul", [r, h_n], "r_hn")], "n_in")], "n")
    step = _op(w, node, "Mul", [z, _op(w, node, "Sub", [ins[2], n], "h_minus_n")], "z_step")
    _op(w, node, "Add", [n, step], "h", outs[0])
    w.node("Concat", [r, z, n, h_n], [outs[1]], node.meta, axis=-1)


RECURRENT_CELL_WRITERS = {"lstm_cell": write_lstm_cell, "gru_cell": write_gru_cell}
