"""Shared helpers for passes: use counts and value substitution (building new nodes, never
mutating the input graph's nodes)."""
from __future__ import annotations

from ..ir.graph import Graph, Node, Value


def use_counts(graph: Graph) -> dict[int, int]:
    """``id(value) -> number of uses`` (node input slots, graph outputs and state updates)."""
    counts: dict[int, int] = {}
    for node in graph.nodes:
        for v in node.inputs:
            counts[id(v)] = counts.get(id(v), 0) + 1
    for v in graph.root_values():
        counts[id(v)] = counts.get(id(v), 0) + 1
    return counts


def substitute(graph: Graph, mapping: dict[int, Value]) -> Graph:
    """A copy of ``graph`` where every use of a value in ``mapping`` reads its replacement."""
    if not mapping:
        return graph.copy()

    def sub(v: Value) -> Value:
        while id(v) in mapping:
            v = mapping[id(v)]
        return v

    out = graph.copy()
    out.nodes = [n if not any(id(v) in mapping for v in n.inputs)
                 else Node(n.op, [sub(v) for v in n.inputs], n.outputs, n.attrs, n.meta) for n in graph.nodes]
    out.outputs = [sub(v) for v in graph.outputs]
    out.updates = {k: sub(v) for k, v in graph.updates.items()}
    return out
