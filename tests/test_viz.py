"""gc.viz: text, DOT, SVG and HTML pictures of graphs, with and without Graphviz."""
from __future__ import annotations

import html.parser
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import graphc as gc
import graphc.nn.functional as F
from graphc import nn, optim
from graphc.viz import style
from graphc.viz.layout import layout
from graphc.viz.model import build


# ---- models -------------------------------------------------------------------------
class Net(nn.Module):
    """Nested modules: features.0 ... inside features, classifier.* inside classifier."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(4 * 4 * 4, 16), nn.ReLU(), nn.Linear(16, 10))

    def forward(self, x):
        return self.classifier(self.features(x))


class Shared(nn.Module):
    """One module called twice around an op outside it: collapsing makes a cycle."""

    def __init__(self):
        super().__init__()
        self.fc, self.head = nn.Linear(8, 8), nn.Linear(8, 2)

    def forward(self, x):
        return self.head(self.fc(F.relu(self.fc(x)) * 2) + x)


XB, YB = np.zeros((8, 1, 8, 8), np.float32), np.zeros(8, np.int64)


@pytest.fixture(scope="module")
def step():
    gc.manual_seed(0)
    model = Net()
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    return gc.compile(model, example_inputs=(XB, YB), loss_fn=nn.CrossEntropyLoss(), optimizer=opt)


@pytest.fixture(scope="module")
def infer():
    gc.manual_seed(0)
    return gc.compile(Net().eval(), example_inputs=(XB,))


def shared_step():
    model = Shared()
    return gc.compile(model, example_inputs=(np.zeros((4, 8), np.float32), np.zeros(4, np.int64)),
                      loss_fn=nn.CrossEntropyLoss(), optimizer=optim.Adam(model.parameters()))


# ---- parsing helpers ----------------------------------------------------------------
def local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def svg_nodes(root) -> dict:
    """id -> <g class="node ..."> element."""
    return {g.get("id"): g for g in root.iter() if local(g.tag) == "g" and "node" in (g.get("class") or "").split()}


def dot_tokens(text: str):
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c == '"':
            j, buf = i + 1, []
            while text[j] != '"':
                buf.append(text[j:j + 2] if text[j] == "\\" else text[j])
                j += 2 if text[j] == "\\" else 1
            yield "str", "".join(buf)
            i = j + 1
        elif c == "<":  # HTML-like label: balanced angle brackets
            depth, j = 0, i
            while True:
                depth += {"<": 1, ">": -1}.get(text[j], 0)
                j += 1
                if depth == 0:
                    break
            yield "html", text[i:j]
            i = j
        elif text.startswith("->", i):
            yield "op", "->"
            i += 2
        elif c in "{}[];=,":
            yield "op", c
            i += 1
        else:
            m = re.compile(r"[A-Za-z0-9_.]+").match(text, i)
            assert m, f"unexpected DOT character {c!r} at {i}"
            yield "id", m.group()
            i = m.end()


def parse_dot(text: str):
    """A minimal DOT check: balanced braces/brackets, declared nodes, edges between them."""
    tokens = list(dot_tokens(text))
    assert tokens[0] == ("id", "digraph") and tokens[1][0] == "str" and tokens[2] == ("op", "{")
    depth = brackets = 0
    nodes, edges = set(), []
    for k, (kind, value) in enumerate(tokens):
        if value in "{}[]" and kind == "op":
            depth += {"{": 1, "}": -1}.get(value, 0)
            brackets += {"[": 1, "]": -1}.get(value, 0)
            assert depth >= 0 and brackets in (0, 1)
        if kind == "str" and brackets == 0 and k + 1 < len(tokens) and tokens[k + 1] == ("op", "[") \
                and tokens[k - 1] != ("op", "->") and tokens[k - 1][0] != "id":
            nodes.add(value)
        if (kind, value) == ("op", "->"):
            edges.append((tokens[k - 1][1], tokens[k + 1][1]))
    assert depth == 0 and brackets == 0
    return nodes, edges


# ---- formats ------------------------------------------------------------------------
def test_write_picks_the_format_from_the_extension(step, tmp_path):
    for ext in ("txt", "dot", "svg", "html"):
        assert gc.viz.write(step, tmp_path / f"g.{ext}", layout="python") == tmp_path / f"g.{ext}"
    assert (tmp_path / "g.txt").read_text() == str(step.graph) + "\n"
    assert (tmp_path / "g.dot").read_text().startswith('digraph "Net" {')
    assert (tmp_path / "g.svg").read_text().startswith("<?xml")
    assert (tmp_path / "g.html").read_text().startswith("<!DOCTYPE html>")
    assert sorted(os.listdir(tmp_path)) == ["g.dot", "g.html", "g.svg", "g.txt"]  # no temporary files left
    with pytest.raises(gc.GraphcError, match="format"):
        gc.viz.write(step, tmp_path / "g.png")
    with pytest.raises(gc.GraphcError, match="layout"):
        gc.viz.to_svg(step, layout="neato")
    with pytest.raises(gc.GraphcError, match="compiled plan or an ir.Graph"):
        gc.viz.to_dot("not a graph")


def test_graph_and_plan_give_the_same_picture(step):
    assert gc.viz.to_svg(step.graph, layout="python") == gc.viz.to_svg(step, layout="python")
    assert gc.viz.to_html(step, layout="python") == gc.viz.to_html(step, layout="python")  # deterministic


def test_dot_has_every_node_cluster_and_edge(step):
    g = step.graph
    for collapse in (False, True):
        text = gc.viz.to_dot(step, collapse_modules=collapse)
        nodes, edges = parse_dot(text)
        assert all(a in nodes and b in nodes for a, b in edges)
        if not collapse:
            assert {f"n{i}" for i in range(len(g.nodes))} <= nodes
            assert all(f"<B>{node.op}</B>" in text for node in g.nodes)
            assert 'label="features.0 (Conv2d)"' in text and 'label="features"' in text
            assert 'label="f32[N,4,8,8]"' in text
    try:
        import pydot
    except ImportError:
        return
    parsed = pydot.graph_from_dot_data(gc.viz.to_dot(step))[0]
    assert parsed.get_name().strip('"') == "Net"


# ---- SVG ----------------------------------------------------------------------------
def test_svg_parses_and_shows_every_node_with_types(step):
    svg = gc.viz.to_svg(step, layout="python")
    root = ET.fromstring(svg.encode())
    nodes = svg_nodes(root)
    g = step.graph
    assert {f"n{i}" for i in range(len(g.nodes))} <= set(nodes)
    for i, node in enumerate(g.nodes):
        texts = [t.text for t in nodes[f"n{i}"].iter() if local(t.tag) == "text"]
        assert texts[0] == node.op
    labels = {t.text for t in root.iter() if "edge-label" in (t.get("class") or "")}
    assert {"f32[N,1,8,8]", "f32[N,4,8,8]", "f32[N,64]", "f32[N,10]"} <= labels
    leaves = {nodes[k].get("class").split()[1] for k in nodes if k[0] == "v"}
    assert leaves == {"input", "param", "buffer", "optim"}
    titles = [t.text for t in nodes["n0"].iter() if local(t.tag) == "title"]
    assert "features.1 (BatchNorm2d)" in titles[0] or "features.0 (Conv2d)" in titles[0]


def test_training_graph_has_three_phase_colours_and_a_legend(step):
    root = ET.fromstring(gc.viz.to_svg(step, layout="python").encode())
    by_phase = {}
    for g in svg_nodes(root).values():
        cls = g.get("class").split()
        if cls[1] == "op":
            rect = next(e for e in g if local(e.tag) == "rect")
            by_phase.setdefault(cls[2], set()).add(rect.get("fill"))
    assert by_phase == {f"phase-{p}": {style.PHASE_STYLE[p]["fill"]} for p in ("forward", "backward", "update")}
    assert len({s["fill"] for s in style.PHASE_STYLE.values()}) == len(style.PHASE_STYLE)
    legend = next(g for g in root.iter() if g.get("id") == "legend")
    swatches = {e.get("class").split()[1]: e.get("fill") for e in legend if "swatch" in (e.get("class") or "")}
    for p in ("forward", "backward", "update"):
        assert swatches[f"swatch-phase-{p}"] == style.PHASE_STYLE[p]["fill"]
    words = " ".join(t.text or "" for t in legend.iter() if local(t.tag) == "text")
    for word in ("forward", "backward", "optimizer update", "fused op", "parameter", "buffer", "input", "module"):
        assert word in words


def test_inference_graph_legend_lists_only_the_forward_phase(infer):
    root = ET.fromstring(gc.viz.to_svg(infer, layout="python").encode())
    legend = next(g for g in root.iter() if g.get("id") == "legend")
    kinds = {e.get("class").split()[1] for e in legend if "swatch" in (e.get("class") or "")}
    assert "swatch-phase-forward" in kinds and "swatch-phase-backward" not in kinds


def test_fused_ops_show_what_they_fused(step):
    root = ET.fromstring(gc.viz.to_svg(step, layout="python").encode())
    fused = [g for g in svg_nodes(root).values() if "fused" in g.get("class").split()]
    texts = {tuple(t.text for t in g.iter() if local(t.tag) == "text") for g in fused}
    assert ("conv_bn_train", "conv2d+batch_norm_train+relu") in texts
    assert ("linear_relu", "linear+relu") in texts


def test_layout_geometry(step, infer):
    """Nodes never overlap; clusters hold their nodes and nested clusters; siblings never
    overlap; no node sits inside a cluster it does not belong to."""
    def overlap(a, b):
        return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]

    def inside(a, c):
        return c[0] <= a[0] and c[1] <= a[1] and a[0] + a[2] <= c[0] + c[2] and a[1] + a[3] <= c[1] + c[3]

    for graph, collapse in ((step.graph, False), (infer.graph, False), (step.graph, True),
                            (shared_step().graph, False)):
        vg = build(graph, collapse)
        lay = layout(vg)
        assert set(lay.nodes) == set(vg.nodes)
        boxes = list(lay.nodes.items())
        for i, (a, box_a) in enumerate(boxes):
            assert not any(overlap(box_a, box_b) for _, box_b in boxes[i + 1:]), a
        for nid, n in vg.nodes.items():
            chain, c = set(), n.cluster
            while c is not None:
                assert inside(lay.nodes[nid], lay.clusters[c]), (nid, c)
                chain.add(c)
                c = vg.clusters[c].parent
            assert not any(overlap(lay.nodes[nid], lay.clusters[c]) for c in vg.clusters if c not in chain)
        for a in vg.clusters.values():
            if a.parent:
                assert inside(lay.clusters[a.id], lay.clusters[a.parent])
            assert not any(overlap(lay.clusters[a.id], lay.clusters[b.id]) for b in vg.clusters.values()
                           if b.parent == a.parent and b.id != a.id)
    vg = build(step.graph)
    labels = {c.label for c in vg.clusters.values()}
    assert {"features", "features.0 (Conv2d)", "classifier", "classifier.1 (Linear)",
            "features.0 (Conv2d) \u00b7 backward", "classifier.3 (Linear) \u00b7 update"} <= labels
    parent = {c.label: vg.clusters[c.parent].label for c in vg.clusters.values() if c.parent}
    assert parent["features.0 (Conv2d)"] == "features"


def test_collapse_modules_draws_one_node_per_top_level_module(step):
    full, small = build(step.graph), build(step.graph, collapse_modules=True)
    assert len(small.nodes) < len(full.nodes) / 2 and not small.clusters
    groups = {n.lines[0] + "/" + n.phase for n in small.nodes.values() if n.kind == "group"}
    assert groups == {"features/forward", "classifier/forward", "features/backward", "classifier/backward",
                      "features/update", "classifier/update"}
    assert all(e.src in small.nodes and e.dst in small.nodes and e.src != e.dst for e in small.edges)
    root = ET.fromstring(gc.viz.to_svg(step, collapse_modules=True, layout="python").encode())
    assert len(svg_nodes(root)) == len(small.nodes)
    feats = next(n for n in small.nodes.values() if n.kind == "group" and n.lines[0] == "features"
                 and n.phase == "forward")
    assert "conv_bn_train" in feats.info["ops"] and "features.0.weight" in feats.info["state"]
    # a module called twice around an outside op makes a cycle once collapsed: still drawn
    svg = gc.viz.to_svg(shared_step(), collapse_modules=True, layout="python")
    assert ET.fromstring(svg.encode()) is not None and "fc (Linear)" in svg


def test_text_is_escaped_everywhere(step):
    evil = 'a"b<c>&d\'e\\f\nline'
    g = step.graph.copy()
    g.name = "Evil<&>"
    g.nodes[0] = replace(g.nodes[0], meta={**g.nodes[0].meta, "source": evil + ".py:1", "module": "features.<0>"})
    ET.fromstring(gc.viz.to_svg(g, layout="python").encode())
    page = gc.viz.to_html(g, layout="python")
    root = ET.fromstring(page.encode())
    data_el = next(e for e in root.iter() if e.get("id") == "graphc-data")
    assert "<" not in data_el.text and "&" not in data_el.text
    assert json.loads(data_el.text)["nodes"]["n0"]["source"] == evil + ".py:1"
    nodes, _ = parse_dot(gc.viz.to_dot(g))
    assert "n0" in nodes


# ---- HTML ---------------------------------------------------------------------------
class _Collect(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def test_html_is_one_offline_file(step):
    page = gc.viz.to_html(step, layout="python")
    root = ET.fromstring(page.encode())  # well-formed XML as well as HTML5
    parser = _Collect()
    parser.feed(page)
    tags = parser.tags + [(local(e.tag), dict(e.attrib)) for e in root.iter()]
    assert not [t for t, _ in tags if t in ("link", "img", "iframe", "object", "embed", "image", "use")]
    for tag, attrs in tags:
        assert not (tag == "script" and "src" in attrs)
        for key, value in attrs.items():
            if key.endswith("href") or key.endswith("src"):
                assert not re.match(r"\s*(https?:|//|data:|file:)", value or ""), (tag, key, value)
    assert "http" not in page and "@import" not in page and "url(" not in page.replace("url(#gc-arrow)", "")
    data = json.loads(next(e for e in root.iter() if e.get("id") == "graphc-data").text)
    g = step.graph
    assert {f"n{i}" for i in range(len(g.nodes))} <= set(data["nodes"]) == set(svg_nodes(root))
    conv = next(v for v in data["nodes"].values() if v.get("op") == "conv_bn_train")
    assert conv["module"] == "features.0" and conv["source"].startswith("test_viz.py:")
    assert conv["fused"] == "conv2d+batch_norm_train+relu" and conv["attrs"]["stride"] == "[1, 1]"
    assert ["%x", "f32[N,1,8,8]"] in conv["inputs"]
    svg = next(e for e in root.iter() if local(e.tag) == "svg")
    assert svg.get("id") == "graph" and svg.get("xmlns") is None


def test_write_plan_file_viz_needs_no_model_code(step, tmp_path):
    step.save(tmp_path / "m.graphc")
    out = gc.viz.write_plan_file_viz(tmp_path / "m.graphc", tmp_path / "m.html", layout="python")
    root = ET.fromstring(out.read_text().encode())
    assert {f"n{i}" for i in range(len(step.graph.nodes))} <= set(svg_nodes(root))
    path = tmp_path / "frozen.graphc"
    gc.export(Net(), (XB,), path)
    svg = gc.viz.write_plan_file_viz(path, tmp_path / "frozen.svg", layout="python").read_text()
    assert 'class="node const"' in svg  # parameters of a frozen plan are constants


# ---- Graphviz -----------------------------------------------------------------------
def _fake_dot(folder: Path, body: str) -> None:
    script = folder / "dot"
    script.write_text(f"#!{sys.executable}\nimport sys\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


def test_layouts_without_graphviz(step, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no dot here
    assert gc.viz.to_svg(step) == gc.viz.to_svg(step, layout="python")
    with pytest.raises(gc.GraphcError, match="Graphviz"):
        gc.viz.to_svg(step, layout="dot")


def test_graphviz_output_is_used_when_dot_is_on_path(step, monkeypatch, tmp_path):
    _fake_dot(tmp_path, 'assert sys.argv[1:] == ["-Tsvg"]\ntext = sys.stdin.read()\n'
              'assert text.startswith("digraph")\n'
              'print(\'<?xml version="1.0"?>\\n<!-- Generated by graphviz -->\\n<svg width="100pt" height="50pt" '
              'viewBox="0 0 100 50" xmlns="http://www.w3.org/2000/svg"><g id="n0" class="node"><title>n0</title>'
              '</g></svg>\')')
    monkeypatch.setenv("PATH", str(tmp_path))
    for layout_name in ("auto", "dot"):
        svg = gc.viz.to_svg(step, layout=layout_name)
        assert svg.startswith("<?xml") and '<g id="n0" class="node">' in svg and "legend" not in svg
    page = gc.viz.to_html(step, layout="dot")
    root = ET.fromstring(page.encode())
    svg_el = next(e for e in root.iter() if local(e.tag) == "svg")
    assert svg_el.get("id") == "graph" and svg_el.get("width") is None and svg_el.get("viewBox") == "0 0 100 50"
    _fake_dot(tmp_path, 'sys.stderr.write("Error: syntax error in line 1\\n")\nsys.exit(1)')
    with pytest.warns(RuntimeWarning, match="syntax error"):
        assert gc.viz.to_svg(step, layout="auto") == gc.viz.to_svg(step, layout="python")  # falls back
    with pytest.raises(gc.GraphcError, match="syntax error"):
        gc.viz.to_svg(step, layout="dot")


def test_real_graphviz_or_its_clear_absence(step):
    """With Graphviz's ``dot`` on PATH the dot layout draws every node; without it, asking for
    that layout is a clear error and ``auto`` falls back to the Python layout. Either way this
    runs: which branch depends on the machine, and both are behaviour users meet."""
    if shutil.which("dot") is None:
        with pytest.raises(gc.GraphcError, match="Graphviz"):
            gc.viz.to_html(step, layout="dot")
        assert gc.viz.to_svg(step, layout="auto") == gc.viz.to_svg(step, layout="python")
        return
    page = gc.viz.to_html(step, layout="dot")
    root = ET.fromstring(page.encode())
    assert {f"n{i}" for i in range(len(step.graph.nodes))} <= set(svg_nodes(root))
    assert gc.viz.to_svg(step, layout="auto") == gc.viz.to_svg(step, layout="dot")  # auto picks dot


# ---- a real browser -----------------------------------------------------------------
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
PROBE = """<script>//<![CDATA[
window.errors = [];
window.addEventListener('error', function (e) { window.errors.push(String(e.message)); });
window.addEventListener('load', function () {
  var svg = document.getElementById('graph'), view = document.getElementById('view');
  var before = svg.getAttribute('viewBox');
  var g = document.getElementById('NODE'), r = g.getBoundingClientRect();
  g.firstElementChild.dispatchEvent(new MouseEvent('mouseover',
    {bubbles: true, clientX: r.left + 2, clientY: r.top + 2}));
  var tip = document.getElementById('tip');
  var shown = {text: tip.textContent, hidden: tip.hidden};
  view.dispatchEvent(new WheelEvent('wheel',
    {bubbles: true, cancelable: true, deltaY: -300, clientX: 400, clientY: 300}));
  var zoomed = svg.getAttribute('viewBox');
  var opts = {bubbles: true, button: 0, pointerId: 1, clientX: 500, clientY: 400};
  view.dispatchEvent(new PointerEvent('pointerdown', opts));
  opts.clientX = 300;
  view.dispatchEvent(new PointerEvent('pointermove', opts));
  view.dispatchEvent(new PointerEvent('pointerup', opts));
  var out = document.createElement('pre');
  out.id = 'probe';
  out.textContent = JSON.stringify({before: before, zoomed: zoomed, panned: svg.getAttribute('viewBox'), tip: shown,
    titles: document.querySelectorAll('#graph g.node title').length, errors: window.errors});
  document.body.appendChild(out);
});
//]]></script>"""


