"""A layered layout in pure Python, so pictures never need Graphviz.

1. Layers: ``networkx.topological_generations`` over the op nodes (strongly connected
   groups, possible after collapsing modules, share a layer), then each op is pulled down
   to just above its first user (so weight-decay or bookkeeping ops that only read state do
   not float to the top). Leaf nodes sit one layer above their first user; outputs one
   layer below their producer.
2. Columns: clusters are packed bottom-up as rectangles. Inside a cluster, ops come first in
   layer order, then leaves; each goes to the free slot nearest to where its already placed
   neighbours are (so chains run straight down and a leaf sits beside its user). Sibling
   items that share layers never overlap, so cluster boxes never cut through each other.
3. Rows: every layer is one row; rows get extra room where clusters open (title band) or close.
4. Edges: cubic curves from the producer's bottom to the user's top, ports spread along
   each side; each value's type is written once, on its shortest edge.

>>> import numpy as np, graphc as gc
>>> from graphc import nn
>>> from graphc.viz.model import build
>>> plan = gc.compile(nn.Sequential(nn.Linear(4, 8), nn.ReLU()).eval(),
...                   example_inputs=(np.zeros((2, 4), np.float32),))
>>> lay = layout(build(plan.graph))
>>> sorted(lay.nodes) == sorted(build(plan.graph).nodes)
True
"""
from __future__ import annotations

import collections
import statistics
from dataclasses import dataclass, field

import networkx as nx

from .model import VizGraph
from .style import CLUSTER_FONT, EDGE_FONT, node_size, text_width

HGAP = 16          # between items side by side
PAD = 10           # cluster padding (sides and bottom)
LABEL_H = 17       # cluster title band
ROW_GAP = 36       # between rows: room for edge labels
CHANNEL = 8        # half-width kept free above an op for its incoming edge
LEAF_KINDS = ("input", "param", "buffer", "optim", "const")


@dataclass
class Layout:
    width: float
    height: float
    nodes: dict = field(default_factory=dict)     # id -> (x, y, w, h), top-left corner
    clusters: dict = field(default_factory=dict)  # id -> (x, y, w, h)
    edges: list = field(default_factory=list)     # (VEdge, svg path data, (x, y) of its label or None)
    layers: dict = field(default_factory=dict)    # node id -> row


def assign_layers(vg: VizGraph) -> dict:
    """Row of every node (0 at the top)."""
    core = [n.id for n in vg.nodes.values() if n.kind in ("op", "group")]
    g = nx.DiGraph()
    g.add_nodes_from(core)
    g.add_edges_from((e.src, e.dst) for e in vg.edges if e.src in g and e.dst in g and e.src != e.dst)
    cond = nx.condensation(g)
    level = {}
    for depth, generation in enumerate(nx.topological_generations(cond)):
        for c in generation:
            level[c] = depth
    for c in reversed(list(nx.topological_sort(cond))):
        succ = [level[s] for s in cond.successors(c)]
        if succ:
            level[c] = min(succ) - 1
    mapping = cond.graph["mapping"]
    # Ops on even rows; leaves and outputs on the odd rows between them, so a module's
    # parameters never share a row with the op above (clusters then stack, not stagger).
    layer = {n: 2 * level[mapping[n]] + 2 for n in core}
    users = collections.defaultdict(list)
    for e in vg.edges:
        users[e.src].append(e.dst)
    for n in vg.nodes.values():
        if n.kind in LEAF_KINDS:
            below = [layer[u] for u in users[n.id] if u in layer]
            layer[n.id] = min(below) - 1 if below else 0
    for e in vg.edges:
        if vg.nodes[e.dst].kind == "output":
            layer[e.dst] = max(layer.get(e.dst, 0), layer[e.src] + 1)
    for n in vg.nodes:
        layer.setdefault(n, 0)
    rows = {v: i for i, v in enumerate(sorted(set(layer.values())))}
    return {n: rows[v] for n, v in layer.items()}


def _spine(vg: VizGraph) -> tuple:
    """The ops on a longest path of each phase (placed first, so the forward pass, the
    backward pass and one update run straight down), and the ops fed by another op."""
    g = nx.DiGraph()
    g.add_nodes_from(n.id for n in vg.nodes.values() if n.kind in ("op", "group"))
    g.add_edges_from((e.src, e.dst) for e in vg.edges if e.src in g and e.dst in g and e.src != e.dst)
    spine = set()
    for phase in ("forward", "backward", "update"):
        sub = g.subgraph([n for n in g if vg.nodes[n].phase == phase])
        cond = nx.condensation(sub)
        if len(cond):
            path = set(nx.dag_longest_path(cond))
            spine |= {n for n, c in cond.graph["mapping"].items() if c in path}
    return spine, {e.dst for e in vg.edges if e.src in g}


@dataclass
class _Block:
    lmin: int
    lmax: int
    width: float
    centers: dict   # node id -> centre x, block coordinates
    boxes: dict     # cluster id -> (x, width), block coordinates


