"""Widening a graph to float64 for ``verify="numeric"`` (passes/numeric_check.py): float32
value types, dtype attrs and custom op bodies become float64 where the op registry's shape
rules accept it; integer and boolean values stay as they are. The graph itself is never changed:
the evaluator gets new Node objects."""
from __future__ import annotations

from ..ir.errors import GraphcError, clip
from ..ir.graph import Graph, Node, Value
from ..ir.registry import get_op, infer_types
from ..ir.types import DType, TensorType


class Fallback(Exception):
    """The graph cannot run in float64: the message says which op and why."""


def wide(ttype: TensorType) -> TensorType:
    return ttype.with_dtype(DType.float64) if ttype.dtype is DType.float32 else ttype


def _wide_attrs(node: Node, bodies: dict) -> dict:
    """dtype attrs widened; a custom op's bodies (graph attrs) widened the same way."""
    schema, out = get_op(node.op).attrs, {}
    for key, value in node.attrs.items():
        kind = schema[key].kind
        out[key] = ("float64" if value == "float32" and kind == "dtype"
                    else _wide_body(value, bodies) if kind == "graph" and value is not None else value)
    return out


def _wide_body(body: Graph, bodies: dict) -> Graph:
    """A copy of a custom op's body with its float32 values and dtype attrs widened to float64
    (nested bodies too, each once), so a graph with custom ops is checked in float64 as well."""
    if id(body) not in bodies:
        copy = Graph(body.name)
        values = {id(v): Value(v.name, wide(v.type)) for v in body.inputs}
        copy.inputs = [values[id(v)] for v in body.inputs]
        for node in body.nodes:
            outputs = [Value(v.name, wide(v.type)) for v in node.outputs]
            copy.nodes.append(Node(node.op, [values[id(v)] for v in node.inputs], outputs,
                                   _wide_attrs(node, bodies), node.meta))
            values.update(zip((id(v) for v in node.outputs), outputs))
        copy.outputs = [values[id(v)] for v in body.outputs]
        bodies[id(body)] = (body, copy)  # the original kept alive: its id stays unique
    return bodies[id(body)][1]


def wide_nodes(graph: Graph) -> list:
    """The graph's nodes with float32 types and dtype attrs widened to float64 (new Node objects
    for the evaluator; the graph is not changed). Raises ``Fallback`` where an op's shape
    rule gives anything else for float64 inputs."""
    types = {id(v): wide(v.type) for v in graph.leaf_values()}
    nodes, bodies = [], {}
    for node in graph.nodes:
        attrs = _wide_attrs(node, bodies)
        want = [wide(v.type) for v in node.outputs]
        try:
            got = infer_types(get_op(node.op), [types[id(v)] for v in node.inputs], attrs)
        except GraphcError as e:
            raise Fallback(f"{node.op} refuses float64 ({clip(e.message, 120)})") from None
        if got != want:
            raise Fallback(f"{node.op} gives {', '.join(map(str, got))} on float64 inputs")
        types.update((id(v), t) for v, t in zip(node.outputs, want))
        nodes.append(Node(node.op, node.inputs, [Value(v.name, t) for v, t in zip(node.outputs, want)], attrs,
                          node.meta))
    return nodes
