"""What a graph picture shows, independent of how it is drawn: the view model.

:func:`build` turns an :class:`~graphc.ir.Graph` into a :class:`VizGraph`:

- one node per op (``n<i>``, ``i`` the node's index in ``graph.nodes``), coloured by phase
  (``node.meta["phase"]``: forward when absent, ``backward``, ``update``);
- small nodes for inputs, parameters, buffers, optimizer state and array constants
  (``v<k><phase letter>``: one copy per phase that reads the value, so a parameter used by
  the forward op, its gradient and its update does not draw edges across the whole
  picture), and for the graph's outputs (``o<i>``); scalar constants stay in the op's
  tooltip;
- clusters per (phase, module path), nested by path (``features.3`` inside ``features``);
  backward and update nodes get their own clusters, as TensorBoard's ``gradients/`` scope
  does, so the forward boxes stay compact; a parameter's update ops go to its module's
  update cluster (``features.3.weight`` -> ``features.3 (Conv2d) · update``);
- edges labelled with the value's type (``f32[N,8,4,4]``);
- the bodies of ``cond``, ``scan`` and ``while_loop`` nodes as clusters beside them, named
  by their attr (``true_branch``, ``body``, ...), recursively (:mod:`graphc.viz.bodies`).

With ``collapse_modules=True`` each (phase, top-level module) becomes one node, and bodies
are left out (a control-flow node lists them in its tooltip).

>>> import numpy as np, graphc as gc
>>> from graphc import nn
>>> plan = gc.compile(nn.Sequential(nn.Linear(4, 8), nn.ReLU()).eval(),
...                   example_inputs=(np.zeros((2, 4), np.float32),))
>>> vg = build(plan.graph)
>>> [n.lines[0] for n in vg.nodes.values() if n.kind == "op"]
['linear_relu']
>>> vg.nodes["n0"].lines[1], vg.clusters[vg.nodes["n0"].cluster].label
('linear+relu', '0 (Linear)')
"""
from __future__ import annotations

import collections

from ..ir.graph import Graph
from .bodies import add_bodies, bound_operands
from .view import PHASE_LETTER, VCluster, VEdge, VizGraph, VNode, op_details

__all__ = ["PHASE_LETTER", "VCluster", "VEdge", "VNode", "VizGraph", "build", "collapse", "tooltip_text"]


def _phase(node) -> str:
    phase = node.meta.get("phase")
    return phase if phase in PHASE_LETTER else "forward"


