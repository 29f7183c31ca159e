"""Fusion passes, each a list of (pattern, rewrite) rules run by ``passes.pattern.rewrite``.
A fusion fires only where each intermediate value has a single user and is not a graph
output or state update (the torch.fx fuser's rule)."""
from __future__ import annotations

import numpy as np

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


def _without_bias(node: Node, graph: Graph) -> bool:
    return len(node.inputs) == 2


def _adds_a_bias(position: int):
    """``add`` whose input ``position`` is a (features,) vector of the other input's dtype: a
    linear layer's bias, broadcast along the last dim exactly as linear adds it."""
    def check(node: Node, graph: Graph) -> bool:
        bias, product = node.inputs[position].type, node.inputs[1 - position].type
        return bias.shape == product.shape[-1:] and bias.dtype is product.dtype and node.output.type == product
    return check


def _linear_with_bias(chain: list) -> Node:
    linear, add = chain
    bias = next(v for v in add.inputs if v is not linear.outputs[0])
    return Node("linear", [*linear.inputs, bias], list(add.outputs), {}, fused_meta(chain, "fuse_linear_bias"))


def _one_over(node: Node, graph: Graph) -> bool:
    if node.attrs.get("rounding_mode") is not None:  # floor(1 / sqrt(x)) is no rsqrt
        return False
    numerator = node.inputs[0]
    data = graph.constant_data.get(numerator.name) if graph.constants.get(numerator.name) is numerator else None
    return data is not None and data.size == 1 and bool(np.all(data == 1)) and node.output.type == node.inputs[1].type


def _rsqrt(chain: list) -> Node:
    sqrt, div = chain
    return Node("rsqrt", list(sqrt.inputs), list(div.outputs), {}, fused_meta(chain, "fuse_rsqrt"))


_BN = pat("batch_norm", "batch_norm_train", src=pat("conv2d"))
LINEAR_RELU = [(pat("relu", src=pat("linear")), _into("linear_relu", "fuse_linear_relu"))]
CONV_RELU = [(pat("relu", src=pat("conv2d")), _into("conv2d_relu", "fuse_conv_relu"))]
CONV_BN = [(pat("relu", src=_BN), _conv_bn), (_BN, _conv_bn)]
LINEAR_BIAS = [(pat("add", src=pat("linear", when=_without_bias), arg=arg, when=_adds_a_bias(1 - arg)),
                _linear_with_bias) for arg in (0, 1)]
RSQRT = [(pat("div", src=pat("sqrt"), arg=1, when=_one_over), _rsqrt)]


def fuse_linear_relu(graph: Graph) -> Graph:
    """``relu(linear(x, w, b))`` -> ``linear_relu(x, w, b)`` when the linear output has one user.

    >>> import numpy as np, graphc as gc
    >>> from graphc import nn
    >>> g = gc.jit.trace(nn.Sequential(nn.Linear(4, 8), nn.ReLU()), np.ones((2, 4), np.float32))
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


def fuse_linear_bias(graph: Graph) -> Graph:
    """``linear(x, w) + b`` -> ``linear(x, w, b)`` for a (features,) ``b`` (``x @ w.T + b``, and
    ONNX's MatMul + Add for ``nn.Linear`` on 3-D inputs).

    >>> import numpy as np, graphc as gc
    >>> g = gc.jit.trace(lambda x, w, b: gc.nn.functional.linear(x, w) + b, np.ones((2, 4), np.float32),
    ...              np.ones((3, 4), np.float32), np.ones(3, np.float32))
    >>> [n.op for n in fuse_linear_bias(g).nodes]
    ['linear']
    """
    return rewrite(graph, LINEAR_BIAS)


def fuse_rsqrt(graph: Graph) -> Graph:
    """``1 / sqrt(x)`` -> ``rsqrt(x)`` (how ONNX files spell it: Sqrt + Reciprocal or Div)."""
    return rewrite(graph, RSQRT)
