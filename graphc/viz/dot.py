"""Graphviz DOT text of a graph, and SVG through Graphviz's ``dot`` program when installed.

The DOT text is always available (no Graphviz needed to write it). Node ids are the same
as in graphc's own SVG (``n<i>`` for ``graph.nodes[i]``), and ``id`` attributes carry them
into Graphviz's SVG, so the HTML page's hover data fits either drawing.

>>> import numpy as np, graphc as gc
>>> from graphc import nn
>>> from graphc.viz.model import build
>>> plan = gc.compile(nn.Sequential(nn.Linear(4, 8), nn.ReLU()).eval(),
...                   example_inputs=(np.zeros((2, 4), np.float32),))
>>> text = dot_text(build(plan.graph))
>>> text.splitlines()[0]
'digraph "Sequential" {'
>>> '"n0" [id="n0"' in text and 'subgraph "cluster_c0"' in text
True
"""
from __future__ import annotations

import shutil
import subprocess

from ..ir.errors import GraphcError
from .model import VizGraph, tooltip_text
from .style import (BIND_COLOR, EDGE_COLOR, FUSED_STROKE_WIDTH, LEAF_STYLE, PHASE_STYLE, cluster_style, style_of,
                    xml_text)
from .view import edge_title


def quote(text) -> str:
    """A DOT double-quoted string: backslashes and quotes escaped, newlines as ``\\n``.

    >>> print(quote('a "b" \\\\ c'))
    "a \\"b\\" \\\\ c"
    """
    s = str(text).replace("\\", "\\\\").replace('"', '\\"')
    s = s.replace("\r", "").replace("\n", "\\n")
    return f'"{s}"'


def _html_label(lines: list, bold_first: bool) -> str:
    parts = []
    for k, line in enumerate(lines):
        text = xml_text(line)
        if k == 0:
            parts.append(f"<B>{text}</B>" if bold_first else text)
        else:
            parts.append(f'<FONT POINT-SIZE="8">{text}</FONT>')
    return "<" + "<BR/>".join(parts) + ">"


def _node_line(n, indent: str) -> str:
    s = style_of(n.kind, n.phase)
    attrs = {"id": quote(n.id), "tooltip": quote(tooltip_text(n)), "fillcolor": quote(s["fill"]),
             "color": quote(s["stroke"]), "fontcolor": quote(s["text"])}
    if n.kind in LEAF_STYLE:
        attrs.update(shape="box", style=quote("rounded,filled"), height="0.25", fontsize="8", margin='"0.08,0.02"',
                     label=quote(n.lines[0]))
    else:
        attrs.update(shape="box", style=quote("rounded,filled" if n.kind == "group" else "filled"),
                     label=_html_label(n.lines, True))
        if n.fused:
            attrs.update(peripheries="2", penwidth=str(FUSED_STROKE_WIDTH / 2))
        elif n.kind == "group":
            attrs["penwidth"] = "2"
    body = ", ".join(f"{k}={v}" for k, v in attrs.items())
    return f"{indent}{quote(n.id)} [{body}];"