def _free_x(occupied: dict, lmin: int, lmax: int, w: float, pref: float) -> float:
    """The x nearest to ``pref`` where an item ``w`` wide fits in rows lmin..lmax."""
    spans = [s for row in range(lmin, lmax + 1) for s in occupied.get(row, ())]
    if not spans:
        return pref
    candidates = {pref} | {b + HGAP for _, b in spans} | {a - HGAP - w for a, _ in spans}
    for x in sorted(candidates, key=lambda x: (abs(x - pref), x)):
        if all(x + w + HGAP <= a + 1e-6 or x >= b + HGAP - 1e-6 for a, b in spans):
            return x
    raise AssertionError("unreachable: right of everything is always free")


def _pack(cid, vg, kids, direct, layer, sizes, nbrs, order, spine, fed) -> _Block:
    items = []  # (is_late, lmin, first order, lmin, lmax, w, centers, boxes)
    for child in kids.get(cid, ()):
        b = _pack(child, vg, kids, direct, layer, sizes, nbrs, order, spine, fed)
        first = min(order[n] for n in b.centers)
        rank = 0 if any(n in spine for n in b.centers) else 1
        items.append((rank, b.lmin, first, b.lmin, b.lmax, b.width, b.centers, b.boxes))
    for nid in direct.get(cid, ()):
        rank = 2 if vg.nodes[nid].kind in LEAF_KINDS or vg.nodes[nid].kind == "output" else int(nid not in spine)
        w = sizes[nid][0]
        items.append((rank, layer[nid], order[nid], layer[nid], layer[nid], w, {nid: w / 2}, {}))
    items.sort(key=lambda it: it[:3])
    occupied = collections.defaultdict(list)
    centers, boxes, spans = {}, {}, []
    for rank, *_, lmin, lmax, w, item_centers, item_boxes in items:
        diffs = [centers[u] - cx for v, cx in item_centers.items() for u in nbrs[v] if u in centers]
        x = _free_x(occupied, lmin, lmax, w, statistics.median(diffs) if diffs else 0.0)
        for row in range(lmin, lmax + 1):
            occupied[row].append((x, x + w))
        if rank < 2:  # keep the row above an op free where its edge from above comes in
            for v, cx in item_centers.items():
                if layer[v] - 1 not in range(lmin, lmax + 1) and v in fed:
                    occupied[layer[v] - 1].append((x + cx - CHANNEL, x + cx + CHANNEL))
        spans.append((x, x + w))
        centers.update({n: x + cx for n, cx in item_centers.items()})
        boxes.update({c: (x + bx, bw) for c, (bx, bw) in item_boxes.items()})
    left = min(a for a, _ in spans)
    width = max(b for _, b in spans) - left
    pad = PAD if cid is not None else 0.0
    if cid is not None:
        width = max(width, text_width(vg.clusters[cid].label, CLUSTER_FONT) + 8)
    centers = {n: cx - left + pad for n, cx in centers.items()}
    boxes = {c: (bx - left + pad, bw) for c, (bx, bw) in boxes.items()}
    lmin, lmax = min(it[3] for it in items), max(it[4] for it in items)
    if cid is not None:
        boxes[cid] = (0.0, width + 2 * pad)
    return _Block(lmin, lmax, width + 2 * pad, centers, boxes)


def layout(vg: VizGraph, margin: float = 16.0, top: float = 0.0) -> Layout:
    """Place every node, cluster and edge of ``vg``; ``top`` leaves room above (legend)."""
    sizes = {n.id: node_size(n.lines, n.kind) for n in vg.nodes.values()}
    if not vg.nodes:
        return Layout(2 * margin, top + 2 * margin)
    layer = assign_layers(vg)
    order = {nid: i for i, nid in enumerate(vg.nodes)}
    kids, direct = collections.defaultdict(list), collections.defaultdict(list)
    for c in vg.clusters.values():
        kids[c.parent].append(c.id)
    for n in vg.nodes.values():
        direct[n.cluster].append(n.id)
    nbrs = collections.defaultdict(list)
    for e in vg.edges:
        nbrs[e.src].append(e.dst)
        nbrs[e.dst].append(e.src)
    used = set()  # clusters that hold at least one node (others are dropped)
    for nid, n in vg.nodes.items():
        c = n.cluster
        while c is not None and c not in used:
            used.add(c)
            c = vg.clusters[c].parent
    kids = {p: [c for c in cs if c in used] for p, cs in kids.items()}
    root = _pack(None, vg, kids, direct, layer, sizes, nbrs, order, *_spine(vg))

    # Rows, with room where clusters open and close.
    span = {}
    for nid, n in vg.nodes.items():
        c = n.cluster
        while c is not None:
            lo, hi = span.get(c, (layer[nid], layer[nid]))
            span[c] = (min(lo, layer[nid]), max(hi, layer[nid]))
            c = vg.clusters[c].parent
    top_extra, bottom_extra = {}, {}
    for cid in reversed(list(vg.clusters)):  # children before parents
        if cid not in used:
            continue
        lo, hi = span[cid]
        inner = [c for c in kids.get(cid, ())]
        top_extra[cid] = PAD + LABEL_H + max([top_extra[c] for c in inner if span[c][0] == lo], default=0)
        bottom_extra[cid] = PAD + max([bottom_extra[c] for c in inner if span[c][1] == hi], default=0)
    nrows = max(layer.values()) + 1
    before, after, height = [0.0] * nrows, [0.0] * nrows, [0.0] * nrows
    for cid, (lo, hi) in span.items():
        before[lo] = max(before[lo], top_extra[cid])
        after[hi] = max(after[hi], bottom_extra[cid])
    for nid, row in layer.items():
        height[row] = max(height[row], sizes[nid][1])
    row_top, y = [], top + margin
    for row in range(nrows):
        y += before[row]
        row_top.append(y)
        y += height[row] + after[row] + ROW_GAP
    out = Layout(root.width + 2 * margin, y - ROW_GAP + margin, layers=layer)
    for nid, cx in root.centers.items():
        w, h = sizes[nid]
        row = layer[nid]
        out.nodes[nid] = (margin + cx - w / 2, row_top[row] + (height[row] - h) / 2, w, h)
    for cid in vg.clusters:
        if cid in used:
            bx, bw = root.boxes[cid]
            lo, hi = span[cid]
            y0 = row_top[lo] - top_extra[cid]
            out.clusters[cid] = (margin + bx, y0, bw, row_top[hi] + height[hi] + bottom_extra[cid] - y0)
    out.edges = _route(vg, out, layer)
    return out


