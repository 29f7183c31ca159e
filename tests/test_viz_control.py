"""gc.viz draws the bodies of cond, scan and while_loop nodes: clusters named by their attr, nested
bodies inside bodies, operands bound to body inputs, and HTML pages that fold bodies away."""
from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import graphc as gc
from graphc import nn, optim
from graphc.viz.layout import layout
from graphc.viz.model import build
from test_viz import CHROMIUM, _chromium, local, parse_dot, svg_nodes

X = np.ones((4, 3), np.float32)
W = np.random.default_rng(0).standard_normal((3, 2)).astype(np.float32)


def cond_graph():
    w = gc.tensor(W)
    return gc.jit.trace(lambda x: gc.cond(x.sum() > 0, lambda a: (a @ w).relu(), lambda a: (a @ w).tanh(), (x,)), X)


def _step(c, x):  # a cond inside a scan body
    y = gc.cond(x.sum() > 0, lambda a, b: (a + b).relu(), lambda a, b: a - b, (c, x))
    return y, y * 2


def nested_graph():
    return gc.jit.trace(lambda xs: gc.scan(_step, gc.zeros(3), xs), np.ones((5, 3), np.float32))


def while_graph():
    return gc.jit.trace(lambda x: gc.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * 2), (gc.tensor(0), x)),
                    np.ones(2, np.float32))


class ScanNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.head = nn.Linear(3, 3), nn.Linear(3, 2)

    def forward(self, xs):
        carry, ys = gc.scan(_step, gc.zeros(3), self.fc(xs))
        return self.head(ys) + carry.sum()


@pytest.fixture(scope="module")
def graphs():
    return {"cond": cond_graph(), "nested": nested_graph(), "while": while_graph()}


@pytest.fixture(scope="module")
def train_step():
    gc.manual_seed(0)
    model = ScanNet()
    return gc.compile(model, example_inputs=(np.ones((5, 3), np.float32), np.zeros(5, np.int64)),
                      loss_fn=nn.CrossEntropyLoss(), optimizer=optim.SGD(model.parameters(), lr=0.1))


def body_clusters(vg) -> dict:
    return {c.id: c for c in vg.clusters.values() if c.kind == "body"}


def page_data(page: str) -> dict:
    root = ET.fromstring(page.encode())  # well-formed XML too
    return json.loads(next(e for e in root.iter() if e.get("id") == "graphc-data").text)


# ---- the view model -----------------------------------------------------------------------------
def test_cond_bodies_are_clusters_beside_the_node(graphs):
    vg = build(graphs["cond"])
    cond = next(n for n in vg.nodes.values() if n.lines[0] == "cond")
    clusters = body_clusters(vg)
    assert [(c.label, c.parent, c.owners) for c in clusters.values()] == [
        ("true_branch", cond.cluster, (cond.id,)), ("false_branch", cond.cluster, (cond.id,))]
    for key, op in (("true_branch", "relu"), ("false_branch", "tanh")):
        inside = [n for n in vg.nodes.values() if n.cluster == f"{cond.id}.{key}"]
        assert [n.kind for n in inside] == ["arg", "arg", "op", "op", "result"]
        assert [n.lines[0] for n in inside if n.kind == "op"] == ["matmul", op]
        assert all(n.owners == (cond.id,) and n.phase == "forward" for n in inside)
    binds = [(e.src, e.dst) for e in vg.edges if e.style == "bind"]
    x = next(n.id for n in vg.nodes.values() if n.kind == "input")
    w = next(n.id for n in vg.nodes.values() if n.kind == "const")
    assert (x, f"{cond.id}.true_branch.a0") in binds and (w, f"{cond.id}.false_branch.a1") in binds
    assert (f"{cond.id}.true_branch.r", cond.id) in binds and (f"{cond.id}.false_branch.r", cond.id) in binds
    into = {e.src: e.style for e in vg.edges if e.dst == cond.id}  # the predicate straight in; x and w through
    assert into[x] == into[w] == "fold" and [s for s in into.values() if s == ""] == [""]
    assert cond.info["bodies"] == {"true_branch": "true_branch (2 ops)", "false_branch": "false_branch (2 ops)"}
    assert vg.summary() == "3 ops: 3 forward (+4 in control-flow bodies)"


