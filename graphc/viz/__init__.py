"""Pictures of graphc graphs: text, DOT, SVG and a self-contained interactive HTML page.

``gc.viz.write(step, "graph.svg")`` picks the format from the extension (``.txt``, ``.dot``,
``.svg``, ``.html``). Modules are drawn as clusters named by their path, fused ops show what
they fused, forward / backward / optimizer-update ops have their own colours, edges carry
value types, and a legend explains it all. ``collapse_modules=True`` draws each top-level
module as one node, for large graphs. The bodies of ``cond``, ``scan`` and ``while_loop``
nodes are clusters beside their node, named by their attr (``true_branch``, ``body``, ...),
bodies inside bodies nested; on the HTML page a click on such a node folds its bodies away
(:mod:`graphc.viz.bodies`).

SVG and HTML never need system packages: ``layout="auto"`` (the default) uses Graphviz's
``dot`` when it is on PATH and graphc's own layered layout (pure Python over networkx)
otherwise; ``layout="python"`` and ``layout="dot"`` force one.

>>> import numpy as np, os, tempfile, graphc as gc
>>> from graphc import nn
>>> model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
>>> step = gc.compile(model, example_inputs=(np.zeros((4, 4), np.float32), np.zeros(4, np.int64)),
...                   loss_fn=nn.CrossEntropyLoss(), optimizer=gc.optim.SGD(model.parameters(), lr=0.1))
>>> with tempfile.TemporaryDirectory() as tmp:
...     for ext in ("txt", "dot", "svg", "html"):
...         _ = write(step, os.path.join(tmp, "graph." + ext), layout="python")
...     sorted(os.listdir(tmp))
['graph.dot', 'graph.html', 'graph.svg', 'graph.txt']
"""
from __future__ import annotations

import os
import re
import warnings
from pathlib import Path

from ..ir.errors import GraphcError
from ..ir.graph import Graph
from . import dot as _dot
from .html import page_html
from .model import VizGraph, build
from .svg import render

LAYOUTS = ("auto", "python", "dot")
FORMATS = {".txt": "text", ".dot": "dot", ".gv": "dot", ".svg": "svg", ".html": "html", ".htm": "html"}

__all__ = ["FORMATS", "LAYOUTS", "build", "to_dot", "to_html", "to_svg", "to_text", "write", "write_plan_file_viz"]


def _graph(obj) -> Graph:
    graph = getattr(obj, "graph", obj)
    if not isinstance(graph, Graph):
        raise GraphcError(f"gc.viz needs a compiled plan or an ir.Graph, not {type(obj).__name__}")
    return graph


def _check_layout(layout: str) -> None:
    if layout not in LAYOUTS:
        raise GraphcError(f"layout must be one of {', '.join(LAYOUTS)}, not {layout!r}")


def to_text(plan_or_graph) -> str:
    """The IR as text (``str(graph)``).

    >>> import numpy as np, graphc as gc
    >>> from graphc import nn
    >>> plan = gc.compile(nn.Linear(4, 2).eval(), example_inputs=(np.zeros((2, 4), np.float32),))
    >>> print(to_text(plan).splitlines()[-3])
      %0:f32[N,2] = linear(%x, @weight, @bias)  # ...
    """
    return str(_graph(plan_or_graph))


def to_dot(plan_or_graph, collapse_modules: bool = False) -> str:
    """Graphviz DOT text: module clusters, phase colours, typed edges and a legend.

    >>> import numpy as np, graphc as gc
    >>> from graphc import nn
    >>> plan = gc.compile(nn.Sequential(nn.Linear(4, 8), nn.ReLU()).eval(),
    ...                   example_inputs=(np.zeros((2, 4), np.float32),))
    >>> text = to_dot(plan)
    >>> "linear_relu" in text and 'label="f32[N,8]"' in text
    True
    """
    return _dot.dot_text(build(_graph(plan_or_graph), collapse_modules))


def _svg(vg: VizGraph, layout: str, inline: bool) -> str:
    _check_layout(layout)
    if layout == "dot" or (layout == "auto" and _dot.dot_program() is not None):
        try:
            return _dot.run_dot(_dot.dot_text(vg, folds=inline))
        except GraphcError as exc:
            if layout == "dot":
                raise
            warnings.warn(f"{exc}; using graphc's own layout", RuntimeWarning, stacklevel=3)
    return render(vg, inline=inline)


