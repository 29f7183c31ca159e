"""Colours, fonts and text metrics shared by the DOT and SVG renderers and the layout.

Text is set in a monospace font, so a label's width is known without font files:
``len(text) * CHAR_W * font_size``. Nothing here is loaded from the network.

>>> PHASE_STYLE["backward"]["fill"]
'#ffedd5'
>>> node_size(["linear_relu"], "op")
(98, 28)
"""
from __future__ import annotations

import re
from xml.sax.saxutils import escape

FONT = "DejaVu Sans Mono, Menlo, Consolas, Liberation Mono, monospace"
CHAR_W = 0.61          # advance of one monospace glyph, in em
OP_FONT, SUB_FONT, LEAF_FONT, EDGE_FONT, CLUSTER_FONT = 12, 10, 10, 9, 11

# Op nodes by phase: forward (blue), backward (orange), optimizer update (green).
PHASE_STYLE = {
    "forward": {"fill": "#dbeafe", "stroke": "#2563eb", "text": "#1e3a8a", "label": "forward"},
    "backward": {"fill": "#ffedd5", "stroke": "#ea580c", "text": "#7c2d12", "label": "backward (autodiff)"},
    "update": {"fill": "#dcfce7", "stroke": "#16a34a", "text": "#14532d", "label": "optimizer update"},
}

# Small nodes for values no op produces, and for the graph's outputs.
LEAF_STYLE = {
    "input": {"fill": "#fef9c3", "stroke": "#a16207", "text": "#713f12", "label": "input"},
    "param": {"fill": "#f3e8ff", "stroke": "#9333ea", "text": "#581c87", "label": "parameter"},
    "buffer": {"fill": "#fce7f3", "stroke": "#db2777", "text": "#831843", "label": "buffer"},
    "optim": {"fill": "#e2e8f0", "stroke": "#475569", "text": "#1e293b", "label": "optimizer state"},
    "const": {"fill": "#ffffff", "stroke": "#94a3b8", "text": "#334155", "label": "constant"},
    "output": {"fill": "#334155", "stroke": "#0f172a", "text": "#ffffff", "label": "graph output"},
    # inside control-flow bodies: a body's inputs, and its return (laid out in rows, like ops)
    "arg": {"fill": "#ccfbf1", "stroke": "#0f766e", "text": "#134e4a", "label": "body input"},
    "result": {"fill": "#0f766e", "stroke": "#134e4a", "text": "#ffffff", "label": "body return"},
}
LEAF_KINDS = ("input", "param", "buffer", "optim", "const")  # values no op produces
BODY_KINDS = ("arg", "result")

CLUSTER_STYLE = {
    "forward": {"fill": "#f1f5f9", "stroke": "#64748b"},
    "backward": {"fill": "#fff7ed", "stroke": "#c2410c"},
    "update": {"fill": "#f0fdf4", "stroke": "#15803d"},
}
# A control-flow node's bodies (cond's branches, a scan's step): solid teal boxes, and dashed
# teal edges binding the node's operands to the body inputs and the body's return to the node.
BODY_CLUSTER_STYLE = {"fill": "#f0fdfa", "stroke": "#0f766e"}
BIND_COLOR, BIND_DASH = "#0f766e", "5 3"
EDGE_COLOR, EDGE_LABEL_COLOR = "#64748b", "#475569"
FUSED_STROKE_WIDTH = 2.5


def text_width(text: str, font_size: float) -> float:
    return len(text) * CHAR_W * font_size


def node_size(lines: list[str], kind: str) -> tuple[int, int]:
    """Width and height in px of a node whose label has these lines (first line is the title)."""
    if kind in LEAF_STYLE:
        return int(max(36, text_width(lines[0], LEAF_FONT) + 18)), 20
    widths = [text_width(lines[0], OP_FONT)] + [text_width(t, SUB_FONT) for t in lines[1:]]
    return int(max(56, max(widths) + 18)), 28 + 13 * (len(lines) - 1)


def cluster_style(kind: str, phase: str) -> dict:
    """Fill/stroke of a cluster: a module's by phase, a control-flow body's."""
    return BODY_CLUSTER_STYLE if kind == "body" else CLUSTER_STYLE[phase]


def style_of(kind: str, phase: str | None) -> dict:
    """Fill/stroke/text colours of a node."""
    if kind in LEAF_STYLE:
        return LEAF_STYLE[kind]
    return PHASE_STYLE.get(phase or "forward", PHASE_STYLE["forward"])


_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(text) -> str:
    """Escape text for XML character data and attribute values (quotes included); characters
    XML 1.0 cannot carry at all (control codes, lone surrogates) become ``?``.

    >>> xml_text('a<b & "c"')
    'a&lt;b &amp; &quot;c&quot;'
    """
    return escape(_XML_BAD.sub("?", str(text)), {'"': "&quot;", "'": "&#39;"})