def test_a_cond_inside_a_scan_nests_its_clusters(graphs):
    vg = build(graphs["nested"])
    clusters = body_clusters(vg)
    assert {c.id: (c.label, c.parent, c.owners) for c in clusters.values()} == {
        "n0.body": ("body (scan_step)", None, ("n0",)),
        "n0.body.n2.true_branch": ("true_branch", "n0.body", ("n0", "n0.body.n2")),
        "n0.body.n2.false_branch": ("false_branch", "n0.body", ("n0", "n0.body.n2"))}
    inner = vg.nodes["n0.body.n2"]
    assert inner.lines[0] == "cond" and inner.cluster == "n0.body" and inner.owners == ("n0",)
    assert vg.nodes["n0.body.n2.true_branch.n1"].lines[0] == "relu"
    binds = {(e.src, e.dst) for e in vg.edges if e.style == "bind"}
    assert {("n0.body.a0", "n0.body.n2.true_branch.a0"), ("n0.body.a1", "n0.body.n2.false_branch.a1"),
            ("n0.body.n2.true_branch.r", "n0.body.n2"), ("n0.body.r", "n0")} <= binds
    args = {n.lines[0]: n.info["role"] for n in vg.nodes.values() if n.cluster == "n0.body" and n.kind == "arg"}
    assert args == {"arg0": "body input 0 (carry)", "arg1": "body input 1 (scanned (one position per step))",
                    "captured=0:f32": "body input 2 (captured)", "captured_1=2:f32": "body input 3 (captured)"}


def test_while_loop_draws_its_cond_and_body_and_skips_unread_inputs(graphs):
    vg = build(graphs["while"])
    assert [c.label for c in body_clusters(vg).values()] == ["cond (while_cond)", "body (while_body)"]
    test = [n.lines[0] for n in vg.nodes.values() if n.cluster == "n0.cond"]
    assert test == ["arg0=0:i64", "captured=3:i64", "lt", "return"]  # its two unused inputs are left out
    assert vg.nodes["n0.cond.r"].info["gives"].startswith("the loop test of ")


def test_collapsing_modules_leaves_bodies_out(train_step):
    vg = build(train_step.graph, collapse_modules=True)
    assert not vg.clusters and not any(n.kind in ("arg", "result") or n.owners for n in vg.nodes.values())
    assert all(e.src in vg.nodes and e.dst in vg.nodes and e.style != "bind" for e in vg.edges)
    svg = gc.viz.to_svg(train_step, collapse_modules=True, layout="python")
    assert "scan_step" in svg and "cluster body" not in svg  # the scan's tooltip names its body
    ET.fromstring(svg.encode())


