"""Operands an import needs as numbers (axes, shapes, pads, starts, a trip count) when the
model computes them with graph ops.

A reader asks ``r.static(x, what)``. When ``x`` is a graph Value computed from constants only
(``Constant -> Add -> Reshape``'s shape), :func:`evaluate` runs the nodes that make it, each
through ``run_graph_node`` (the plan's own kernels), and the reader gets the array. When it
depends on graph inputs, the import cannot fix the plan's shapes yet: :class:`NeedsInputValues`
names those inputs, and the importer returns a plan specialized on their values at each call
(``specialize.ValueSpecializedPlan``), as ``torch.compile`` specializes on the ints it is
given. A value computed inside a loop body or from a random draw has no fixed value: refused.
"""
from __future__ import annotations

from ..ir.errors import GraphcError
from ..ir.graph import Value
from ..ir.registry import get_op
from ..executor.budget import value_bytes


class NeedsInputValues(GraphcError):
    """The import needs the values of graph inputs ``names`` (shape operands computed from them)."""

    def __init__(self, message: str, names, where: str | None = None):
        super().__init__(message, where)
        self.names = frozenset(names)


def _captured_outer_values(reader) -> dict:
    """id(a body's captured input) -> the enclosing graph's Value it reads (control_import)."""
    captured = getattr(reader, "captured", {})
    by_key = {id(v): v for v in getattr(reader, "outer", [])}
    return {id(inner): by_key[key] for key, inner in captured.items() if key in by_key}


def evaluate(reader, value: Value, what: str):
    """``value``'s array, computed from the graph's constants (see the module docstring)."""
    cache = reader.__dict__.setdefault("evaluated", {})
    if id(value) in cache:
        return cache[id(value)][1]
    graph = reader.graph
    producers = {id(out): node for node in graph.nodes for out in node.outputs}
    constants = {id(v): graph.constant_data[name] for name, v in graph.constants.items()}
    inputs = {id(v): v for v in graph.inputs}
    outer = _captured_outer_values(reader)
    needed, order, seen, stack = set(), [], set(), [value]
    while stack:  # the nodes value depends on, dependencies first (graph.nodes is in that order)
        v = stack.pop()
        if id(v) in seen or id(v) in constants or id(v) in cache:
            continue
        seen.add(id(v))
        if id(v) in outer:  # a subgraph's input reading a value of the graph around it
            constants[id(v)] = evaluate(reader.parent, outer[id(v)], what)
            continue
        if id(v) in inputs:
            if hasattr(reader, "parent"):
                raise reader.error(f"{what} must be known while importing, but it is computed from the values "
                                   "a loop or branch body is given")
            needed.add(v.name)
            continue
        node = producers.get(id(v))
        if node is None:
            raise reader.error(f"{what} must be known while importing, but it is computed from a value outside "
                               "this graph (a loop's or branch's own input)")
        order.append(node)
        stack.extend(node.inputs)
    onnx_names = {clean: onnx for onnx, clean in getattr(reader, "input_names", {}).items()}
    if needed:
        names = sorted(onnx_names.get(n, n) for n in needed)
        raise NeedsInputValues(f"{what} is computed from the values of graph input(s) {', '.join(names)}: the plan's "
                               "shapes depend on them", names)
    env = {**constants, **{key: array for key, (_, array) in cache.items()}}
    position = {id(node): index for index, node in enumerate(graph.nodes)}
    for node in sorted(set(order), key=lambda n: position[id(n)]):
        if get_op(node.op).effects != "pure":
            raise reader.error(f"{what} must be known while importing, but it is computed by {node.op} "
                               f"({get_op(node.op).effects}), which has no fixed value")
        for out in node.outputs:
            if not out.type.is_static or value_bytes(out.type) > reader.budget:
                raise reader.error(f"{what} would be computed from {out.type}, over the memory budget or not static")
        from ..executor.run_node import run_graph_node

        for out, array in zip(node.outputs, run_graph_node(node, [env[id(i)] for i in node.inputs])):
            env[id(out)] = array
            cache[id(out)] = (out, array)  # out kept alive: its id stays unique
    return env[id(value)]
