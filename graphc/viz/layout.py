"""A layered layout in pure Python, so pictures never need Graphviz.

1. Rows: ``networkx.topological_generations`` over the op nodes (strongly connected
   groups, possible after collapsing modules, share a row), with one extra rule: when data
   flows from sibling cluster A to sibling cluster B (same phase, never back), all of B
   goes below all of A, so module boxes stack instead of staggering. Then each op is
   pulled down to just above its first user, and ops nothing reads (BatchNorm's step
   counter) go level with their module. Ops use even rows; leaves sit on the odd row
   above their first user, outputs below their producer. A control-flow body's inputs and
   return (:mod:`graphc.viz.bodies`) take rows as ops do: the operands feeding a body are
   above it, its node below it.
2. Columns: clusters are packed bottom-up as rectangles. The longest path of each phase
   goes first (so the forward and backward passes run straight down), then the other ops,
   then leaves; each item takes the free slot nearest to its placed neighbours. Items
   sharing rows never overlap, so cluster boxes never cut through each other.
3. Rows get extra room where clusters open (title band) or close.
4. Edges: cubic curves from the producer's bottom to the user's top, ports spread along
   each side; each value's type is written once, on its shortest edge, where it overlaps
   no node and no other label (the edge's hover title always has it). Fold edges (a
   control-flow operand straight to its node) are routed too, but never labelled.

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
from .style import BODY_KINDS, CLUSTER_FONT, EDGE_FONT, LEAF_KINDS, node_size, text_width

HGAP = 16          # between items side by side
PAD = 10           # cluster padding (sides and bottom)
LABEL_H = 17       # cluster title band
ROW_GAP = 36       # between rows: room for edge labels
CHANNEL = 8        # half-width kept free above an op for its incoming edge
RANKED = ("op", "group", *BODY_KINDS)  # kinds placed in rows by data flow (a body's inputs and return too)


@dataclass
class Layout:
    width: float
    height: float
    nodes: dict = field(default_factory=dict)     # id -> (x, y, w, h), top-left corner
    clusters: dict = field(default_factory=dict)  # id -> (x, y, w, h)
    edges: list = field(default_factory=list)     # (VEdge, svg path data, (x, y) of its label or None)
    layers: dict = field(default_factory=dict)    # node id -> row


def _chain(vg: VizGraph, cid) -> list:
    chain = []
    while cid is not None:
        chain.append(cid)
        cid = vg.clusters[cid].parent
    return chain[::-1]


def _cluster_order(vg: VizGraph, edges) -> set:
    """Pairs (A, B) of sibling clusters of one phase where data flows from A to B and never
    back: B's ops go in rows below all of A's, so cluster boxes stack instead of staggering."""
    pairs = set()
    for u, v in edges:
        a, b = _chain(vg, vg.nodes[u].cluster), _chain(vg, vg.nodes[v].cluster)
        k = 0
        while k < min(len(a), len(b)) and a[k] == b[k]:
            k += 1
        if k < len(a) and k < len(b) and vg.clusters[a[k]].phase == vg.clusters[b[k]].phase:
            pairs.add((a[k], b[k]))
    cg = nx.DiGraph(sorted(pairs))
    for scc in nx.strongly_connected_components(cg):
        if len(scc) > 1:
            pairs -= {(x, y) for x in scc for y in scc}
    return pairs


def assign_layers(vg: VizGraph) -> dict:
    """Row of every node (0 at the top)."""
    core = [n.id for n in vg.nodes.values() if n.kind in RANKED]
    g = nx.DiGraph()
    g.add_nodes_from(core)
    g.add_edges_from((e.src, e.dst) for e in vg.edges if e.src in g and e.dst in g and e.src != e.dst)
    cond = nx.condensation(g)
    mapping = cond.graph["mapping"]
    aux = nx.DiGraph()
    aux.add_nodes_from(cond.nodes)
    aux.add_edges_from(cond.edges, w=1)
    pairs = _cluster_order(vg, g.edges) if vg.clusters else set()
    if pairs:  # a zero-width "end of A" node after A's ops, one row above B's ops
        for a, b in sorted(pairs):
            aux.add_edge(("end", a), ("start", b), w=1)
        for n in core:
            for c in _chain(vg, vg.nodes[n].cluster):
                if ("end", c) in aux:
                    aux.add_edge(mapping[n], ("end", c), w=0)
                if ("start", c) in aux:
                    aux.add_edge(("start", c), mapping[n], w=0)
        if not nx.is_directed_acyclic_graph(aux):  # a cycle through ops outside the clusters
            aux.remove_nodes_from([x for x in list(aux) if isinstance(x, tuple)])
    order = list(nx.topological_sort(aux))
    level = {}
    for x in order:
        level[x] = max((level[p] + aux[p][x]["w"] for p in aux.predecessors(x)), default=0)

    def pull_down():
        for x in reversed(order):
            if aux.out_degree(x):
                level[x] = min(level[s] - aux[x][s]["w"] for s in aux.successors(x))

    pull_down()
    # Ops nothing reads (BatchNorm's step counter, state updates) may sit anywhere below their
    # inputs: put them level with the rest of their module, not at the top of the picture.
    real = [x for x in order if not isinstance(x, tuple)]
    by_cluster = collections.defaultdict(list)
    for n in core:
        if cond.out_degree(mapping[n]):
            by_cluster[vg.nodes[n].cluster].append(level[mapping[n]])
    for x in real:
        if aux.out_degree(x) == 0:
            cluster = vg.nodes[next(iter(cond.nodes[x]["members"]))].cluster
            if cluster is not None and by_cluster.get(cluster):
                level[x] = max(level[x], int(statistics.median_high(by_cluster[cluster])))
    pull_down()
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
    g.add_nodes_from(n.id for n in vg.nodes.values() if n.kind in RANKED)
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


@dataclass
class _Ctx:
    vg: VizGraph
    layer: dict
    sizes: dict
    kids: dict      # cluster id (None: the root) -> child cluster ids
    direct: dict    # cluster id (None: the root) -> ids of the nodes directly inside
    nbrs: dict      # node id -> neighbour ids
    order: dict     # node id -> position in the view model
    spine: set
    fed: set


def _pack(cid, ctx: _Ctx) -> _Block:
    """Place the items of one cluster (``None``: the whole picture) side by side."""
    items = []  # (rank, lmin, first, lmin, lmax, width, centres, boxes): sorted on the first three
    for child in ctx.kids.get(cid, ()):
        b = _pack(child, ctx)
        rank = 0 if any(n in ctx.spine for n in b.centers) else 1
        items.append((rank, b.lmin, min(ctx.order[n] for n in b.centers), b.lmin, b.lmax, b.width, b.centers,
                      b.boxes))
    for nid in ctx.direct.get(cid, ()):
        kind, row, w = ctx.vg.nodes[nid].kind, ctx.layer[nid], ctx.sizes[nid][0]
        rank = 2 if kind in LEAF_KINDS or kind == "output" else int(nid not in ctx.spine)
        items.append((rank, row, ctx.order[nid], row, row, w, {nid: w / 2}, {}))
    items.sort(key=lambda it: it[:3])
    occupied = collections.defaultdict(list)
    centers, boxes, spans = {}, {}, []
    for rank, _, _, lmin, lmax, w, item_centers, item_boxes in items:
        diffs = [centers[u] - cx for v, cx in item_centers.items() for u in ctx.nbrs[v] if u in centers]
        x = _free_x(occupied, lmin, lmax, w, statistics.median(diffs) if diffs else 0.0)
        for row in range(lmin, lmax + 1):
            occupied[row].append((x, x + w))
        if rank < 2:  # keep the row above an op free where its edge from above comes in
            for v, cx in item_centers.items():
                if v in ctx.fed and not lmin <= ctx.layer[v] - 1 <= lmax:
                    occupied[ctx.layer[v] - 1].append((x + cx - CHANNEL, x + cx + CHANNEL))
        spans.append((x, x + w))
        centers.update({n: x + cx for n, cx in item_centers.items()})
        boxes.update({c: (x + bx, bw) for c, (bx, bw) in item_boxes.items()})
    left = min(a for a, _ in spans)
    width = max(b for _, b in spans) - left
    pad = 0.0 if cid is None else PAD
    if cid is not None:
        width = max(width, text_width(ctx.vg.clusters[cid].label, CLUSTER_FONT) + 8)
    centers = {n: cx - left + pad for n, cx in centers.items()}
    boxes = {c: (bx - left + pad, bw) for c, (bx, bw) in boxes.items()}
    if cid is not None:
        boxes[cid] = (0.0, width + 2 * pad)
    return _Block(min(it[3] for it in items), max(it[4] for it in items), width + 2 * pad, centers, boxes)


def layout(vg: VizGraph, margin: float = 16.0, top: float = 0.0) -> Layout:
    """Place every node, cluster and edge of ``vg``; ``top`` leaves room above (legend)."""
    sizes = {n.id: node_size(n.lines, n.kind) for n in vg.nodes.values()}
    if not vg.nodes:
        return Layout(2 * margin, top + 2 * margin)
    layer = assign_layers(vg)
    kids, direct = collections.defaultdict(list), collections.defaultdict(list)
    for c in vg.clusters.values():
        kids[c.parent].append(c.id)
    for n in vg.nodes.values():
        direct[n.cluster].append(n.id)
    nbrs = collections.defaultdict(list)
    for e in vg.edges:
        nbrs[e.src].append(e.dst)
        nbrs[e.dst].append(e.src)
    root = _pack(None, _Ctx(vg, layer, sizes, kids, direct, nbrs, {nid: i for i, nid in enumerate(vg.nodes)},
                            *_spine(vg)))

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
        lo, hi = span[cid]
        inner = kids.get(cid, ())
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
        (bx, bw), (lo, hi) = root.boxes[cid], span[cid]
        y0 = row_top[lo] - top_extra[cid]
        out.clusters[cid] = (margin + bx, y0, bw, row_top[hi] + height[hi] + bottom_extra[cid] - y0)
    out.edges = _route(vg, out, layer)
    return out


def _route(vg: VizGraph, lay: Layout, layer: dict) -> list:
    def centre(nid):
        x, y, w, h = lay.nodes[nid]
        return x + w / 2

    outs, ins = collections.defaultdict(list), collections.defaultdict(list)
    for e in vg.edges:  # fold edges (shown while a node's bodies are folded) get ports of their own
        outs[e.src, e.style == "fold"].append(e)
        ins[e.dst, e.style == "fold"].append(e)
    port_out, port_in = {}, {}
    for table, ports, other in ((outs, port_out, "dst"), (ins, port_in, "src")):
        for (nid, _), edges in table.items():
            x, _, w, _ = lay.nodes[nid]
            edges = sorted(edges, key=lambda e: centre(getattr(e, other)))
            for i, e in enumerate(edges):
                ports[e.id] = x + w * (i + 1) / (len(edges) + 1) if len(edges) > 1 else x + w / 2
    # Each value's type goes on its shortest edge (ties: the first).
    best = {}
    for e in vg.edges:
        if e.style == "fold":
            continue
        key = (e.src, e.label, tuple(e.values))
        spans = layer[e.dst] - layer[e.src]
        if key not in best or spans < best[key][0]:
            best[key] = (spans, e.id)
    labelled = {eid for _, eid in best.values()}
    taken = _Boxes()
    for x, y, w, h in lay.nodes.values():
        taken.add((x, y, x + w, y + h))
    for cid, (x, y, w, h) in lay.clusters.items():  # cluster titles
        taken.add((x + 5, y + 2, x + 9 + text_width(vg.clusters[cid].label, CLUSTER_FONT), y + 17))
    routed = []
    for e in sorted(vg.edges, key=lambda e: layer[e.dst] - layer[e.src]):  # short edges pick first
        x1, (sx, sy, sw, sh) = port_out[e.id], lay.nodes[e.src]
        x2, (tx, ty, tw, th) = port_in[e.id], lay.nodes[e.dst]
        y1, y2 = sy + sh, ty
        bend = max(18.0, (y2 - y1) * 0.45) if y2 > y1 + 1 else 60.0
        c1, c2 = (x1, y1 + bend), (x2, y2 - bend)
        d = f"M{x1:.1f},{y1:.1f} C{c1[0]:.1f},{c1[1]:.1f} {c2[0]:.1f},{c2[1]:.1f} {x2:.1f},{y2:.1f}"
        label = None
        if e.id in labelled and e.label:
            curve = ((x1, y1), c1, c2, (x2, y2))
            if layer[e.dst] - layer[e.src] <= 2:
                spots = [_bezier(*curve, t) for t in (0.5, 0.35, 0.65, 0.22, 0.78)]
            else:  # long edge: just below its producer, else just above its user
                spots = [_at_y(*curve, y) for y in (y1 + 12, y1 + 23, y2 - 12, y2 - 23)]
            half = text_width(e.label, EDGE_FONT) / 2 + 2
            for px, py in spots:
                box = (px - half, py - 6, px + half, py + 5)
                if not taken.hits(box):
                    taken.add(box)
                    label = (px, py)
                    break
        routed.append((e, d, label))
    order = {e.id: i for i, e in enumerate(vg.edges)}
    return sorted(routed, key=lambda r: order[r[0].id])


class _Boxes:
    """Rectangles bucketed on a coarse grid, for fast overlap tests."""

    CELL = 128.0

    def __init__(self):
        self.cells = collections.defaultdict(list)

    def _keys(self, box):
        c = self.CELL
        return [(i, j) for i in range(int(box[0] // c), int(box[2] // c) + 1)
                for j in range(int(box[1] // c), int(box[3] // c) + 1)]

    def add(self, box) -> None:
        for key in self._keys(box):
            self.cells[key].append(box)

    def hits(self, box) -> bool:
        return any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3]
                   for key in self._keys(box) for b in self.cells.get(key, ()))


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
