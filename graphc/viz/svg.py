"""SVG drawing of a laid-out graph, with a legend; pure Python, no Graphviz.

Every node is a ``<g class="node ..." id="n12">`` (op nodes keep their index in
``graph.nodes``) with a ``<title>`` for hover text in any SVG viewer; every edge a
``<g class="edge" id="e3" data-src=... data-dst=...>``. All text is XML-escaped.

>>> import numpy as np, graphc as gc
>>> from graphc import nn
>>> from graphc.viz.model import build
>>> plan = gc.compile(nn.Sequential(nn.Linear(4, 8), nn.ReLU()).eval(),
...                   example_inputs=(np.zeros((2, 4), np.float32),))
>>> svg = render(build(plan.graph))
>>> svg.startswith("<?xml") and 'id="n0"' in svg and "linear_relu" in svg
True
"""
from __future__ import annotations

from .layout import Layout, layout
from .model import VizGraph, tooltip_text
from .style import (BIND_COLOR, BIND_DASH, BODY_CLUSTER_STYLE, CLUSTER_FONT, CLUSTER_STYLE, EDGE_COLOR, EDGE_FONT,
                    EDGE_LABEL_COLOR, FONT, FUSED_STROKE_WIDTH, LEAF_FONT, LEAF_STYLE, OP_FONT, PHASE_STYLE, SUB_FONT,
                    cluster_style, style_of, text_width, xml_text)
from .view import edge_title

TITLE_H = 26
LEGEND_ROW_H = 24
LEGEND_MAX_W = 1180


def _legend_entries(vg: VizGraph) -> list:
    """(kind, style key, label) for what this picture uses."""
    entries = [("phase", p, PHASE_STYLE[p]["label"]) for p in vg.phases() or ["forward"]]
    if any(n.fused for n in vg.nodes.values()):
        entries.append(("fused", "forward", "fused op (what it fused below its name)"))
    if vg.collapsed:
        entries.append(("group", "forward", "collapsed module"))
    elif any(c.kind == "module" for c in vg.clusters.values()):
        entries.append(("cluster", "forward", "module (path)"))
    if any(c.kind == "body" for c in vg.clusters.values()):
        entries.append(("body", "", "control-flow body (attr name)"))
    entries += [("leaf", k, LEAF_STYLE[k]["label"]) for k in LEAF_STYLE if k in vg.kinds()]
    entries.append(("edge", "", "f32[N,C] value type"))
    if any(e.style == "bind" for e in vg.edges):
        entries.append(("bind", "", "operand -> body input, body return -> its node"))
    return entries


def _legend_rows(vg: VizGraph) -> list:
    rows, row, x = [], [], 0.0
    for entry in _legend_entries(vg):
        w = 36 + text_width(entry[2], 10) + 18
        if row and x + w > LEGEND_MAX_W:
            rows.append(row)
            row, x = [], 0.0
        row.append((x, entry))
        x += w
    return rows + [row] if row else rows


