"""Reverse-mode autodiff as a graph pass: append the backward graph of ``loss`` w.r.t. the
named parameters, using each op's vjp rule (written in IR ops).

One central place (``ir/backprop.py``'s :func:`accumulate`) reduces broadcast cotangents to their input's shape
and sums the cotangents of values used more than once (residual connections, shared weights).
Only cotangents on paths from a parameter to the loss are derived: nothing for inputs or labels.
"""
from __future__ import annotations

import numpy as np

from ..ir.backprop import backpropagate, depends_on, reaches, unbroadcast
from ..ir.builder import Builder
from ..ir.errors import GraphcError
from ..ir.graph import Graph, Node, Value

__all__ = ["autodiff", "unbroadcast"]


def autodiff(graph: Graph, loss: Value, wrt: list[str], at: dict | None = None) -> tuple[Graph, dict[str, Value | None]]:
    """Return ``(graph with backward nodes, {param name: gradient Value or None})``; ``at``
    names the value a parameter is differentiated at where it is not its state value (a
    parameter read after its update in a traced step: nothing flows back into the update).

    >>> import numpy as np, graphc as gc
    >>> from graphc import nn
    >>> from graphc.compile import trace_model
    >>> model = nn.Linear(3, 1)
    >>> graph, _ = trace_model(lambda x: model(x).sum(), (np.ones((4, 3), np.float32),), root=model)
    >>> _, grads = autodiff(graph, graph.outputs[0], ["weight", "bias"])
    >>> {name: str(g.type) for name, g in grads.items()}
    {'weight': 'f32[1,3]', 'bias': 'f32[1]'}
    """
    if loss.type.shape != () or not loss.type.dtype.is_float:
        raise GraphcError(f"the loss must be a floating-point scalar, got {loss.type}")
    out = graph.copy()
    builder = Builder(out)
    sources = {name: (at or {}).get(name, graph.state[name]) for name in wrt}
    active = depends_on(graph.nodes, list(sources.values()))
    relevant = reaches(graph.nodes, [loss])
    cotangents: dict[int, Value] = {id(loss): builder.constant(np.array(1.0, loss.type.dtype.numpy), loss.type.dtype)}
    backpropagate(builder, graph.nodes, cotangents, active, relevant, meta_of=_backward_meta)
    return out, {name: cotangents.get(id(source)) for name, source in sources.items()}


def _backward_meta(node: Node) -> dict:
    meta = {k: node.meta[k] for k in ("module", "module_type", "source") if k in node.meta}
    meta.update({"pass": "autodiff", "phase": "backward", "grad_of": f"%{node.outputs[0].name} ({node.op})"})
    return meta
