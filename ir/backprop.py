"""Reverse mode over a list of nodes, shared by the autodiff pass and the control-flow vjps.

:func:`backpropagate` walks nodes backwards from seeded cotangents and calls each op's vjp
rule; :func:`accumulate` is the one place where broadcast cotangents are reduced to their
input's shape and the cotangents of a value used more than once are summed. :func:`vjp_body`
turns a body graph (a ``cond`` branch, a ``scan`` step) into the graph of its vjp, which a
control-flow node's own vjp then runs as a body: that is how gradients get through bodies.
"""
from __future__ import annotations

from .builder import Builder
from .complex_support import check_gradient, complex_vjp
from .errors import GraphcError
from .graph import Graph, Node, Value
from .registry import get_op


def backpropagate(builder: Builder, nodes: list, cotangents: dict, active: set, relevant: set | None = None,
                  meta_of=None) -> dict:
    """Run the vjp rules of ``nodes`` in reverse, adding into ``cotangents`` (``id(value) ->
    Value``). Only inputs in ``active`` (computed from a source) and ``relevant`` (reaching a
    seed; None: all) get cotangents. ``meta_of(node)`` gives the meta of the nodes emitted."""
    for node in reversed(nodes):
        cts = [cotangents.get(id(v)) for v in node.outputs]
        if all(ct is None for ct in cts):
            continue
        needs = [id(v) in active and (relevant is None or id(v) in relevant) and differentiable_dtype(v.type.dtype)
                 for v in node.inputs]
        if not any(needs):
            continue
        check_gradient(get_op(node.op), node)
        if meta_of is not None:
            builder.meta = meta_of(node)
        grads = run_vjp(builder, node, cts, needs)
        for value, grad, need in zip(node.inputs, grads, needs):
            if need and grad is not None:
                accumulate(builder, cotangents, value, grad)
    return cotangents


def run_vjp(builder, node: Node, cts, needs):
    opdef = get_op(node.op)
    if opdef.vjp is None:
        raise GraphcError(opdef.no_gradient or f"op {node.op!r} has no gradient rule (it cannot be differentiated)",
                          node.location())
    rule = complex_vjp(node) or opdef.vjp
    try:
        grads = rule(builder, node, cts, needs)
    except GraphcError as e:
        raise e.located(node.location()) from None
    if len(grads) != len(node.inputs):
        raise GraphcError(f"vjp of {node.op!r} returned {len(grads)} cotangents for {len(node.inputs)} inputs")
    return grads


def accumulate(builder, cotangents: dict, value: Value, grad: Value) -> None:
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


def depends_on(nodes: list, sources) -> set:
    """ids of values computed from any of ``sources`` (forward reachability)."""
    active = {id(v) for v in sources}
    for node in nodes:
        if any(id(v) in active for v in node.inputs):
            active.update(id(v) for v in node.outputs)
    return active


def reaches(nodes: list, targets) -> set:
    """ids of values the targets are computed from (backward reachability)."""
    needed = {id(t) for t in targets}
    for node in reversed(nodes):
        if any(id(v) in needed for v in node.outputs):
            needed.update(id(v) for v in node.inputs)
    return needed


def zeros_like(builder, value: Value) -> Value:
    t = value.type
    return builder.emit1("full", [], {"shape": list(t.shape), "value": 0.0, "dtype": t.dtype.name})


def differentiable(values) -> list:
    """Indices of the float values (the ones a cotangent flows through)."""
    return [i for i, v in enumerate(values) if differentiable_dtype(v.type.dtype)]


def differentiable_dtype(dtype) -> bool:
    """Float and complex values carry cotangents (complex ones only across the ops
    ir/complex_support.py allows)."""
    return dtype.is_float or dtype.is_complex


def vjp_body(body: Graph, wrt: list, name: str, seeded: list | None = None) -> Graph:
    """The vjp of ``body`` as a graph: inputs ``(body inputs..., one cotangent per output in
    ``seeded``)`` (default: every float output; a branch's output nothing differentiates, such
    as a running statistic, gets none), outputs one gradient per index in ``wrt`` (zeros where
    none flows). The forward
    is recomputed inside (a body keeps no residuals of its own), and nodes the gradients do
    not need are left out.

    >>> from graphc.ir import Graph, Value, TensorType, DType, Builder
    >>> g = Graph("square")
    >>> x = g.add_input(Value("x", TensorType((3,), DType.float32)))
    >>> g.outputs = [Builder(g).emit1("mul", [x, x])]
    >>> [n.op for n in vjp_body(g, [0], "square.vjp").nodes]
    ['mul', 'mul', 'add']
    """
    out = Graph(name)
    for v in body.inputs:
        out.add_input(Value(v.name, v.type))
    builder = Builder(out)
    results = builder.inline(body, out.inputs)  # the forward, recomputed
    forward = list(out.nodes)
    cotangents: dict = {}
    for i in differentiable(body.outputs) if seeded is None else seeded:
        ct = out.add_input(Value(out.unique_name(f"ct{i}"), body.outputs[i].type))
        builder.reserve(ct.name)
        accumulate(builder, cotangents, results[i], ct)
    sources = [out.inputs[i] for i in wrt]
    builder.meta = {"pass": "autodiff", "phase": "backward"}
    backpropagate(builder, forward, cotangents, depends_on(forward, sources))
    out.outputs = [cotangents.get(id(s)) or zeros_like(builder, s) for s in sources]
    needed = reaches(out.nodes, out.outputs)
    out.nodes = [n for n in out.nodes if any(id(v) in needed for v in n.outputs)]
    return out


def hoist_constants(builder: Builder, bodies: list) -> list:
    """Bodies read only their inputs (a plan file's bodies hold no constants), but a vjp rule
    inside :func:`vjp_body` may make one (``where``'s scalar zero). Each such constant becomes
    a constant of the graph ``builder`` builds, passed to every body in ``bodies`` as a
    trailing input (unused by the others, whose inputs must line up). Returns those values."""
    outer = []
    for body in bodies:
        for name, value in list(body.constants.items()):
            outer.append(builder.constant(body.constant_data.pop(name), value.type.dtype))
            del body.constants[name]
            for other in bodies:  # the constant's own Value becomes its body's input: no node changes
                other.add_input(value if other is body else Value(other.unique_name(name), value.type))
    return outer