def dot_text(vg: VizGraph, folds: bool = False) -> str:
    """The DOT document of a view model (see :func:`graphc.viz.to_dot`). ``folds``: also the
    edges the HTML page shows while a control-flow node's bodies are folded (class ``fold``;
    they do not move the layout)."""
    out = [f"digraph {quote(vg.name)} {{",
           f"  graph [rankdir=TB, newrank=true, nodesep=0.25, ranksep=0.35, fontname=\"monospace\", fontsize=11, "
           f"label={quote(vg.name + ': ' + vg.summary())}, labelloc=t, labeljust=l];",
           '  node [fontname="monospace", fontsize=10, height=0.3];',
           f'  edge [fontname="monospace", fontsize=8, color="{EDGE_COLOR}", fontcolor="#475569", arrowsize=0.6];']
    members: dict = {}
    for n in vg.nodes.values():
        members.setdefault(n.cluster, []).append(n)
    kids: dict = {}
    for c in vg.clusters.values():
        kids.setdefault(c.parent, []).append(c)

    def emit(cid, depth):
        pad = "  " * depth
        if cid is not None:
            c = vg.clusters[cid]
            s = cluster_style(c.kind, c.phase)
            look = "rounded,filled" if c.kind == "body" else "rounded,dashed,filled"  # a body: solid
            out.append(f"{pad}subgraph {quote('cluster_' + cid)} {{")
            out.append(f"{pad}  id={quote(cid)}; label={quote(c.label)}; labeljust=l; style={quote(look)}; "
                       f"color={quote(s['stroke'])}; fillcolor={quote(s['fill'])}; fontcolor={quote(s['stroke'])}; "
                       f"tooltip={quote(c.info.get('title', c.label))};")
        for n in members.get(cid, ()):
            out.append(_node_line(n, pad + "  "))
        for child in kids.get(cid, ()):
            emit(child.id, depth + 1)
        if cid is not None:
            out.append(f"{pad}}}")

    emit(None, 0)
    for e in vg.edges:
        if e.style == "fold" and not folds:
            continue
        extra = {"bind": f', style=dashed, color="{BIND_COLOR}"',
                 "fold": ', class="fold", constraint=false'}.get(e.style, "")
        label = "" if e.style == "fold" else e.label
        out.append(f"  {quote(e.src)} -> {quote(e.dst)} [id={quote(e.id)}, label={quote(label)}, "
                   f"tooltip={quote(edge_title(e))}{extra}];")
    out += _legend(vg)
    out.append("}")
    return "\n".join(out) + "\n"


def _legend(vg: VizGraph) -> list:
    out = ['  subgraph "cluster_legend" {', '    id="legend"; label="legend"; style="rounded"; color="#cbd5e1";',
           '    node [shape=box, style=filled, fontsize=9, height=0.25];']
    names = []
    for phase in vg.phases() or ["forward"]:
        s = PHASE_STYLE[phase]
        names.append(f"legend_{phase}")
        out.append(f'    "legend_{phase}" [label={quote(s["label"])}, fillcolor="{s["fill"]}", color="{s["stroke"]}"];')
    if any(n.fused for n in vg.nodes.values()):
        s = PHASE_STYLE["forward"]
        names.append("legend_fused")
        out.append(f'    "legend_fused" [label="fused op", peripheries=2, fillcolor="{s["fill"]}", '
                   f'color="{s["stroke"]}"];')
    for kind, s in LEAF_STYLE.items():
        if kind in vg.kinds():
            names.append(f"legend_{kind}")
            out.append(f'    "legend_{kind}" [label={quote(s["label"])}, style="rounded,filled", '
                       f'fillcolor="{s["fill"]}", color="{s["stroke"]}", fontcolor="{s["text"]}"];')
    for a, b in zip(names, names[1:]):
        out.append(f'    "{a}" -> "{b}" [style=invis];')
    out.append("  }")
    return out


def dot_program() -> str | None:
    """Path of Graphviz's ``dot`` if it is on PATH."""
    return shutil.which("dot")


def run_dot(text: str, timeout: float = 120.0) -> str:
    """SVG from Graphviz (``dot -Tsvg``), prolog removed; GraphcError when it is missing or fails."""
    program = dot_program()
    if program is None:
        raise GraphcError("layout='dot' needs Graphviz's dot program, which is not installed "
                          "(use layout='python' or 'auto')")
    try:
        done = subprocess.run([program, "-Tsvg"], input=text.encode("utf-8"), capture_output=True,
                              timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GraphcError(f"Graphviz dot failed: {exc}") from None
    svg = done.stdout.decode("utf-8", errors="replace")
    start = svg.find("<svg")
    if done.returncode != 0 or start < 0:
        detail = done.stderr.decode("utf-8", errors="replace").strip().splitlines()[-1:] or ["no SVG output"]
        raise GraphcError(f"Graphviz dot failed (exit {done.returncode}): {detail[0]}")
    return svg[start:]