def _legend_svg(vg: VizGraph, x0: float, y0: float) -> list:
    out = ['<g class="legend" id="legend">']
    for r, row in enumerate(_legend_rows(vg)):
        y = y0 + r * LEGEND_ROW_H
        for x, (kind, key, label) in row:
            x += x0
            if kind in ("phase", "fused", "group"):
                s = PHASE_STYLE[key]
                width = FUSED_STROKE_WIDTH if kind == "fused" else 2.2 if kind == "group" else 1.2
                out.append(f'<rect class="swatch swatch-{kind}{"-" + key if kind == "phase" else ""}" x="{x:.1f}" '
                           f'y="{y:.1f}" width="30" height="16" rx="3" fill="{s["fill"]}" stroke="{s["stroke"]}" '
                           f'stroke-width="{width}"/>')
                if kind == "fused":
                    out.append(f'<rect x="{x + 3:.1f}" y="{y + 3:.1f}" width="24" height="10" rx="2" fill="none" '
                               f'stroke="{s["stroke"]}" stroke-width="0.8"/>')
            elif kind == "cluster":
                s = CLUSTER_STYLE["forward"]
                out.append(f'<rect class="swatch swatch-cluster" x="{x:.1f}" y="{y:.1f}" width="30" height="16" '
                           f'rx="4" fill="{s["fill"]}" stroke="{s["stroke"]}" stroke-dasharray="4 2"/>')
            elif kind == "body":
                s = BODY_CLUSTER_STYLE
                out.append(f'<rect class="swatch swatch-body" x="{x:.1f}" y="{y:.1f}" width="30" height="16" '
                           f'rx="4" fill="{s["fill"]}" stroke="{s["stroke"]}" stroke-width="1.5"/>')
            elif kind == "bind":
                out.append(f'<path class="swatch swatch-bind" d="M{x:.1f},{y + 8:.1f} H{x + 28:.1f}" '
                           f'stroke="{BIND_COLOR}" stroke-dasharray="{BIND_DASH}" marker-end="url(#gc-bind)"/>')
            elif kind == "leaf":
                s = LEAF_STYLE[key]
                out.append(f'<rect class="swatch swatch-{key}" x="{x:.1f}" y="{y + 2:.1f}" width="30" height="12" '
                           f'rx="6" fill="{s["fill"]}" stroke="{s["stroke"]}"/>')
            else:
                out.append(f'<path d="M{x:.1f},{y + 8:.1f} H{x + 28:.1f}" stroke="{EDGE_COLOR}" '
                           'marker-end="url(#gc-arrow)"/>')
            out.append(f'<text x="{x + 36:.1f}" y="{y + 12:.1f}" font-size="10" fill="#334155">'
                       f'{xml_text(label)}</text>')
    out.append("</g>")
    return out


def header_height(vg: VizGraph) -> float:
    return TITLE_H + len(_legend_rows(vg)) * LEGEND_ROW_H + 6


def _node_svg(n, box, inline: bool) -> list:
    x, y, w, h = box
    s = style_of(n.kind, n.phase)
    control = bool(n.info.get("bodies"))
    cls = f"node {n.kind}" + (f" phase-{n.phase}" if n.phase else "") + (" fused" if n.fused else "") + \
        (" control" if control else "")
    nid = xml_text(n.id)
    out = [f'<g class="{cls}" id="{nid}" data-id="{nid}"><title>{xml_text(tooltip_text(n))}</title>']
    if n.kind in LEAF_STYLE:
        out.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{w}" height="{h}" rx="{h / 2}" fill="{s["fill"]}" '
                   f'stroke="{s["stroke"]}"/>')
        out.append(f'<text x="{x + w / 2:.1f}" y="{y + 14:.1f}" font-size="{LEAF_FONT}" text-anchor="middle" '
                   f'fill="{s["text"]}">{xml_text(n.lines[0])}</text>')
        return out + ["</g>"]
    width = FUSED_STROKE_WIDTH if n.fused else 2.2 if n.kind == "group" else 1.2
    out.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{w}" height="{h}" rx="{6 if n.kind == "group" else 4}" '
               f'fill="{s["fill"]}" stroke="{s["stroke"]}" stroke-width="{width}"/>')
    if n.fused:
        out.append(f'<rect x="{x + 3:.1f}" y="{y + 3:.1f}" width="{w - 6}" height="{h - 6}" rx="2" fill="none" '
                   f'stroke="{s["stroke"]}" stroke-width="0.8"/>')
    out.append(f'<text x="{x + w / 2:.1f}" y="{y + 18:.1f}" font-size="{OP_FONT}" font-weight="bold" '
               f'text-anchor="middle" fill="{s["text"]}">{xml_text(n.lines[0])}</text>')
    for k, line in enumerate(n.lines[1:]):
        out.append(f'<text x="{x + w / 2:.1f}" y="{y + 31 + 13 * k:.1f}" font-size="{SUB_FONT}" '
                   f'text-anchor="middle" fill="{s["text"]}">{xml_text(line)}</text>')
    if control and inline:  # the page's fold switch: click the node to hide or show its bodies
        out.append(f'<text class="toggle" x="{x + w - 7:.1f}" y="{y + 11:.1f}" font-size="11" font-weight="bold" '
                   f'text-anchor="middle" fill="{s["text"]}">\u2212</text>')
    return out + ["</g>"]