def build(graph: Graph, collapse_modules: bool = False) -> VizGraph:
    """The view model of ``graph`` (see the module docstring)."""
    vg = VizGraph(graph.name)
    producer = {id(v): f"n{i}" for i, n in enumerate(graph.nodes) for v in n.outputs}
    roles = {id(v): "input" for v in graph.inputs}
    roles.update({id(v): graph.state_roles[k] for k, v in graph.state.items()})
    scalar_consts = {id(v) for k, v in graph.constants.items() if graph.constant_data[k].ndim == 0}
    roles.update({id(v): "const" for v in graph.constants.values() if id(v) not in scalar_consts})
    leaf_index = {id(v): k for k, v in enumerate(graph.leaf_values())}
    updated = collections.defaultdict(list)
    for name, v in graph.updates.items():
        updated[id(v)].append(name)
    out_names = list(graph.output_names) or [f"output{i}" for i in range(len(graph.outputs))]
    returned = collections.defaultdict(list)
    for name, v in zip(out_names, graph.outputs):
        returned[id(v)].append(name)
    types = {}
    for node in graph.nodes:
        if node.meta.get("module") and node.meta.get("module_type") and _phase(node) != "update":
            types.setdefault(node.meta["module"], node.meta["module_type"])

    def cluster(phase: str, path: str) -> str | None:
        if not path:
            return None
        key = f"{phase}:{path}"
        found = cluster_ids.get(key)
        if found is None:
            parent = cluster(phase, path.rpartition(".")[0])
            found = cluster_ids[key] = f"c{len(cluster_ids)}"
            kind = types.get(path)
            label = path + (f" ({kind})" if kind else "")
            label += {"forward": "", "backward": " \u00b7 backward", "update": " \u00b7 update"}[phase]
            vg.clusters[found] = VCluster(found, phase, path, label, parent,
                                          {"module": path, "module_type": kind or "", "phase": phase})
        return found

    cluster_ids: dict = {}
    leaf_uses = collections.defaultdict(list)  # (leaf id, phase) -> consumer node ids
    for i, node in enumerate(graph.nodes):
        phase, path = _phase(node), node.meta.get("module") or ""
        if phase == "update" and path in graph.state:  # one update cluster per module, not per parameter
            path = path.rpartition(".")[0]
        nid = f"n{i}"
        lines, info = op_details(node, graph, phase)
        info["updates"] = [s for v in node.outputs for s in updated.get(id(v), [])]
        info["returns"] = [s for v in node.outputs for s in returned.get(id(v), [])]
        fused = info["fused"]
        vg.nodes[nid] = VNode(nid, "op", lines, phase, cluster(phase, path), path, info, fused)
        for v in node.inputs:
            if id(v) in roles:
                leaf_uses[(id(v), phase)].append(nid)

    # Optimizer ops shared by several parameters (CSE keeps the first parameter's meta, e.g.
    # Adam's bias corrections) belong to no single parameter: lift them to the common cluster.
    readers_of = graph.users()
    cluster_of = {id(node): vg.nodes[f"n{i}"].cluster for i, node in enumerate(graph.nodes)}
    for i in reversed(range(len(graph.nodes))):
        node, n = graph.nodes[i], vg.nodes[f"n{i}"]
        if n.phase == "update" and n.cluster is not None:
            readers = {cluster_of[id(u)] for v in node.outputs for u in readers_of.get(id(v), ())}
            if len(readers | {n.cluster}) > 1:
                n.cluster = cluster_of[id(node)] = _common_cluster(vg, [n.cluster, *sorted(readers, key=str)])
    leaves = {id(v): v for v in graph.leaf_values()}
    copies = {}
    for (vid, phase), users in sorted(leaf_uses.items(), key=lambda kv: (leaf_index[kv[0][0]], kv[0][1])):
        v, role = leaves[vid], roles[vid]
        lid = f"v{leaf_index[vid]}{PHASE_LETTER[phase]}"
        home = None if role == "input" else _common_cluster(vg, [vg.nodes[u].cluster for u in users])
        info = {"title": f"%{v.name}: {v.type}", "role": role, "type": str(v.type), "phase": phase,
                "updated": v.name in graph.updates}
        vg.nodes[lid] = VNode(lid, role, [v.name], None, home, info=info)
        copies[(vid, phase)] = lid
    for i, (name, v) in enumerate(zip(out_names, graph.outputs)):
        vg.nodes[f"o{i}"] = VNode(f"o{i}", "output", [name], info={"title": f"output {name}: {v.type}",
                                                                    "type": str(v.type), "value": f"%{v.name}"})

    seen = set()

    def edge(src, dst, v):
        if src and (src, dst, id(v)) not in seen:
            seen.add((src, dst, id(v)))
            vg.edges.append(VEdge(f"e{len(vg.edges)}", src, dst, str(v.type), [f"%{v.name}"]))

    for i, node in enumerate(graph.nodes):
        bound = bound_operands(node)  # a control-flow node's operands its bodies read flow into them
        for k, v in enumerate(node.inputs):
            if k not in bound:
                edge(producer.get(id(v)) or copies.get((id(v), _phase(node))), f"n{i}", v)
    for i, v in enumerate(graph.outputs):
        src = producer.get(id(v)) or copies.get((id(v), "forward"))
        if src is None and id(v) in roles:  # an input returned as is
            src = copies[(id(v), "forward")] = f"v{leaf_index[id(v)]}f"
            vg.nodes[src] = VNode(src, roles[id(v)], [v.name], info={"title": f"%{v.name}: {v.type}"})
        edge(src, f"o{i}", v)
    add_bodies(vg, graph, lambda v, phase: producer.get(id(v)) or copies.get((id(v), phase)))
    used = set()
    for n in vg.nodes.values():
        c = n.cluster
        while c is not None and c not in used:
            used.add(c)
            c = vg.clusters[c].parent
    vg.clusters = {cid: c for cid, c in vg.clusters.items() if cid in used}
    return collapse(vg) if collapse_modules else vg


def _common_cluster(vg: VizGraph, clusters: list) -> str | None:
    """The innermost cluster holding all of ``clusters`` (None if any is None)."""
    if not clusters or any(c is None for c in clusters):
        return None
    chains = []
    for c in clusters:
        chain = []
        while c is not None:
            chain.append(c)
            c = vg.clusters[c].parent
        chains.append(chain[::-1])
    common = None
    for level in zip(*chains):
        if len(set(level)) != 1:
            break
        common = level[0]
    return common