def test_layout_puts_bodies_between_operands_and_node(graphs, train_step):
    def inside(a, c):
        return c[0] <= a[0] and c[1] <= a[1] and a[0] + a[2] <= c[0] + c[2] and a[1] + a[3] <= c[1] + c[3]

    def overlap(a, b):
        return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]

    for graph in (*graphs.values(), train_step.graph):
        vg = build(graph)
        lay = layout(vg)
        boxes = list(lay.nodes.values())
        assert not any(overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
        for n in vg.nodes.values():
            c = n.cluster
            while c is not None:
                assert inside(lay.nodes[n.id], lay.clusters[c]), (n.id, c)
                c = vg.clusters[c].parent
        for c in body_clusters(vg).values():
            owner = c.info["owner"]
            assert lay.layers[f"{c.id}.r"] < lay.layers[owner]  # the node sits below its bodies
            siblings = [d for d in vg.clusters.values() if d.parent == c.parent and d.id != c.id]
            assert not any(overlap(lay.clusters[c.id], lay.clusters[d.id]) for d in siblings)
        for e in vg.edges:
            if e.style != "fold":
                assert lay.layers[e.src] < lay.layers[e.dst], e  # every edge runs down


# ---- DOT ----------------------------------------------------------------------------------------
def test_dot_has_a_cluster_per_body_labelled_with_its_attr(graphs):
    text = gc.viz.to_dot(graphs["nested"])
    nodes, edges = parse_dot(text)
    assert all(a in nodes and b in nodes for a, b in edges)
    for cid, label in (("n0.body", "body (scan_step)"), ("n0.body.n2.true_branch", "true_branch"),
                       ("n0.body.n2.false_branch", "false_branch")):
        assert f'subgraph "cluster_{cid}" {{\n' in text and f'id="{cid}"; label="{label}"' in text
    assert text.index('subgraph "cluster_n0.body.n2.true_branch"') > text.index('subgraph "cluster_n0.body"')
    assert {"n0.body.a0", "n0.body.n2.true_branch.n1", "n0.body.n2.false_branch.r"} <= nodes
    assert '"n0.body.r" -> "n0" [id=' in text and "style=dashed" in text
    assert 'class="fold"' not in text  # only the HTML page draws fold edges
    assert ("v0f", "n0") not in edges and ("v0f", "n0.body.a1") in edges
    cond_text = gc.viz.to_dot(graphs["cond"])
    assert 'label="true_branch"' in cond_text and 'label="false_branch"' in cond_text
    assert 'label="cond (while_cond)"' in gc.viz.to_dot(graphs["while"])


def test_real_graphviz_draws_the_bodies_or_is_clearly_absent(graphs):
    if shutil.which("dot") is None:
        with pytest.raises(gc.GraphcError, match="Graphviz"):
            gc.viz.to_svg(graphs["nested"], layout="dot")
        return
    root = ET.fromstring(gc.viz.to_svg(graphs["nested"], layout="dot").encode())
    ids = {g.get("id") for g in root.iter() if local(g.tag) == "g"}
    assert {"n0.body", "n0.body.n2.true_branch", "n0.body.n2.true_branch.n1", "n0.body.r"} <= ids
    page = gc.viz.to_html(graphs["nested"], layout="dot")
    data = page_data(page)
    root = ET.fromstring(page.encode())
    folds = [g for g in root.iter() if g.get("id") in data["folds"]]
    assert folds and all("fold" in g.get("class").split() for g in folds)


def test_without_graphviz_the_python_layout_draws_the_bodies(graphs, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert gc.viz.to_svg(graphs["nested"]) == gc.viz.to_svg(graphs["nested"], layout="python")
    assert "n0.body.n2.true_branch" in gc.viz.to_html(graphs["nested"])


# ---- SVG and HTML -------------------------------------------------------------------------------
def test_svg_draws_body_clusters_nodes_and_bind_edges(graphs):
    svg = gc.viz.to_svg(graphs["nested"], layout="python")
    root = ET.fromstring(svg.encode())
    vg = build(graphs["nested"])
    nodes = svg_nodes(root)
    assert set(nodes) == set(vg.nodes)
    texts = {nid: [t.text for t in g.iter() if local(t.tag) == "text"] for nid, g in nodes.items()}
    assert texts["n0.body.n2"][0] == "cond" and texts["n0.body.n2.true_branch.n1"] == ["relu"]
    assert texts["n0.body.r"] == ["return"] and "arg" in nodes["n0.body.a0"].get("class").split()
    clusters = {g.get("id"): g for g in root.iter() if "cluster" in (g.get("class") or "").split()}
    assert {"n0.body", "n0.body.n2.true_branch", "n0.body.n2.false_branch"} <= set(clusters)
    assert "body" in clusters["n0.body.n2.true_branch"].get("class").split()
    titles = {t.text for t in root.iter() if "cluster-title" in (t.get("class") or "")}
    assert {"body (scan_step)", "true_branch", "false_branch"} <= titles
    edges = [g for g in root.iter() if "edge" in (g.get("class") or "").split()]
    assert {e.get("class") for e in edges} == {"edge", "edge bind"}  # no fold edges in a static picture
    legend = " ".join(t.text or "" for t in next(g for g in root.iter() if g.get("id") == "legend").iter())
    assert "control-flow body" in legend and "body input" in legend and "body return" in legend
    assert 'class="toggle"' not in svg


def test_html_folds_bodies_away(graphs):
    page = gc.viz.to_html(graphs["nested"], layout="python")
    data = page_data(page)
    root = ET.fromstring(page.encode())
    assert data["controls"] == ["n0", "n0.body.n2"]
    assert data["owners"]["n0.body.n2.true_branch.n0"] == ["n0", "n0.body.n2"]
    assert data["owners"]["n0.body.n2.true_branch"] == ["n0", "n0.body.n2"]
    assert data["nodes"]["n0.body.n2.true_branch.n1"]["op"] == "relu"
    assert data["nodes"]["n0.body.n2"]["bodies"] == {"true_branch": "true_branch (2 ops)",
                                                     "false_branch": "false_branch (1 ops)"}
    edges = {e[0]: (e[1], e[2]) for e in data["edges"]}
    assert {edges[e] for e in data["folds"]} == {("v1f", "n0"), ("v0f", "n0"), ("n0.body.a0", "n0.body.n2"),
                                                 ("n0.body.a1", "n0.body.n2")}
    by_id = {g.get("id"): g for g in root.iter() if local(g.tag) == "g"}
    for e in data["folds"]:
        assert by_id[e].get("class") == "edge fold gc-hidden"  # hidden until their node is folded
    toggles = {g.get("id") for g in by_id.values() if any(t.get("class") == "toggle" for t in g)}
    assert toggles == {"n0", "n0.body.n2"}
    assert {"fold", "unfold"} <= {e.get("id") for e in root.iter() if local(e.tag) == "button"}
    assert "#graph .gc-hidden { display: none; }" in page and "fold its bodies" in page
    plain = gc.viz.to_html(gc.jit.trace(lambda x: (x * 2).relu(), X), layout="python")
    assert 'id="fold"' not in plain and page_data(plain)["controls"] == []


def test_a_saved_plan_with_a_scan_still_draws(train_step, tmp_path):
    train_step.save(tmp_path / "scan.graphc")
    for ext in ("html", "svg", "dot"):
        out = gc.viz.write_plan_file_viz(tmp_path / "scan.graphc", tmp_path / f"scan.{ext}", layout="python")
        text = out.read_text()
        for needed in ("scan_step", "scan_step.backward", "true_branch.vjp", "false_branch"):
            assert needed in text, (ext, needed)
    data = page_data((tmp_path / "scan.html").read_text())
    loaded = build(gc.load(tmp_path / "scan.graphc").graph)
    assert set(data["nodes"]) == set(loaded.nodes) == set(build(train_step.graph).nodes)
    scans = [nid for nid, d in data["nodes"].items() if d.get("op") == "scan"]
    assert len(scans) == 2 and set(scans) <= set(data["controls"])
    phases = {c.info["name"]: c.phase for c in body_clusters(loaded).values()}
    assert phases["scan_step"] == "forward" and phases["scan_step.backward"] == "backward"
    assert phases["true_branch.vjp"] == "backward"


def test_custom_op_bodies_stay_in_the_tooltip():
    class Softplus(gc.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return (1 + x.exp()).log()

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * x.sigmoid()

    vg = build(gc.jit.trace(lambda x: Softplus.apply(x), X))
    call = next(n for n in vg.nodes.values() if n.lines[0] == "custom_call")
    assert not vg.clusters and "body" in call.info and "bodies" not in call.info


# ---- a real browser -----------------------------------------------------------------------------
FOLD_PROBE = """<script>//<![CDATA[
window.errors = [];
window.addEventListener('error', function (e) { window.errors.push(String(e.message)); });
window.addEventListener('load', function () {
  var view = document.getElementById('view');
  function shown(id) { var el = document.getElementById(id); return getComputedStyle(el).display !== 'none'; }
  function click(id) {
    var g = document.getElementById(id), r = g.getBoundingClientRect();
    var o = {bubbles: true, button: 0, pointerId: 1, clientX: r.left + r.width / 2, clientY: r.top + r.height / 2};
    g.firstElementChild.dispatchEvent(new PointerEvent('pointerdown', o));
    view.dispatchEvent(new PointerEvent('pointerup', o));
  }
  var ids = WATCH, out = {};
  function snap(name) { out[name] = ids.map(shown); }
  snap('start');
  click('n0.body.n2'); snap('inner');
  click('n0'); snap('both');
  click('n0'); snap('outer_open');
  click('n0.body.n2'); snap('open');
  document.getElementById('fold').click(); snap('fold_all');
  document.getElementById('unfold').click(); snap('unfold_all');
  out.errors = window.errors;
  var pre = document.createElement('pre');
  pre.id = 'probe'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
//]]></script>"""


@pytest.mark.browser
@pytest.mark.parametrize("layout_name", ["python", "dot"])
def test_headless_chromium_folds_and_unfolds_bodies(graphs, layout_name, tmp_path):
    """Opt-in as tests/test_viz.py's browser test: clicking a control-flow node hides its
    bodies (and the bodies inside them), shows its operands' direct edges, and unfolds."""
    assert CHROMIUM is not None, "pytest -m browser needs chromium on PATH (Debian: apt-get install chromium)"
    if layout_name == "dot" and shutil.which("dot") is None:
        pytest.skip("Graphviz's dot is not installed")
    page = gc.viz.to_html(graphs["nested"], layout=layout_name)
    data = page_data(page)
    edges = {(e[1], e[2]): e[0] for e in data["edges"]}
    watch = ["n0.body.n2.true_branch", "n0.body.n2.true_branch.n1", "n0.body.n2", "n0.body",
             edges[("v0f", "n0")], edges[("n0.body.a0", "n0.body.n2")], "n0"]
    probe = tmp_path / "probe.html"
    probe.write_text(page.replace("<head>", "<head>" + FOLD_PROBE.replace("WATCH", json.dumps(watch)), 1))
    dom = _chromium("--dump-dom", probe.as_uri()).stdout.decode()
    got = json.loads(re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S).group(1).replace("&quot;", '"'))
    assert got.pop("errors") == []
    T, F = True, False
    assert got == {"start": [T, T, T, T, F, F, T], "inner": [F, F, T, T, F, T, T], "both": [F, F, F, F, T, F, T],
                   "outer_open": [F, F, T, T, F, T, T], "open": [T, T, T, T, F, F, T],
                   "fold_all": [F, F, F, F, T, F, T], "unfold_all": [T, T, T, T, F, F, T]}