def render(vg: VizGraph, inline: bool = False, lay: Layout | None = None) -> str:
    """The SVG document (``inline=True``: the bare ``<svg>`` element for an HTML page)."""
    top = header_height(vg)
    lay = lay or layout(vg, top=top)
    width = max(lay.width, LEGEND_MAX_W + 32)
    height = lay.height
    attrs = (f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="{xml_text(FONT)}"')
    if inline:
        head = [f'<svg id="graph" {attrs} preserveAspectRatio="xMidYMid meet">']
    else:
        head = ['<?xml version="1.0" encoding="UTF-8"?>',
                f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" {attrs}>']
    out = head + [
        '<defs><marker id="gc-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        f'orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="{EDGE_COLOR}"/></marker>'
        '<marker id="gc-bind" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        f'orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="{BIND_COLOR}"/></marker></defs>',
        f'<rect class="background" x="0" y="0" width="{width:.0f}" height="{height:.0f}" fill="#ffffff"/>',
        f'<text class="title" x="16" y="19" font-size="14" font-weight="bold" fill="#0f172a">'
        f'{xml_text(vg.name)}<tspan font-weight="normal" font-size="11" fill="#475569" dx="10">'
        f'{xml_text(vg.summary())}</tspan></text>',
    ]
    out += _legend_svg(vg, 16, TITLE_H)
    out.append('<g class="clusters">')
    titles = []  # drawn over the edges, with a halo, so a line through a title never hides it
    for cid, (x, y, w, h) in lay.clusters.items():
        c = vg.clusters[cid]
        s = cluster_style(c.kind, c.phase)
        line = 'stroke-width="1.5"' if c.kind == "body" else 'stroke-dasharray="5 3"'
        out.append(f'<g class="cluster {c.kind} phase-{c.phase}" id="{xml_text(cid)}"><title>'
                   f'{xml_text(c.info.get("title", c.label))}</title><rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" '
                   f'height="{h:.1f}" rx="6" fill="{s["fill"]}" fill-opacity="0.65" stroke="{s["stroke"]}" '
                   f'{line}/></g>')
        titles.append(f'<text class="cluster-title" data-cluster="{xml_text(cid)}" x="{x + 7:.1f}" y="{y + 13:.1f}" '
                      f'fill="{s["stroke"]}" stroke="{s["fill"]}">{xml_text(c.label)}</text>')
    out.append('</g><g class="edges" fill="none">')
    labels = []
    for e, d, label_at in lay.edges:
        if e.style == "fold" and not inline:  # only the page folds bodies away
            continue
        long = lay.layers[e.dst] - lay.layers[e.src] > 4
        look = (f'stroke="{BIND_COLOR}" stroke-dasharray="{BIND_DASH}" marker-end="url(#gc-bind)"'
                if e.style == "bind" else f'stroke="{EDGE_COLOR}" marker-end="url(#gc-arrow)"')
        cls = {"bind": "edge bind", "fold": "edge fold gc-hidden"}.get(e.style, "edge")
        out.append(f'<g class="{cls}" id="{e.id}" data-src="{xml_text(e.src)}" '
                   f'data-dst="{xml_text(e.dst)}"><title>{xml_text(edge_title(e))}</title><path d="{d}" {look} '
                   f'stroke-width="1.1"{" stroke-opacity=" + chr(34) + "0.4" + chr(34) if long else ""}/></g>')
        if label_at is not None:
            labels.append(f'<text class="edge-label" data-edge="{e.id}" x="{label_at[0]:.1f}" '
                          f'y="{label_at[1] + 3:.1f}">{xml_text(e.label)}</text>')
    out.append(f'</g><g class="cluster-titles" font-size="{CLUSTER_FONT}" stroke-width="3" paint-order="stroke" '
               'stroke-linejoin="round">')
    out += titles
    out.append("</g>")
    out.append(f'<g class="edge-labels" font-size="{EDGE_FONT}" text-anchor="middle" fill="{EDGE_LABEL_COLOR}" '
               'stroke="#ffffff" stroke-width="3" paint-order="stroke" stroke-linejoin="round">')
    out += labels
    out.append('</g><g class="nodes">')
    for nid, n in vg.nodes.items():
        out += _node_svg(n, lay.nodes[nid], inline)
    out.append("</g></svg>")
    return "\n".join(out) + "\n"
