"""Text form of a graph: one node per line with types, like a jaxpr (grammar: docs/ir-text.md).

    graph Net(%x:f32[N,64]) {
      params: @fc1.weight:f32[128,64], @fc1.bias:f32[128]
      %0:f32[N,128] = linear(%x, @fc1.weight, @fc1.bias)  # fc1 (Linear) at net.py:12
      return %0
    }

``%name`` is an input or a node's result, ``@name`` a piece of state (parameter, buffer,
optimizer state: its state_dict key), ``$name`` a constant array (0-d constants print as
literals, ``1:i64``), so ``%2``, ``@2.weight`` and a frozen ``$2.weight`` cannot be confused.
Attr lists print as ``[1, 1]``, also with one element (``dims=[0]``).
"""
from __future__ import annotations

import numpy as np

from .graph import Graph, Node, Value, describe_location


def format_value(value: Value, graph: Graph | None = None) -> str:
    if graph is not None and value.name in graph.constants and graph.constants[value.name] is value:
        data = graph.constant_data[value.name]
        if data.ndim == 0:
            return f"{_literal(data)}:{value.type.dtype.short}"
        return f"${value.name}"
    if graph is not None and graph.state.get(value.name) is value:
        return f"@{value.name}"
    return f"%{value.name}"


def _literal(data: np.ndarray) -> str:
    item = data.item()
    return repr(item) if not isinstance(item, float) else f"{item:.8g}"


def format_attrs(attrs: dict, labels: dict | None = None) -> str:
    if not attrs:
        return ""
    parts = [f"{k}={_attr(v, labels or {})}" for k, v in attrs.items()]
    return "[" + ", ".join(parts) + "]"


def _attr(v, labels: dict) -> str:
    if isinstance(v, Graph):  # a custom op's body: printed once, after the graph that calls it
        return "{" + labels.get(id(v), v.name) + "}"
    if isinstance(v, (tuple, list)):
        return "[" + ", ".join(_attr(x, labels) for x in v) + "]"
    if isinstance(v, float):
        return f"{v:.8g}"
    return repr(v) if isinstance(v, str) else str(v)


def format_node(node: Node, graph: Graph | None = None, labels: dict | None = None) -> str:
    outs = ", ".join(f"%{v.name}:{v.type}" for v in node.outputs)
    args = ", ".join(format_value(v, graph) for v in node.inputs)
    line = f"{outs} = {node.op}{format_attrs(node.attrs, labels)}({args})"
    comment = describe_location(node.meta)
    extras = [comment] if comment else []
    if node.meta.get("grad_of"):
        extras.append(f"grad of {node.meta['grad_of']}")
    elif node.meta.get("pass"):
        extras.append(f"by {node.meta['pass']}")
    return line + ("  # " + "; ".join(extras) if extras else "")


# ops whose bodies print as indented blocks under the node (a custom op's bodies, shared by its
# calls, print once after the graph)
CONTROL_FLOW = ("cond", "scan", "while_loop")


def format_graph(graph: Graph) -> str:
    """The graph, with control-flow bodies as indented blocks under their nodes, then each body
    its custom ops call (``{log1pexp.forward}``), once each."""
    bodies = graph.bodies()
    labels, taken = {}, {}
    for body in bodies:
        taken[body.name] = taken.get(body.name, 0) + 1
        labels[id(body)] = body.name if taken[body.name] == 1 else f"{body.name}#{taken[body.name]}"
    nested = {id(v) for g in [graph, *bodies] for n in g.nodes if n.op in CONTROL_FLOW
              for v in n.attrs.values() if isinstance(v, Graph)}
    blocks = [_format_block(graph, "graph", graph.name, labels)]
    blocks += [_format_block(body, "body", labels[id(body)], labels) for body in bodies if id(body) not in nested]
    return "\n".join(blocks)


def _format_block(graph: Graph, keyword: str, label: str, labels: dict, indent: str = "") -> str:
    ins = ", ".join(f"%{v.name}:{v.type}" for v in graph.inputs)
    head = keyword if keyword == label else f"{keyword} {label}"  # a nested block: its attr, then its name
    lines = [f"{indent}{head}({ins}) {{"]
    for entry in graph.meta.get("passes", []):
        lines.append(f"  # pass {entry['name']}: {entry['nodes_before']} -> {entry['nodes_after']} nodes")
    for role, title in (("param", "params"), ("buffer", "buffers"), ("optim", "optimizer state")):
        vals = [v for k, v in graph.state.items() if graph.state_roles[k] == role]
        if vals:
            lines.append(f"  {title}: " + ", ".join(f"@{v.name}:{v.type}" for v in vals))
    arrays = [v for k, v in graph.constants.items() if graph.constant_data[k].ndim > 0]
    if arrays:
        lines.append("  constants: " + ", ".join(f"${v.name}:{v.type}" for v in arrays))
    for node in graph.nodes:
        lines.append(indent + "  " + format_node(node, graph, labels))
        if node.op in CONTROL_FLOW:
            lines += [_format_block(body, key, labels[id(body)], labels, indent + "    ")
                      for key, body in node.attrs.items() if isinstance(body, Graph)]
    lines.append(indent + "  return " + ", ".join(format_value(v, graph) for v in graph.outputs))
    for name, value in graph.updates.items():
        lines.append(f"{indent}  update @{name} <- {format_value(value, graph)}")
    lines.append(indent + "}")
    return "\n".join(lines)
