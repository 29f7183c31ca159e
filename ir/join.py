"""Join two traces of one function that parted at a branch into one graph with a ``cond`` node.

The tracer runs a function whose Python branch asked a traced boolean for its value twice,
with the decision forced each way (graphc/branching.py); the two graphs share a prefix (the
nodes before and around the branch that do not depend on it), then part, and usually meet
again: the code after an ``if`` runs the same ops on different values. :func:`join_traces`
keeps the shared prefix and the shared suffix once, and puts what differs into the two
branches of one ``cond`` whose outputs are the values the suffix reads from either side
(``w2 = w2a if prev_loss < 5.0 else w2b`` joins to a cond returning ``w2a`` or ``w2b``).
"""
from __future__ import annotations

import numpy as np

from .builder import Builder
from .errors import TraceError
from .graph import Graph, Node, Value
from .printer import format_graph

PASS_META = {"pass": "join_branches"}


def _same_attr(a, b) -> bool:
    if isinstance(a, Graph) or isinstance(b, Graph):
        return isinstance(a, Graph) and isinstance(b, Graph) and format_graph(a) == format_graph(b)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same_attr(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _alike(nt: Node, nf: Node) -> bool:
    """Same op, attrs and output types (inputs aside)."""
    return (nt.op == nf.op and nt.attrs.keys() == nf.attrs.keys() and len(nt.inputs) == len(nf.inputs)
            and all(_same_attr(nt.attrs[k], nf.attrs[k]) for k in nt.attrs)
            and [v.type for v in nt.outputs] == [v.type for v in nf.outputs])


class _Sides:
    """What is known of the two traces while they are joined: ``same`` maps a value of the
    false side to the true side's equal value (leaves, shared prefix, shared constants)."""

    def __init__(self, gt: Graph, gf: Graph, where):
        self.gt, self.gf, self.where = gt, gf, where
        self.same: dict[int, Value] = {}
        self.extra_constants: dict[str, tuple] = {}  # a constant only the false side has
        if [(v.name, v.type) for v in gt.inputs] != [(v.name, v.type) for v in gf.inputs]:
            self.refuse("take different inputs (a backward() or optimizer.step() on one side only?)")
        if {k: v.type for k, v in gt.state.items()} != {k: v.type for k, v in gf.state.items()}:
            self.refuse("use different model state (an optimizer.step() on one side only?)")
        self.same.update((id(f), t) for t, f in zip(gt.inputs, gf.inputs))
        self.same.update((id(gf.state[k]), v) for k, v in gt.state.items())
        for name, vf in gf.constants.items():
            vt = gt.constants.get(name)
            data = gf.constant_data[name]
            if vt is not None and vt.type == vf.type and np.array_equal(gt.constant_data[name], data, equal_nan=True):
                self.same[id(vf)] = vt
            else:
                self.extra_constants[name] = (vf, data)

    def refuse(self, why: str):
        raise TraceError(f"the two sides of the branch {why}; a compiled branch may differ only in the tensor values "
                         "it computes: use gc.cond, gc.where, or keep the decision outside the compiled function",
                         self.where)


def join_traces(gt: Graph, gf: Graph, pred: tuple, where=None, meta=None) -> tuple[Graph, dict]:
    """``(joined graph, {true side value name -> joined value name})``. ``pred``: the
    predicate's Value on each side; ``where``: the branch's location, for errors."""
    sides = _Sides(gt, gf, where)
    nt, nf = gt.nodes, gf.nodes
    p = 0
    while p < min(len(nt), len(nf)) and _alike(nt[p], nf[p]) and all(
            sides.same.get(id(b)) is a for a, b in zip(nt[p].inputs, nf[p].inputs)):
        sides.same.update((id(b), a) for a, b in zip(nt[p].outputs, nf[p].outputs))
        p += 1
    if sides.same.get(id(pred[1])) is not pred[0]:
        sides.refuse("compute different values before the decision (is the function deterministic?)")
    s = 0
    while s < min(len(nt), len(nf)) - p and _alike(nt[len(nt) - 1 - s], nf[len(nf) - 1 - s]):
        s += 1
    s, uses, joins = _settle_suffix(sides, p, s)
    return _build(sides, p, s, uses, joins, pred[0], meta or {})


def _uses(gt: Graph, gf: Graph, suffix_t: list, suffix_f: list) -> list:
    """``(where, true value, false value)`` for every value the suffix, the outputs, the
    updates and the losses read; ``where`` is (suffix node index, slot) or a root name."""
    out = [((j, k), a, b) for j, (x, y) in enumerate(zip(suffix_t, suffix_f)) for k, (a, b) in
           enumerate(zip(x.inputs, y.inputs))]
    if len(gt.outputs) != len(gf.outputs):
        raise TraceError(f"the two sides of the branch return {len(gt.outputs)} and {len(gf.outputs)} values")
    out += [(("output", i), a, b) for i, (a, b) in enumerate(zip(gt.outputs, gf.outputs))]
    for name in dict.fromkeys([*gt.updates, *gf.updates]):
        out.append((("update", name), gt.updates.get(name, gt.state[name]), gf.updates.get(name, gf.state[name])))
    return out


def _settle_suffix(sides, p, s):
    """Shrink the shared suffix until every value it reads is either shared, made by the
    suffix at the same place on both sides, or joinable (same type on both sides)."""
    gt, gf = sides.gt, sides.gf
    losses_t, losses_f = _loss_values(gt), _loss_values(gf)
    if len(losses_t) != len(losses_f):
        sides.refuse("call backward() a different number of times")
    while True:
        suffix_t, suffix_f = gt.nodes[len(gt.nodes) - s:], gf.nodes[len(gf.nodes) - s:]
        made_t = {id(v): (j, k) for j, n in enumerate(suffix_t) for k, v in enumerate(n.outputs)}
        made_f = {id(v): (j, k) for j, n in enumerate(suffix_f) for k, v in enumerate(n.outputs)}
        uses = _uses(gt, gf, suffix_t, suffix_f) + [(("loss", i), a, b) for i, (a, b) in
                                                    enumerate(zip(losses_t, losses_f))]
        joins, cut = {}, -1
        for place, a, b in uses:
            at, af = made_t.get(id(a)), made_f.get(id(b))
            if at is not None or af is not None:
                if at != af:  # the suffix node making it is not shared after all
                    cut = max(cut, *(x[0] for x in (at, af) if x is not None))
                continue
            if sides.same.get(id(b)) is a:
                continue
            if a.type != b.type:
                if isinstance(place[0], int):
                    cut = max(cut, place[0])
                    continue
                sides.refuse(f"give {place[0]} {place[1]} different types ({a.type} and {b.type})")
            joins.setdefault((id(a), id(b)), (a, b))
        if cut < 0:
            return s, uses, list(joins.values())
        s -= cut + 1


def _loss_values(graph: Graph) -> list:
    by_name = graph.value_by_name()
    return [by_name[name] for name in graph.meta.get("training", {}).get("losses", [])]


def _build(sides, p, s, uses, joins, pred, meta) -> tuple[Graph, dict]:
    gt, gf = sides.gt, sides.gf
    out = gt.copy()
    for name, (vf, data) in sides.extra_constants.items():
        value = out.add_constant(Value(out.unique_name(f"{name}_else"), vf.type), data)
        sides.same[id(vf)] = value
    builder = Builder(out)
    middle_t, middle_f = gt.nodes[p:len(gt.nodes) - s], gf.nodes[p:len(gf.nodes) - s]
    operands: dict[int, Value] = {}
    branch_t = _branch("true_branch", middle_t, [a for a, _ in joins], lambda v: v, operands)
    branch_f = _branch("false_branch", middle_f, [b for _, b in joins], lambda v: sides.same.get(id(v)), operands)
    for branch in (branch_t, branch_f):  # both read every operand, in one order
        own = {id(v): ph for v, ph in branch.meta.pop("reads")}
        taken = branch.value_names()
        branch.inputs = [own.get(key) or _unused(branch, v, taken) for key, v in operands.items()]
    results = builder.emit("cond", [pred, *operands.values()], {"true_branch": branch_t, "false_branch": branch_f},
                           {**meta, **PASS_META}) if joins else []
    cond_nodes = out.nodes[len(gt.nodes):]
    joined = {key: r for key, r in zip(((id(a), id(b)) for a, b in joins), results)}

    def resolve(a, b):
        return joined.get((id(a), id(b)), a)
    suffix = []
    for j, node in enumerate(gt.nodes[len(gt.nodes) - s:]):
        inputs = [resolve(a, b) for (place, a, b) in uses if place[0] == j and isinstance(place[0], int)]
        suffix.append(node if inputs == node.inputs else Node(node.op, inputs, node.outputs, node.attrs, node.meta))
    out.nodes = gt.nodes[:p] + cond_nodes + suffix
    rename = {}
    for place, a, b in uses:
        if isinstance(place[0], int):
            continue
        new = resolve(a, b)
        if place[0] == "output":
            out.outputs[place[1]] = new
        elif place[0] == "update":
            if new is not gt.state[place[1]]:
                out.updates[place[1]] = new
        if new is not a:
            rename[a.name] = new.name
    return out, rename


def _unused(graph: Graph, like: Value, taken: set) -> Value:
    """An input a body does not read (the other body does), named apart from every other."""
    name = graph.unique_name("unused", taken)
    taken.add(name)
    return Value(name, like.type)


def _branch(name: str, nodes: list, results: list, outer, operands: dict) -> Graph:
    """A branch body: ``nodes`` copied, reading placeholders for the values from outside
    (``outer`` maps one of those to the joined graph's value); returns ``results``."""
    body = Graph(name)
    builder = Builder(body)
    env: dict[int, Value] = {}
    reads = []

    def read(v: Value) -> Value:
        if id(v) not in env:
            value = outer(v)
            if value is None:
                raise TraceError(f"the branch reads %{v.name}, which the other side does not have")
            operands.setdefault(id(value), value)
            placeholder = Value(builder.fresh_name(), v.type)
            env[id(v)] = placeholder
            reads.append((value, placeholder))
        return env[id(v)]
    for node in nodes:
        inputs = [read(v) for v in node.inputs]
        outputs = [Value(builder.fresh_name(), v.type) for v in node.outputs]
        body.nodes.append(Node(node.op, inputs, outputs, node.attrs, node.meta))
        env.update(zip((id(v) for v in node.outputs), outputs))
    body.outputs = [read(v) for v in results]
    body.meta["reads"] = reads
    return body
