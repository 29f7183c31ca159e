"""Control-flow bodies in pictures: each body of a ``cond``, ``scan`` or ``while_loop`` node is
a cluster beside the node, labelled with its attr name (``true_branch``, ``false_branch``,
``body``, ``cond``; the body's own name follows when it differs: ``body (scan_step)``).

- The cluster's id is ``<node id>.<attr>`` (``n2.true_branch``); it sits in the node's
  cluster. Bodies inside bodies nest, with ids that grow the same way
  (``n1.body.n2.false_branch``).
- One ``arg`` node per body input the body reads (``n2.true_branch.a0``), fed by a dashed
  *bind* edge from the node's operand it stands for: a scan's carry from its ``init``, a
  scanned input from the whole sequence, a captured value from where it was captured. An
  operand that is a scalar literal goes into the label instead (``captured=2:f32``).
- The body's ops (``n2.true_branch.n0``) and array constants (``n2.true_branch.v0``) are
  drawn as at the top level, in the node's phase colour.
- One ``result`` node (``n2.true_branch.r``, "return") reads the body's outputs and sends a
  dashed edge to the node: the node's results come out of its bodies, so layouts put the
  node below them.
- An operand a body reads reaches the node through the body, so its direct edge to the node
  is a *fold* edge (``style="fold"``), drawn only by the HTML page while the node's bodies
  are folded away; the predicate of a ``cond``, and operands no body reads, keep theirs.

Custom ops (``custom_call``) keep their bodies in the tooltip (their body is not drawn).

>>> import numpy as np, graphc as gc
>>> from graphc.viz.model import build
>>> g = gc.jit.trace(lambda x: gc.cond(x.sum() > 0, lambda a: a.relu(), lambda a: -a, (x,)),
...                  np.ones((2, 3), np.float32))
>>> vg = build(g)
>>> [c.label for c in vg.clusters.values() if c.kind == "body"]
['true_branch', 'false_branch']
>>> [n.id for n in vg.nodes.values() if n.cluster == "n2.true_branch"]
['n2.true_branch.a0', 'n2.true_branch.n0', 'n2.true_branch.r']
>>> [(e.src, e.dst) for e in vg.edges if e.style == "bind"][:2]
[('v0f', 'n2.true_branch.a0'), ('n2.true_branch.r', 'n2')]
>>> [(e.src, e.dst) for e in vg.edges if e.dst == "n2"]
[('n1', 'n2'), ('n2.true_branch.r', 'n2'), ('n2.false_branch.r', 'n2'), ('v0f', 'n2')]
>>> [e.style for e in vg.edges if e.dst == "n2"]
['', 'bind', 'bind', 'fold']
"""
from __future__ import annotations

from ..ir.graph import Graph, Node
from ..ir.printer import CONTROL_FLOW, format_value
from .view import VCluster, VEdge, VizGraph, VNode, op_details

__all__ = ["add_bodies", "bound_operands", "input_roles"]


def add_bodies(vg: VizGraph, graph: Graph, source) -> None:
    """Draw the bodies of ``graph``'s control-flow nodes into ``vg`` (node ``i`` is ``n<i>``);
    ``source(value, phase)`` is the id of the view node drawing a value of ``graph``, or None."""
    seen: set = set()
    for i, node in enumerate(graph.nodes):
        if node.op in CONTROL_FLOW:
            owner = vg.nodes[f"n{i}"]
            _node_bodies(vg, seen, owner, node, graph, lambda v, phase=owner.phase: source(v, phase))


def _bodies(node: Node) -> list:
    return [(k, v) for k, v in node.attrs.items() if isinstance(v, Graph)] if node.op in CONTROL_FLOW else []


def _read(body: Graph) -> set:
    return {id(v) for n in body.nodes for v in n.inputs} | {id(v) for v in body.outputs}


def bound_operands(node: Node) -> set:
    """Indices of the operands of a control-flow node that one of its bodies reads (drawn
    flowing into the body, not straight into the node); empty for other ops.

    >>> import numpy as np, graphc as gc
    >>> g = gc.jit.trace(lambda x: gc.cond(x.sum() > 0, lambda a: a.relu(), lambda a: -a, (x,)),
    ...                  np.ones((2, 3), np.float32))
    >>> bound_operands(g.nodes[-1]), bound_operands(g.nodes[0])
    ({1}, set())
    """
    out = set()
    for _, body in _bodies(node):
        offset, read = len(node.inputs) - len(body.inputs), _read(body)
        if offset >= 0:
            out |= {offset + k for k, v in enumerate(body.inputs) if id(v) in read}
    return out


def input_roles(node: Node, count: int) -> list:
    """What each of the last ``count`` operands of a control-flow node is to its bodies.

    >>> from graphc.ir.graph import Node
    >>> input_roles(Node("scan", [], [], {"carries": 1, "scanned": 2}, {}), 4)
    ['carry', 'scanned (one position per step)', 'scanned (one position per step)', 'captured']
    """
    if node.op == "scan":
        c, x = node.attrs["carries"], node.attrs["scanned"]
        return (["carry"] * c + ["scanned (one position per step)"] * x + ["captured"] * count)[:count]
    if node.op == "while_loop":
        n = node.attrs["carried"]
        return (["carried"] * n + ["captured"] * count)[:count]
    return ["operand"] * count