def to_svg(plan_or_graph, collapse_modules: bool = False, layout: str = "auto") -> str:
    """An SVG document. ``layout``: ``"auto"`` (Graphviz if installed, else Python),
    ``"python"`` (always available) or ``"dot"`` (GraphcError without Graphviz).

    >>> import numpy as np, graphc as gc
    >>> from graphc import nn
    >>> plan = gc.compile(nn.Sequential(nn.Linear(4, 8), nn.ReLU()).eval(),
    ...                   example_inputs=(np.zeros((2, 4), np.float32),))
    >>> svg = to_svg(plan, layout="python")
    >>> 'id="n0"' in svg and 'id="legend"' in svg
    True
    """
    svg = _svg(build(_graph(plan_or_graph), collapse_modules), layout, inline=False)
    return svg if svg.startswith("<?xml") else '<?xml version="1.0" encoding="UTF-8"?>\n' + svg


def to_html(plan_or_graph, collapse_modules: bool = False, layout: str = "auto", title: str | None = None) -> str:
    """One self-contained HTML page (works offline): the SVG inline with wheel zoom, drag
    pan, a find box, and hover details (op, attrs, shapes, module path, source line).

    >>> import numpy as np, graphc as gc
    >>> from graphc import nn
    >>> plan = gc.compile(nn.Sequential(nn.Linear(4, 8), nn.ReLU()).eval(),
    ...                   example_inputs=(np.zeros((2, 4), np.float32),))
    >>> page = to_html(plan, layout="python")
    >>> page.startswith("<!DOCTYPE html>") and '"source": ' in page
    True
    """
    vg = build(_graph(plan_or_graph), collapse_modules)
    svg = _svg(vg, layout, inline=True)
    if not svg.startswith('<svg id="graph"'):  # Graphviz's drawing: let the page size it
        svg = '<svg id="graph" preserveAspectRatio="xMidYMid meet"' + _strip_size(svg[len("<svg"):])
    return page_html(vg, svg, title)


def _strip_size(rest: str) -> str:
    """Drop the width/height attributes of Graphviz's root ``<svg`` tag (CSS sizes it)."""
    head, sep, tail = rest.partition(">")
    head = re.sub(r'\s(width|height)="[^"]*"', "", head)
    return head + sep + tail


def write(plan_or_graph, path, collapse_modules: bool = False, layout: str = "auto") -> Path:
    """Write the graph of a plan (or an ``ir.Graph``) to ``path``; the extension picks the
    format: ``.txt`` (IR text), ``.dot``/``.gv``, ``.svg``, ``.html``/``.htm``. Returns the path.

    >>> import numpy as np, os, tempfile, graphc as gc
    >>> from graphc import nn
    >>> plan = gc.compile(nn.Linear(4, 2).eval(), example_inputs=(np.zeros((2, 4), np.float32),))
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     write(plan, os.path.join(tmp, "g.svg"), layout="python").stat().st_size > 1000
    True
    """
    path = Path(path)
    kind = FORMATS.get(path.suffix.lower())
    if kind is None:
        raise GraphcError(f"cannot tell the format of {path.name!r}: use one of {', '.join(sorted(FORMATS))}")
    if kind == "text":
        text = to_text(plan_or_graph) + "\n"
    elif kind == "dot":
        text = to_dot(plan_or_graph, collapse_modules)
    elif kind == "svg":
        text = to_svg(plan_or_graph, collapse_modules, layout)
    else:
        text = to_html(plan_or_graph, collapse_modules, layout)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as e:  # name the caller's path, not the hidden temp file written first
        raise OSError(e.errno, e.strerror, os.fspath(path)) from e
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def write_plan_file_viz(plan_path, out_path, collapse_modules: bool = False, layout: str = "auto") -> Path:
    """Load a saved plan file (no model code needed) and write its graph to ``out_path``
    (what ``graphc viz FILE -o graph.svg`` does).

    >>> import numpy as np, os, tempfile, graphc as gc
    >>> from graphc import nn
    >>> plan = gc.compile(nn.Linear(4, 2).eval(), example_inputs=(np.zeros((2, 4), np.float32),))
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     plan.save(os.path.join(tmp, "m.graphc"))
    ...     out = write_plan_file_viz(os.path.join(tmp, "m.graphc"), os.path.join(tmp, "m.html"), layout="python")
    ...     out.read_text().count('class="node op')
    1
    """
    from ..compile import load_model

    return write(load_model(os.fspath(plan_path)), out_path, collapse_modules=collapse_modules, layout=layout)
