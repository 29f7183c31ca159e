"""Reverse-mode autodiff as a graph pass: append the backward graph of ``loss`` w.r.t. the
named parameters, using each op's vjp rule (written in IR ops).

One central place (:func:`_accumulate`) reduces broadcast cotangents to their input's shape
and sums the cotangents of values used more than once (residual connections, shared weights).
Only cotangents on paths from a parameter to the loss are derived: nothing for inputs or labels.
"""
from __future__ import annotations

import numpy as np

from ..ir.builder import Builder
from ..ir.errors import GraphcError
from ..ir.graph import Graph, Node, Value
from ..ir.registry import get_op


def autodiff(graph: Graph, loss: Value, wrt: list[str]) -> tuple[Graph, dict[str, Value | None]]:
    """Return ``(graph with backward nodes, {param name: gradient Value or None})``.

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
    active = _depends_on(graph, [graph.state[name] for name in wrt])
    relevant = _reaches(graph, loss)
    cotangents: dict[int, Value] = {id(loss): builder.constant(np.array(1.0, loss.type.dtype.numpy), loss.type.dtype)}
    for node in reversed(graph.nodes):
        cts = [cotangents.get(id(v)) for v in node.outputs]
        if all(ct is None for ct in cts):
            continue
        needs = [id(v) in active and id(v) in relevant and v.type.dtype.is_float for v in node.inputs]
        if not any(needs):
            continue
        builder.meta = _backward_meta(node)
        grads = _vjp(builder, node, cts, needs)
        for value, grad, need in zip(node.inputs, grads, needs):
            if need and grad is not None:
                _accumulate(builder, cotangents, value, grad)
    return out, {name: cotangents.get(id(graph.state[name])) for name in wrt}


def _vjp(builder, node: Node, cts, needs):
    opdef = get_op(node.op)
    if opdef.vjp is None:
        raise GraphcError(f"op {node.op!r} has no gradient rule (it cannot be differentiated)", node.location())
    try:
        grads = opdef.vjp(builder, node, cts, needs)
    except GraphcError as e:
        raise e.located(node.location()) from None
    if len(grads) != len(node.inputs):
        raise GraphcError(f"vjp of {node.op!r} returned {len(grads)} cotangents for {len(node.inputs)} inputs")
    return grads


def _backward_meta(node: Node) -> dict:
    meta = {k: node.meta[k] for k in ("module", "module_type", "source") if k in node.meta}
    meta.update({"pass": "autodiff", "phase": "backward", "grad_of": f"%{node.outputs[0].name} ({node.op})"})
    return meta


def _accumulate(builder, cotangents, value: Value, grad: Value) -> None:
    grad = unbroadcast(builder, grad, value)
    previous = cotangents.get(id(value))
    cotangents[id(value)] = grad if previous is None else builder.emit1("add", [previous, grad])


def unbroadcast(builder, grad: Value, target: Value) -> Value:
    """Sum a cotangent over the dims that broadcasting added or stretched, to ``target``'s type."""
    shape, want = grad.type.shape, target.type.shape
    if shape != want:
        lead = len(shape) - len(want)
        axes = list(range(lead)) + [lead + i for i, d in enumerate(want) if d == 1 and shape[lead + i] != 1]
        if axes:
            grad = builder.emit1("sum", [grad], {"dims": axes, "keepdim": True})
        if grad.type.shape != want:
            grad = builder.emit1("reshape", [grad], {"shape": list(want)})
    if grad.type.dtype != target.type.dtype:
        grad = builder.emit1("cast", [grad], {"dtype": target.type.dtype.name})
    return grad


def _depends_on(graph: Graph, sources) -> set:
    """ids of values computed from any of ``sources`` (forward reachability)."""
    active = {id(v) for v in sources}
    for node in graph.nodes:
        if any(id(v) in active for v in node.inputs):
            active.update(id(v) for v in node.outputs)
    return active


def _reaches(graph: Graph, target: Value) -> set:
    """ids of values the target is computed from (backward reachability)."""
    needed = {id(target)}
    for node in reversed(graph.nodes):
        if any(id(v) in needed for v in node.outputs):
            needed.update(id(v) for v in node.inputs)
    return needed