def _edge(vg: VizGraph, seen: set, src, dst, label: str, values: list, style: str = "") -> None:
    if src is not None and (src, dst, tuple(values)) not in seen:
        seen.add((src, dst, tuple(values)))
        vg.edges.append(VEdge(f"e{len(vg.edges)}", src, dst, label, values, style))


def _node_bodies(vg: VizGraph, seen: set, owner: VNode, node: Node, graph: Graph, source) -> None:
    owners = owner.owners + (owner.id,)
    for key, body in _bodies(node):
        cid = f"{owner.id}.{key}"
        label = key if body.name == key else f"{key} ({body.name})"
        where = owner.info.get("title", owner.id)
        vg.clusters[cid] = VCluster(cid, owner.phase or "forward", owner.path, label, owner.cluster,
                                    {"title": f"{label}: a body of {where}", "body": key, "name": body.name,
                                     "owner": owner.id, "module": owner.path, "module_type": "",
                                     "phase": owner.phase or "forward"}, kind="body", owners=owners)
        _draw_body(vg, seen, owner, node, graph, source, key, body, cid, owners)
    for k in sorted(bound_operands(node)):
        v = node.inputs[k]
        _edge(vg, seen, source(v), owner.id, str(v.type), [f"%{v.name}"], "fold")


def _draw_body(vg, seen, owner, node, graph, source, key, body, cid, owners) -> None:
    phase, prefix = owner.phase, cid
    local: dict = {}  # id(value of the body) -> view node drawing it
    leaves: list = []
    read = _read(body)
    operands = node.inputs[len(node.inputs) - len(body.inputs):] if len(node.inputs) >= len(body.inputs) else []
    roles = input_roles(node, len(operands))
    for k, v in enumerate(body.inputs):
        if id(v) not in read:  # an input the body ignores (a capture only its sibling reads)
            continue
        aid = f"{prefix}.a{k}"
        outer = operands[k] if operands else None
        text = format_value(outer, graph) if outer is not None else ""
        literal = bool(text) and text[0] not in "%@$"
        info = {"title": f"%{v.name}: {v.type}", "type": str(v.type), "phase": phase,
                "role": f"{key} input {k}" + (f" ({roles[k]})" if operands else ""),
                "binds": f"{text} (operand {len(node.inputs) - len(body.inputs) + k} of {owner.info.get('title')})"
                if outer is not None else ""}
        vg.nodes[aid] = VNode(aid, "arg", [f"{v.name}={text}" if literal else v.name], phase, cid, owner.path,
                              info, owners=owners)
        local[id(v)] = aid
        if outer is not None and not literal:
            _edge(vg, seen, source(outer), aid, str(outer.type), [f"%{outer.name}"], "bind")

    def value_source(v):
        if id(v) not in local:
            role = body.state_roles.get(v.name) if body.state.get(v.name) is v else None
            if body.constants.get(v.name) is v and body.constant_data[v.name].ndim > 0:
                role = "const"
            if role is None:
                return None  # a scalar constant: written in the reader's tooltip
            lid = f"{prefix}.v{len(leaves)}"
            leaves.append(lid)
            vg.nodes[lid] = VNode(lid, role, [v.name], phase, cid, info={"title": f"%{v.name}: {v.type}",
                                  "role": role, "type": str(v.type), "phase": phase}, owners=owners)
            local[id(v)] = lid
        return local[id(v)]

    for j, inner in enumerate(body.nodes):
        nid = f"{prefix}.n{j}"
        lines, info = op_details(inner, body, phase)
        vg.nodes[nid] = VNode(nid, "op", lines, phase, cid, inner.meta.get("module") or "", info, info["fused"],
                              owners)
        bound = bound_operands(inner)
        for k, v in enumerate(inner.inputs):
            if k not in bound:
                _edge(vg, seen, value_source(v), nid, str(v.type), [f"%{v.name}"])
        for v in inner.outputs:
            local[id(v)] = nid
        if inner.op in CONTROL_FLOW:
            _node_bodies(vg, seen, vg.nodes[nid], inner, body, value_source)
    rid = f"{prefix}.r"
    gives = ", ".join(f"%{v.name}" for v in node.outputs[:len(body.outputs)]) if key != "cond" else "the loop test"
    vg.nodes[rid] = VNode(rid, "result", ["return"], phase, cid, owner.path,
                          {"title": "return " + ", ".join(format_value(v, body) for v in body.outputs),
                           "type": ", ".join(str(v.type) for v in body.outputs), "phase": phase,
                           "role": f"{key} result", "gives": f"{gives} of {owner.info.get('title')}"}, owners=owners)
    for v in body.outputs:
        _edge(vg, seen, value_source(v), rid, str(v.type), [f"%{v.name}"])
    _edge(vg, seen, rid, owner.id, "", [f"return of {key}"], "bind")
