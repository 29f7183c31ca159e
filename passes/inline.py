"""``inline_calls``: replace every ``custom_call`` node by the nodes of its body.

Inlined, a custom op's ops get planned into the arena and seen by the fusions and the ONNX
writer like any traced op. Training pipelines inline after autodiff: before it, autodiff
must see the call, whose vjp is the user's backward, not the derivative of the body's ops.
"""
from __future__ import annotations

from ..ir.builder import Builder
from ..ir.graph import Graph, Node, Value

MAX_ROUNDS = 64  # bodies call bodies at most this deep (the plan file allows 16)
PASS_META = {"pass": "inline_calls"}


def inline_calls(graph: Graph) -> Graph:
    """A copy of ``graph`` with no ``custom_call`` node (nested calls inlined too).

    >>> import graphc as gc
    >>> from graphc.core.custom_ops import CustomOp
    >>> class Twice:
    ...     forward = staticmethod(lambda ctx, x: x * 2)
    ...     backward = staticmethod(lambda ctx, g: g * 2)
    >>> op = CustomOp(Twice)
    >>> g = gc.jit.trace(lambda x: op(x).relu(), gc.ones(3).numpy())
    >>> [n.op for n in g.nodes], [n.op for n in inline_calls(g).nodes]
    (['custom_call', 'relu'], ['mul', 'relu'])
    """
    out = graph.copy()
    for _ in range(MAX_ROUNDS):
        if not any(n.op == "custom_call" for n in out.nodes):
            return out
        out = _inline_once(out)
    raise ValueError(f"custom ops nested more than {MAX_ROUNDS} deep")


def _inline_once(graph: Graph) -> Graph:
    builder = Builder(graph)
    mapping: dict[int, Value] = {}

    def sub(v: Value) -> Value:
        return mapping.get(id(v), v)

    nodes = []
    for node in graph.nodes:
        if node.op != "custom_call":
            inputs = [sub(v) for v in node.inputs]
            nodes.append(node if inputs == node.inputs else Node(node.op, inputs, node.outputs, node.attrs, node.meta))
            continue
        body = node.attrs["forward"]
        env = {id(b): sub(v) for b, v in zip(body.inputs, node.inputs)}
        meta = {k: v for k, v in node.meta.items() if k in ("module", "module_type", "phase", "grad_of")}
        for inner in body.nodes:
            outputs = [Value(builder.fresh_name(), v.type) for v in inner.outputs]
            env.update(zip((id(v) for v in inner.outputs), outputs))
            nodes.append(Node(inner.op, [env[id(v)] for v in inner.inputs], outputs, inner.attrs,
                              {**inner.meta, **meta, **PASS_META, "inlined_from": node.attrs["name"]}))
        mapping.update(zip((id(v) for v in node.outputs), (env[id(b)] for b in body.outputs)))
    out = graph.copy()
    out.nodes = nodes
    out.outputs = [sub(v) for v in graph.outputs]
    out.updates = {k: sub(v) for k, v in graph.updates.items()}
    return out
