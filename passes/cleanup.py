"""Dead-code elimination, common-subexpression elimination and constant folding."""
from __future__ import annotations

import numpy as np

from ..ir.graph import Graph, Node, Value
from ..ir.printer import CONTROL_FLOW
from ..ir.registry import get_op
from .rewrite import substitute


def dce(graph: Graph) -> Graph:
    """Drop nodes none of whose outputs is used (checks stay), and constants nothing reads.

    >>> import numpy as np, graphc as gc
    >>> g = gc.jit.trace(lambda x: (x.exp(), x.relu())[1], np.ones((2, 2), np.float32))
    >>> [n.op for n in dce(g).nodes]
    ['relu']
    """
    live = {id(v) for v in graph.root_values()}
    kept = []
    for node in reversed(graph.nodes):
        if get_op(node.op).effects == "check" or any(id(v) in live for v in node.outputs):
            kept.append(node)
            live.update(id(v) for v in node.inputs)
    out = graph.copy()
    out.nodes = [_with_bodies(node, dce) for node in kept[::-1]]
    for name, value in graph.constants.items():
        if id(value) not in live:
            del out.constants[name]
            del out.constant_data[name]
    return out


def _with_bodies(node: Node, clean) -> Node:
    """``node`` with ``clean`` applied to its control-flow bodies (a new node where one
    changed; a body's inputs and outputs stay as they are, so the node's types do too)."""
    if node.op not in CONTROL_FLOW:
        return node
    attrs = {k: clean(v) if isinstance(v, Graph) else v for k, v in node.attrs.items()}
    if all(attrs[k] is node.attrs[k] or len(attrs[k].nodes) == len(node.attrs[k].nodes)
           for k in attrs if isinstance(attrs[k], Graph)):
        return node  # nothing to drop or merge: keep the bodies (and the node) as they were
    return Node(node.op, node.inputs, node.outputs, attrs, node.meta)


def _constant_key(graph: Graph, value: Value):
    data = graph.constant_data[value.name]
    return ("const", value.type, data.tobytes()) if data.size <= 64 else None


def cse(graph: Graph) -> Graph:
    """Merge identical small constants and pure nodes with the same op, attrs and inputs.

    Random ops (dropout) are never merged.
    """
    seen: dict = {}
    mapping: dict[int, Value] = {}
    for value in graph.constants.values():
        key = _constant_key(graph, value)
        if key is not None:
            first = seen.setdefault(key, value)
            if first is not value:
                mapping[id(value)] = first

    def resolve(v):
        return mapping.get(id(v), v)

    for node in graph.nodes:
        if get_op(node.op).effects != "pure":
            continue
        key = (node.op, tuple(sorted(node.attrs.items())), tuple(id(resolve(v)) for v in node.inputs))
        first = seen.get(key)
        if first is None:
            seen[key] = node
        else:
            for old, new in zip(node.outputs, first.outputs):
                mapping[id(old)] = new
    out = dce(substitute(graph, mapping))
    out.nodes = [_with_bodies(node, cse) for node in out.nodes]
    return out


def fold_constants(graph: Graph, evaluate) -> Graph:
    """Evaluate pure nodes whose inputs are all constants (parameter-free subgraphs) once.

    ``evaluate(node, arrays) -> [arrays]`` runs one node; the caller supplies it (passes
    import only the IR, so the executor's kernels come in from outside).
    """
    out = graph.copy()
    out.nodes = []
    mapping: dict[int, Value] = {}
    taken = graph.value_names()
    for node in graph.nodes:
        inputs = [mapping.get(id(v), v) for v in node.inputs]
        foldable = (inputs and get_op(node.op).effects == "pure"
                    and all(out.constants.get(v.name) is v for v in inputs)
                    and all(v.type.is_static for v in node.outputs))
        if not foldable:
            out.nodes.append(node if inputs == node.inputs else Node(node.op, inputs, node.outputs, node.attrs,
                                                                       node.meta))
            continue
        results = evaluate(node, [out.constant_data[v.name] for v in inputs])
        for value, data in zip(node.outputs, results):
            name = out.unique_name(f"c{len(out.constants)}", taken)
            taken.add(name)
            folded = Value(name, value.type)
            out.add_constant(folded, np.asarray(data, dtype=value.type.dtype.numpy))
            mapping[id(value)] = folded
    return dce(substitute(out, mapping))