def _route(vg: VizGraph, lay: Layout, layer: dict) -> list:
    def centre(nid):
        x, y, w, h = lay.nodes[nid]
        return x + w / 2

    outs, ins = collections.defaultdict(list), collections.defaultdict(list)
    for e in vg.edges:
        outs[e.src].append(e)
        ins[e.dst].append(e)
    port_out, port_in = {}, {}
    for table, ports, other in ((outs, port_out, "dst"), (ins, port_in, "src")):
        for nid, edges in table.items():
            x, _, w, _ = lay.nodes[nid]
            edges = sorted(edges, key=lambda e: centre(getattr(e, other)))
            for i, e in enumerate(edges):
                ports[e.id] = x + w * (i + 1) / (len(edges) + 1) if len(edges) > 1 else x + w / 2
    # Each value's type goes on its shortest edge (ties: the first).
    best = {}
    for e in vg.edges:
        key = (e.src, e.label, tuple(e.values))
        spans = layer[e.dst] - layer[e.src]
        if key not in best or spans < best[key][0]:
            best[key] = (spans, e.id)
    labelled = {eid for _, eid in best.values()}
    taken = [(x, y, x + w, y + h) for x, y, w, h in lay.nodes.values()]
    routed = []
    for e in sorted(vg.edges, key=lambda e: layer[e.dst] - layer[e.src]):  # short edges pick first
        x1, (sx, sy, sw, sh) = port_out[e.id], lay.nodes[e.src]
        x2, (tx, ty, tw, th) = port_in[e.id], lay.nodes[e.dst]
        y1, y2 = sy + sh, ty
        bend = max(18.0, (y2 - y1) * 0.45) if y2 > y1 + 1 else 60.0
        c1, c2 = (x1, y1 + bend), (x2, y2 - bend)
        d = f"M{x1:.1f},{y1:.1f} C{c1[0]:.1f},{c1[1]:.1f} {c2[0]:.1f},{c2[1]:.1f} {x2:.1f},{y2:.1f}"
        label = None
        if e.id in labelled:
            curve = ((x1, y1), c1, c2, (x2, y2))
            if layer[e.dst] - layer[e.src] <= 2:
                spots = [_bezier(*curve, t) for t in (0.5, 0.35, 0.65, 0.22, 0.78)]
            else:  # long edge: just below its producer, else just above its user
                spots = [_at_y(*curve, y) for y in (y1 + 12, y1 + 23, y2 - 12, y2 - 23)]
            half = text_width(e.label, EDGE_FONT) / 2 + 2
            for px, py in spots:
                box = (px - half, py - 6, px + half, py + 5)
                if not any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in taken):
                    taken.append(box)
                    label = (px, py)
                    break
        routed.append((e, d, label))
    order = {e.id: i for i, e in enumerate(vg.edges)}
    return sorted(routed, key=lambda r: order[r[0].id])


def _bezier(p0, p1, p2, p3, t):
    s = 1 - t
    return tuple(s ** 3 * a + 3 * s * s * t * b + 3 * s * t * t * c + t ** 3 * d for a, b, c, d in zip(p0, p1, p2, p3))


def _at_y(p0, p1, p2, p3, y):
    """The point of the curve at height ``y`` (the curves here only go down, then maybe up)."""
    lo, hi = 0.0, 1.0
    for _ in range(30):
        mid = (lo + hi) / 2
        if _bezier(p0, p1, p2, p3, mid)[1] < y:
            lo = mid
        else:
            hi = mid
    return _bezier(p0, p1, p2, p3, lo)