def collapse(vg: VizGraph) -> VizGraph:
    """Each (phase, top-level module) becomes one node ``g<k>``; state read only inside
    collapsed modules is folded into them (listed in their tooltip). Control-flow bodies are
    left out: their node lists them in its tooltip."""
    out = VizGraph(vg.name, collapsed=True)
    inner = {n.id for n in vg.nodes.values() if n.owners}
    vg = VizGraph(vg.name, {k: n for k, n in vg.nodes.items() if k not in inner},
                  [e for e in vg.edges if e.src not in inner and e.dst not in inner],
                  {k: c for k, c in vg.clusters.items() if c.kind != "body"})
    group_of, groups = {}, {}
    for n in vg.nodes.values():
        if n.kind == "op" and n.path:
            top = n.path.split(".")[0]
            gid = groups.setdefault((n.phase, top), f"g{len(groups)}")
            group_of[n.id] = gid
    members = collections.defaultdict(list)
    for nid, gid in group_of.items():
        members[gid].append(vg.nodes[nid])
    for (phase, top), gid in groups.items():
        ops = members[gid]
        kind = next((vg.clusters[c].info["module_type"] for c in vg.clusters
                     if vg.clusters[c].path == top and vg.clusters[c].phase == phase), "")
        hist = collections.Counter(n.info["op"] for n in ops)
        fused = [f"{n.info['op']} ({n.fused})" for n in ops if n.fused]
        lines = [top + (f" ({kind})" if kind else ""),
                 f"{len(ops)} op{'s' if len(ops) > 1 else ''}" + {"forward": "", "backward": " \u00b7 backward",
                                                                  "update": " \u00b7 update"}[phase]]
        if fused:
            lines.append("fused: " + ", ".join(dict.fromkeys(n.info["op"] for n in ops if n.fused)))
        info = {"title": f"module {lines[0]}, {phase}", "phase": phase, "module": top, "module_type": kind,
                "ops": dict(hist.most_common()), "fused": "; ".join(dict.fromkeys(fused)),
                "source": ", ".join(dict.fromkeys(n.info["source"] for n in ops if n.info["source"])),
                "members": [n.id for n in ops], "state": []}
        out.nodes[gid] = VNode(gid, "group", lines, phase, None, top, info, "; ".join(fused))
    remap = {nid: group_of.get(nid, nid) for nid in vg.nodes}
    targets = collections.defaultdict(set)
    for e in vg.edges:
        targets[e.src].add(remap[e.dst])
    hidden = set()
    for n in vg.nodes.values():
        if n.kind in ("param", "buffer", "optim", "const") and targets[n.id] and \
                all(t in out.nodes and out.nodes[t].kind == "group" for t in targets[n.id]):
            hidden.add(n.id)
            for t in sorted(targets[n.id]):
                if n.lines[0] not in out.nodes[t].info["state"]:
                    out.nodes[t].info["state"].append(n.lines[0])
    for n in vg.nodes.values():
        if n.id not in group_of and n.id not in hidden:
            out.nodes[n.id] = VNode(n.id, n.kind, n.lines, n.phase, None, n.path, n.info, n.fused)
    merged: dict = {}
    for e in vg.edges:
        src, dst = remap[e.src], remap[e.dst]
        if src == dst or e.src in hidden:
            continue
        entry = merged.setdefault((src, dst), ([], []))
        entry[0].append(e.label)
        entry[1].extend(e.values)
    for (src, dst), (labels, values) in merged.items():
        uniq = list(dict.fromkeys(labels))
        label = uniq[0] + (f" +{len(uniq) - 1}" if len(uniq) > 1 else "")
        out.edges.append(VEdge(f"e{len(out.edges)}", src, dst, label, list(dict.fromkeys(values))))
    return out


def tooltip_text(n: VNode) -> str:
    """Plain-text details of a node (the SVG ``<title>`` and DOT ``tooltip``)."""
    i = n.info
    lines = [i.get("title", n.lines[0])]
    if n.kind in ("op", "group"):
        where = i.get("module", "") + (f" ({i['module_type']})" if i.get("module_type") else "")
        lines += [f"{k}: {v}" for k, v in (("phase", n.phase), ("module", where), ("source", i.get("source")),
                                           ("fused", i.get("fused")), ("grad of", i.get("grad_of")),
                                           ("created by pass", i.get("pass"))) if v]
        lines += [f"attr {k} = {v}" for k, v in i.get("attrs", {}).items()]
        lines += [f"in  {a}: {t}" for a, t in i.get("inputs", [])]
        lines += [f"out {a}: {t}" for a, t in i.get("outputs", [])]
        lines += [f"body {k}: {v}" for k, v in i.get("bodies", {}).items()]
        if i.get("ops"):
            lines.append("ops: " + ", ".join(f"{op} x{c}" for op, c in i["ops"].items()))
        if i.get("state"):
            lines.append("state: " + ", ".join(i["state"]))
        if i.get("updates"):
            lines.append("updates state: " + ", ".join(i["updates"]))
        if i.get("returns"):
            lines.append("returned as: " + ", ".join(i["returns"]))
    elif i.get("role"):
        lines.append(f"{i['role']}" + (" (updated by the plan)" if i.get("updated") else ""))
        lines += [f"{k}: {i[k]}" for k in ("binds", "gives") if i.get(k)]
    return "\n".join(lines)
