"""Export-time passes: freeze state into constants, then fold eval-mode BatchNorm away."""
from __future__ import annotations

import numpy as np

from ..ir.errors import GraphcError
from ..ir.graph import Graph, Node, Value
from ..ir.ops.norm import batch_norm_affine
from .rewrite import use_counts


def freeze(graph: Graph, arrays: dict) -> Graph:
    """Turn every state entry into a constant holding a copy of its current array."""
    if graph.updates:
        raise GraphcError("cannot freeze a graph that updates its state (compile it in eval mode)")
    out = graph.copy()
    for name, value in graph.state.items():
        out.add_constant(value, np.array(arrays[name], copy=True))
    out.state, out.state_roles = {}, {}
    return out


def fold_bn(graph: Graph) -> Graph:
    """Eval ``batch_norm`` with constant statistics becomes the preceding conv2d's / linear's
    new weight and bias (computed in float64, cast back) or, with no such producer, a
    per-channel multiply-add. The result holds no batch_norm node."""
    counts = use_counts(graph)
    producers = graph.producers()
    out = graph.copy()
    replaced, removed = {}, set()
    for bn in graph.nodes:
        if bn.op != "batch_norm" or not all(_const(graph, v) for v in bn.inputs[1:]):
            continue
        gamma, beta, mean, var = (graph.constant_data[v.name].astype(np.float64) for v in bn.inputs[1:])
        scale, shift = batch_norm_affine(np, gamma, beta, mean, var, bn.attrs["eps"])
        src = producers.get(id(bn.inputs[0]))
        foldable = (src is not None and src.op in ("conv2d", "linear") and counts.get(id(src.outputs[0])) == 1
                    and all(_const(graph, v) for v in src.inputs[1:]) and (src.op == "conv2d" or bn.inputs[0].type.rank == 2))
        meta = {**bn.meta, "pass": "fold_bn"}
        if foldable:
            w = graph.constant_data[src.inputs[1].name]
            bias = graph.constant_data[src.inputs[2].name].astype(np.float64) if len(src.inputs) == 3 else 0.0
            new_w = w.astype(np.float64) * scale.reshape((-1,) + (1,) * (w.ndim - 1))
            new_b = bias * scale + shift
            inputs = [src.inputs[0], _add(out, new_w.astype(w.dtype)), _add(out, new_b.astype(w.dtype))]
            replaced[id(bn)] = [Node(src.op, inputs, list(bn.outputs), dict(src.attrs), {**src.meta, "pass": "fold_bn"})]
            removed.add(id(src))
        else:
            x = bn.inputs[0]
            bshape = (1, -1) + (1,) * (x.type.rank - 2)
            dtype = x.type.dtype.numpy
            scaled = Value(out.unique_name(f"{bn.outputs[0].name}.scaled"), x.type)
            replaced[id(bn)] = [
                Node("mul", [x, _add(out, scale.reshape(bshape).astype(dtype))], [scaled], {}, meta),
                Node("add", [scaled, _add(out, shift.reshape(bshape).astype(dtype))], list(bn.outputs), {}, meta)]
    nodes = []
    for n in graph.nodes:
        if id(n) not in removed:
            nodes.extend(replaced.get(id(n), [n]))
    out.nodes = nodes
    return out


def _const(graph: Graph, value: Value) -> bool:
    return graph.constants.get(value.name) is value


def _add(graph: Graph, data: np.ndarray) -> Value:
    from ..ir.types import DType, TensorType

    name = graph.unique_name(f"c{len(graph.constants)}")
    return graph.add_constant(Value(name, TensorType(data.shape, DType.from_any(data.dtype))), data)