def _chromium(*args, timeout=120):
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                               "--no-first-run", "--disable-background-networking", "--disable-component-update",
                               "--disable-sync", f"--user-data-dir={profile}", "--window-size=1600,1200", *args],
                              capture_output=True, timeout=timeout, check=False)


@pytest.mark.browser
def test_headless_chromium_renders_and_interacts(step, tmp_path):
    """Opt-in (``pytest -m browser``; .ci/run installs Debian's chromium and runs it): a real
    browser is not part of a fresh machine, so ``make test`` deselects this rather than skip."""
    assert CHROMIUM is not None, "pytest -m browser needs chromium on PATH (Debian: apt-get install chromium)"
    page = tmp_path / "graph.html"
    gc.viz.write(step, page, layout="python")
    png = tmp_path / "graph.png"
    _chromium(f"--screenshot={png}", page.as_uri())
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert (int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")) == (1600, 1200)
    assert len(data) > 40_000  # an empty page compresses to a few KB
    conv = next(i for i, n in enumerate(step.graph.nodes) if n.op == "conv_bn_train")
    probe = tmp_path / "probe.html"
    probe.write_text(page.read_text().replace("<head>", "<head>" + PROBE.replace("NODE", f"n{conv}"), 1))
    dom = _chromium("--dump-dom", probe.as_uri()).stdout.decode()
    result = json.loads(re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S).group(1).replace("&quot;", '"')
                        .replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"))
    assert result["errors"] == [] and result["titles"] == 0
    assert not result["tip"]["hidden"]
    for text in ("conv_bn_train", "features.0 (Conv2d)", "test_viz.py:", "conv2d+batch_norm_train+relu",
                 "f32[N,1,8,8]", "attr stride"):
        assert text in result["tip"]["text"]
    before, zoomed, panned = ([float(v) for v in result[k].split()] for k in ("before", "zoomed", "panned"))
    assert zoomed[2] < before[2] and zoomed[3] < before[3]  # wheel up zooms in
    assert panned[0] > zoomed[0] and panned[2:] == zoomed[2:]  # dragging left pans right
