"""Fusion passes, each a list of (pattern, rewrite) rules run by ``passes.pattern.rewrite``.
A fusion fires only where each intermediate value has a single user and is not a graph
output or state update (the torch.fx fuser's rule)."""
from __future__ import annotations

from ..ir.graph import Graph, Node
from .pattern import fused_meta, pat, rewrite


def _into(fused_op: str, pass_name: str):
    """``act(producer(args))`` -> ``fused_op(args)`` with the producer's attrs."""
    def build(chain: list) -> Node:
        producer, last = chain[0], chain[-1]
        return Node(fused_op, list(producer.inputs), list(last.outputs), dict(producer.attrs),
                    fused_meta(chain, pass_name))
    return build


def _conv_bn(chain: list) -> Node:
    """conv2d -> batch_norm[_train] [-> relu]: one conv_bn (eval) or conv_bn_train node."""
    conv, bn, last = chain[0], chain[1], chain[-1]
    attrs = {**conv.attrs, "eps": bn.attrs["eps"], "relu": last.op == "relu"}
    inputs = list(conv.inputs) + list(bn.inputs[1:])
    meta = fused_meta(chain, "fuse_conv_bn")
    if bn.op == "batch_norm":
        return Node("conv_bn", inputs, list(last.outputs), attrs, meta)
    outputs = [last.outputs[0], conv.outputs[0]] + list(bn.outputs[1:])
    return Node("conv_bn_train", inputs, outputs, {**attrs, "momentum": bn.attrs["momentum"]}, meta)


_BN = pat("batch_norm", "batch_norm_train", src=pat("conv2d"))
LINEAR_RELU = [(pat("relu", src=pat("linear")), _into("linear_relu", "fuse_linear_relu"))]
CONV_RELU = [(pat("relu", src=pat("conv2d")), _into("conv2d_relu", "fuse_conv_relu"))]
CONV_BN = [(pat("relu", src=_BN), _conv_bn), (_BN, _conv_bn)]


def fuse_linear_relu(graph: Graph) -> Graph:
    """``relu(linear(x, w, b))`` -> ``linear_relu(x, w, b)`` when the linear output has one user.

    >>> import numpy as np, graphc as gc
    >>> from graphc import nn
    >>> g = gc.trace(nn.Sequential(nn.Linear(4, 8), nn.ReLU()), np.ones((2, 4), np.float32))
    >>> [n.op for n in fuse_linear_relu(g).nodes]
    ['linear_relu']
    """
    return rewrite(graph, LINEAR_RELU)


def fuse_conv_relu(graph: Graph) -> Graph:
    """``relu(conv2d(...))`` -> ``conv2d_relu(...)`` (after BN folding, or a CNN without BN).

    Run it after ``fuse_conv_bn``, which takes conv+BN+relu chains whole.
    """
    return rewrite(graph, CONV_RELU)


def fuse_conv_bn(graph: Graph) -> Graph:
    """conv2d -> batch_norm(_train) [-> relu] -> one ``conv_bn`` / ``conv_bn_train`` node."""
    return rewrite(graph, CONV_BN)
