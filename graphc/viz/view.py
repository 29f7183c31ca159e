"""The view model's types (what a picture shows, before any drawing), and the details of one op.

A :class:`VizGraph` holds :class:`VNode` s, :class:`VEdge` s and :class:`VCluster` s.
Nodes and clusters drawn inside a control-flow body (``cond``, ``scan``, ``while_loop``)
list the ids of the control-flow nodes holding them in ``owners`` (outermost first), so a
viewer can fold a node's bodies away; edges with ``style="bind"`` tie a node's operands to
its bodies' inputs and its bodies' results back to the node.

>>> vg = VizGraph("g")
>>> vg.nodes["n0"] = VNode("n0", "op", ["cond"], "forward")
>>> vg.nodes["n0.true_branch.n0"] = VNode("n0.true_branch.n0", "op", ["relu"], "forward", owners=("n0",))
>>> vg.summary()
'1 ops: 1 forward (+1 in control-flow bodies)'
"""
from __future__ import annotations

import collections
from dataclasses import dataclass, field

from ..ir.graph import Graph, Node
from ..ir.printer import CONTROL_FLOW, format_attrs, format_value

PHASE_LETTER = {"forward": "f", "backward": "b", "update": "u"}


@dataclass
class VNode:
    id: str
    kind: str                 # op, group, input, param, buffer, optim, const, output; arg, result (in bodies)
    lines: list               # label lines; the first is the title
    phase: str | None = None  # forward / backward / update for ops and groups
    cluster: str | None = None
    path: str = ""            # module path (ops, groups)
    info: dict = field(default_factory=dict)  # tooltip data, plain JSON
    fused: str = ""
    owners: tuple = ()        # control-flow nodes whose bodies hold this one, outermost first


@dataclass
class VEdge:
    id: str
    src: str
    dst: str
    label: str
    values: list              # value names carried
    style: str = ""           # "bind": operand -> body input, body result -> its node


@dataclass
class VCluster:
    id: str
    phase: str
    path: str
    label: str
    parent: str | None
    info: dict = field(default_factory=dict)
    kind: str = "module"      # module, or body (a control-flow node's body, labelled with its attr name)
    owners: tuple = ()        # as VNode.owners; a body's own node is the last


@dataclass
class VizGraph:
    name: str
    nodes: dict = field(default_factory=dict)     # id -> VNode, in drawing order
    edges: list = field(default_factory=list)
    clusters: dict = field(default_factory=dict)  # id -> VCluster, parents before children
    collapsed: bool = False

    def phases(self) -> list:
        seen = {n.phase for n in self.nodes.values() if n.phase}
        return [p for p in PHASE_LETTER if p in seen]

    def kinds(self) -> list:
        return list(dict.fromkeys(n.kind for n in self.nodes.values()))

    def summary(self) -> str:
        ops = [n for n in self.nodes.values() if n.kind in ("op", "group")]
        counts = collections.Counter(n.phase for n in ops if not n.owners)
        unit = "modules/ops" if self.collapsed else "ops"
        parts = [f"{counts[p]} {p}" for p in PHASE_LETTER if counts[p]]
        inner = len(ops) - sum(counts.values())
        text = f"{sum(counts.values())} {unit}: " + ", ".join(parts) if parts else "no ops"
        return text + (f" (+{inner} in control-flow bodies)" if inner else "")


def op_details(node: Node, graph: Graph, phase: str) -> tuple[list, dict]:
    """``(label lines, tooltip data)`` of an op node of ``graph``."""
    fused = str(node.meta.get("fused") or "")
    info = {"title": ", ".join(f"%{v.name}" for v in node.outputs) + f" = {node.op}", "op": node.op,
            "phase": phase, "module": node.meta.get("module") or "",
            "module_type": node.meta.get("module_type", ""),
            "source": node.meta.get("source", ""), "pass": node.meta.get("pass", ""), "fused": fused,
            "grad_of": node.meta.get("grad_of", ""),
            "attrs": {k: format_attrs({k: v})[1:-1].partition("=")[2] for k, v in node.attrs.items()},
            "inputs": [[format_value(v, graph), str(v.type)] for v in node.inputs],
            "outputs": [[f"%{v.name}", str(v.type)] for v in node.outputs],
            "updates": [], "returns": []}
    lines = [node.op] + ([fused] if fused else [])
    if node.op == "custom_call":  # the user's op by name; its body text in the details
        lines.append(node.attrs["name"])
        info["body"] = str(node.attrs["forward"])
    elif node.op in CONTROL_FLOW:  # its bodies are drawn as clusters beside it
        info["bodies"] = {k: f"{v.name} ({len(v.nodes)} ops)" for k, v in node.attrs.items() if isinstance(v, Graph)}
    return lines, info


def edge_title(e: VEdge) -> str:
    """Hover text of an edge: the values it carries and their type."""
    return ", ".join(e.values) + (f": {e.label}" if e.label else "")
