"""Fusion passes. A fusion fires only where each intermediate value has a single user and
is not a graph output or state update (the torch.fx fuser's rule)."""
from __future__ import annotations

from ..ir.graph import Graph, Node
from .rewrite import use_counts


def _single_use(counts: dict, value) -> bool:
    return counts.get(id(value), 0) == 1


def _rebuild(graph: Graph, replaced: dict, removed: set) -> Graph:
    """Swap nodes (by id) for fused ones and drop the nodes they absorbed."""
    out = graph.copy()
    out.nodes = [replaced.get(id(n), n) for n in graph.nodes if id(n) not in removed]
    return out


def _fused_meta(head: Node, name: str, ops: list) -> dict:
    return {**head.meta, "pass": name, "fused": "+".join(ops)}


def _fuse_into_relu(graph: Graph, producer_op: str, fused_op: str, pass_name: str) -> Graph:
    """``relu(producer(...))`` -> ``fused(...)`` where the producer's output has one user."""
    counts, producers = use_counts(graph), graph.producers()
    replaced, removed = {}, set()
    for node in graph.nodes:
        src = producers.get(id(node.inputs[0])) if node.op == "relu" else None
        if src is None or src.op != producer_op or not _single_use(counts, src.outputs[0]):
            continue
        replaced[id(node)] = Node(fused_op, list(src.inputs), list(node.outputs), dict(src.attrs),
                                  _fused_meta(src, pass_name, [producer_op, "relu"]))
        removed.add(id(src))
    return _rebuild(graph, replaced, removed)


def fuse_linear_relu(graph: Graph) -> Graph:
    """``relu(linear(x, w, b))`` -> ``linear_relu(x, w, b)`` when the linear output has one user.

    >>> import numpy as np, graphc as gc
    >>> from graphc import nn
    >>> g = gc.trace(nn.Sequential(nn.Linear(4, 8), nn.ReLU()), np.ones((2, 4), np.float32))
    >>> [n.op for n in fuse_linear_relu(g).nodes]
    ['linear_relu']
    """
    return _fuse_into_relu(graph, "linear", "linear_relu", "fuse_linear_relu")


def fuse_conv_relu(graph: Graph) -> Graph:
    """``relu(conv2d(...))`` -> ``conv2d_relu(...)`` (after BN folding, or a CNN without BN).

    Run it after ``fuse_conv_bn``, which takes conv+BN+relu chains whole.
    """
    return _fuse_into_relu(graph, "conv2d", "conv2d_relu", "fuse_conv_relu")


def fuse_conv_bn(graph: Graph) -> Graph:
    """conv2d -> batch_norm(_train) [-> relu] -> one ``conv_bn`` / ``conv_bn_train`` node."""
    counts, producers, users = use_counts(graph), graph.producers(), graph.users()
    replaced, removed = {}, set()
    for bn in graph.nodes:
        if bn.op not in ("batch_norm", "batch_norm_train"):
            continue
        conv = producers.get(id(bn.inputs[0]))
        if conv is None or conv.op != "conv2d" or not _single_use(counts, conv.outputs[0]) or id(conv) in removed:
            continue
        y = bn.outputs[0]
        relu = users.get(id(y), [None])[0] if _single_use(counts, y) else None
        relu = relu if relu is not None and relu.op == "relu" else None
        last = relu or bn
        attrs = {**conv.attrs, "eps": bn.attrs["eps"], "relu": relu is not None}
        ops = ["conv2d", bn.op] + (["relu"] if relu else [])
        inputs = list(conv.inputs) + list(bn.inputs[1:])
        if bn.op == "batch_norm":
            fused = Node("conv_bn", inputs, list(last.outputs), attrs, _fused_meta(conv, "fuse_conv_bn", ops))
        else:
            outputs = [last.outputs[0], conv.outputs[0]] + list(bn.outputs[1:])
            fused = Node("conv_bn_train", inputs, outputs, {**attrs, "momentum": bn.attrs["momentum"]},
                         _fused_meta(conv, "fuse_conv_bn", ops))
        replaced[id(last)] = fused
        removed.update(id(n) for n in (conv, bn) if n is not last)
    return _rebuild(graph, replaced, removed)
