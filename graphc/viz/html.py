"""One self-contained, offline HTML page: the SVG inline, pan and zoom, hover details.

The page loads nothing: no external scripts, styles, fonts or images. It is well-formed
XML as well as HTML5 (scripts are wrapped in ``//<![CDATA[ ... //]]>``; the node data is a
``<script type="application/json">`` block whose ``<``, ``>`` and ``&`` are JSON ``\\u``
escapes), so ``xml.etree`` can parse it. The tooltip is built with ``textContent``: no
string from the graph is ever interpreted as HTML.

>>> import numpy as np, graphc as gc
>>> from graphc import nn
>>> from graphc.viz.model import build
>>> from graphc.viz.svg import render
>>> plan = gc.compile(nn.Sequential(nn.Linear(4, 8), nn.ReLU()).eval(),
...                   example_inputs=(np.zeros((2, 4), np.float32),))
>>> vg = build(plan.graph)
>>> page = page_html(vg, render(vg, inline=True))
>>> page.startswith("<!DOCTYPE html>") and "http" not in page
True
"""
from __future__ import annotations

import json

from .model import VizGraph
from .style import FONT, xml_text

_CSS = """
html, body { margin: 0; height: 100%; overflow: hidden; background: #f8fafc; color: #0f172a;
  font: 13px system-ui, -apple-system, Segoe UI, Roboto, sans-serif; }
#bar { position: absolute; top: 0; left: 0; right: 0; height: 38px; display: flex; align-items: center;
  gap: 10px; padding: 0 12px; background: #ffffff; border-bottom: 1px solid #cbd5e1; box-sizing: border-box; }
#bar b { font-size: 14px; }
#bar .hint { color: #64748b; margin-left: auto; }
#bar button { font: inherit; padding: 3px 10px; border: 1px solid #94a3b8; border-radius: 4px; background: #f1f5f9;
  cursor: pointer; white-space: nowrap; }
#bar input { font: inherit; padding: 3px 6px; border: 1px solid #94a3b8; border-radius: 4px; width: 200px; }
#view { position: absolute; top: 38px; left: 0; right: 0; bottom: 0; cursor: grab; touch-action: none; }
#view.dragging { cursor: grabbing; }
#graph { width: 100%; height: 100%; display: block; user-select: none; }
#graph g.node { cursor: pointer; }
#graph g.node.hit rect, #graph g.node.hit polygon, #graph g.node.hit path { stroke: #dc2626; stroke-width: 3px; }
#graph g.node.focus rect, #graph g.node.focus polygon, #graph g.node.focus path { stroke-width: 3px; }
#graph g.edge.focus path { stroke: #0f172a; stroke-width: 2.2px; stroke-opacity: 1; }
#graph .gc-hidden { display: none; }
#graph g.node.control { cursor: pointer; }
#graph text.toggle { pointer-events: none; }
#tip { position: fixed; z-index: 10; max-width: 560px; max-height: 70vh; overflow: hidden; pointer-events: none;
  background: #ffffff; border: 1px solid #94a3b8; border-radius: 6px; padding: 8px 10px;
  box-shadow: 0 4px 14px rgba(15, 23, 42, 0.18); font-size: 12px; }
#tip .t { font-weight: bold; font-family: FONT; margin-bottom: 4px; word-break: break-all; }
#tip table { border-collapse: collapse; }
#tip td { padding: 1px 8px 1px 0; vertical-align: top; font-family: FONT; word-break: break-all; }
#tip td.k { color: #64748b; font-family: inherit; white-space: nowrap; word-break: normal; }
""".replace("FONT", FONT)

_JS = r"""
(function () {
  var data = JSON.parse(document.getElementById('graphc-data').textContent);
  var view = document.getElementById('view'), svg = document.getElementById('graph');
  var tip = document.getElementById('tip');
  var nodes = svg.querySelectorAll('g.node');
  var k;
  for (k = 0; k < nodes.length; k++) {  // our tooltip replaces the native one
    var t = nodes[k].querySelector('title');
    if (t) t.parentNode.removeChild(t);
  }
  var b = svg.viewBox.baseVal, home = {x: b.x, y: b.y, w: b.width, h: b.height}, vb = null;
  function apply() { svg.setAttribute('viewBox', vb.x + ' ' + vb.y + ' ' + vb.w + ' ' + vb.h); }
  function fit() { vb = {x: home.x, y: home.y, w: home.w, h: home.h}; apply(); }
  function start() {  // fit; if that is too small to read, half size at the top, around the first op
    var cw = view.clientWidth || 1, ch = view.clientHeight || 1;
    var s = Math.max(0.5, Math.min(1, cw / home.w, ch / home.h));
    vb = {w: cw / s, h: ch / s};
    vb.x = home.x - (vb.w - home.w) / 2;
    vb.y = home.h * s > ch ? home.y : home.y - (vb.h - home.h) / 2;
    var first = svg.querySelector('g.node.op, g.node.group');
    if (home.w * s > cw && first) {
      var r = first.getBBox();
      vb.x = Math.max(home.x, Math.min(home.x + home.w - vb.w, r.x + r.width / 2 - vb.w / 2));
    }
    apply();
  }
  function point(evt, m) {
    var p = svg.createSVGPoint();
    p.x = evt.clientX; p.y = evt.clientY;
    return p.matrixTransform((m || svg.getScreenCTM()).inverse());
  }
  function zoom(f, evt) {
    var p = evt ? point(evt) : {x: vb.x + vb.w / 2, y: vb.y + vb.h / 2};
    vb = {x: p.x - (p.x - vb.x) * f, y: p.y - (p.y - vb.y) * f, w: vb.w * f, h: vb.h * f};
    apply();
  }
  view.addEventListener('wheel', function (evt) {
    evt.preventDefault();
    zoom(Math.exp(Math.max(-1, Math.min(1, evt.deltaY * (evt.deltaMode ? 0.05 : 0.0015)))), evt);
  }, {passive: false});
  // Control-flow bodies fold away: an element is hidden while any node holding it is folded;
  // a fold edge (an operand straight to its node) shows only while that node is folded.
  var owners = data.owners || {}, folds = {}, controls = {}, closed = {}, parts = {};
  (data.folds || []).forEach(function (id) { folds[id] = true; });
  (data.controls || []).forEach(function (id) { controls[id] = true; });
  Object.keys(owners).forEach(function (id) {
    var list = [], el = document.getElementById(id);
    if (el) list.push(el);
    var more = svg.querySelectorAll('[data-cluster="' + id + '"], [data-edge="' + id + '"]');
    for (var j = 0; j < more.length; j++) list.push(more[j]);
    parts[id] = list;
  });
  function isClosed(o) { return closed[o] === true; }
  function refresh() {
    Object.keys(parts).forEach(function (id) {
      var chain = owners[id];
      var hide = folds[id] ? !isClosed(chain[chain.length - 1]) || chain.slice(0, -1).some(isClosed)
                           : chain.some(isClosed);
      parts[id].forEach(function (el) { el.classList.toggle('gc-hidden', hide); });
    });
    Object.keys(controls).forEach(function (id) {
      var g = document.getElementById(id);
      if (!g) return;
      var t = g.querySelector('text.toggle');
      if (!t) {  // Graphviz's drawing: add the switch
        var r = g.getBBox();
        t = document.createElementNS(svg.namespaceURI, 'text');
        t.setAttribute('class', 'toggle'); t.setAttribute('text-anchor', 'middle');
        t.setAttribute('font-size', '11'); t.setAttribute('font-weight', 'bold');
        t.setAttribute('x', r.x + r.width - 7); t.setAttribute('y', r.y + 11);
        g.appendChild(t);
      }
      g.classList.add('control');
      g.classList.toggle('folded', isClosed(id));
      t.textContent = isClosed(id) ? '+' : '\u2212';
    });
  }
  function foldAll(state) {
    Object.keys(controls).forEach(function (id) { closed[id] = state; });
    refresh();
  }
  var foldButton = document.getElementById('fold'), unfoldButton = document.getElementById('unfold');
  if (foldButton) foldButton.addEventListener('click', function () { foldAll(true); });
  if (unfoldButton) unfoldButton.addEventListener('click', function () { foldAll(false); });
  refresh();

  var drag = null, press = null;
  view.addEventListener('pointerdown', function (evt) {
    if (evt.button !== 0) return;
    var hit = evt.target.closest ? evt.target.closest('g.node') : null;
    press = hit && controls[hit.id] ? {id: hit.id, x: evt.clientX, y: evt.clientY} : null;
    var m = svg.getScreenCTM();
    drag = {m: m, p: point(evt, m), x: vb.x, y: vb.y};
    try { view.setPointerCapture(evt.pointerId); } catch (e) { /* synthetic or finished pointer */ }
    view.classList.add('dragging');
  });
  view.addEventListener('pointermove', function (evt) {
    if (!drag) return;
    var p = point(evt, drag.m);
    vb.x = drag.x - (p.x - drag.p.x); vb.y = drag.y - (p.y - drag.p.y);
    apply();
  });
  function stop() { drag = null; press = null; view.classList.remove('dragging'); }
  view.addEventListener('pointerup', function (evt) {  // a click, not a drag, on a control-flow node
    if (press && Math.abs(evt.clientX - press.x) + Math.abs(evt.clientY - press.y) < 5) {
      closed[press.id] = !isClosed(press.id);
      refresh();
    }
    stop();
  });
  view.addEventListener('pointercancel', stop);
  view.addEventListener('dblclick', fit);
  document.getElementById('fit').addEventListener('click', fit);
  document.getElementById('zin').addEventListener('click', function () { zoom(0.8); });
  document.getElementById('zout').addEventListener('click', function () { zoom(1.25); });
  document.addEventListener('keydown', function (evt) {
    if (evt.target.tagName === 'INPUT') return;
    if (evt.key === '0' || evt.key === 'f') fit();
    else if (evt.key === '+' || evt.key === '=') zoom(0.8);
    else if (evt.key === '-') zoom(1.25);
  });

  function row(table, key, value) {
    if (value === undefined || value === null || value === '' || (value.length === 0)) return;
    var tr = document.createElement('tr'), a = document.createElement('td'), c = document.createElement('td');
    a.className = 'k'; a.textContent = key; c.textContent = String(value);
    tr.appendChild(a); tr.appendChild(c); table.appendChild(tr);
  }
  function pairs(list) {
    return list.map(function (p) { return p[0] + ': ' + p[1]; }).join('\n');
  }
  function show(id, evt) {
    var d = data.nodes[id];
    if (!d) return;
    tip.textContent = '';
    var title = document.createElement('div');
    title.className = 't'; title.textContent = d.title || id;
    tip.appendChild(title);
    var table = document.createElement('table');
    row(table, 'op', d.op); row(table, 'phase', d.phase);
    row(table, 'module', d.module ? d.module + (d.module_type ? ' (' + d.module_type + ')' : '') : '');
    row(table, 'source', d.source); row(table, 'fused', d.fused); row(table, 'grad of', d.grad_of);
    row(table, 'pass', d.pass); row(table, 'role', d.role); row(table, 'type', d.type);
    row(table, 'body', d.body); row(table, 'binds', d.binds); row(table, 'gives', d.gives);
    var bodies = d.bodies || {};
    row(table, 'bodies', Object.keys(bodies).map(function (b) { return b + ': ' + bodies[b]; }).join('\n'));
    if (controls[id]) row(table, 'click', closed[id] ? 'unfold its bodies' : 'fold its bodies away');
    var attrs = d.attrs || {};
    Object.keys(attrs).forEach(function (key) { row(table, 'attr ' + key, attrs[key]); });
    row(table, 'inputs', pairs(d.inputs || [])); row(table, 'outputs', pairs(d.outputs || []));
    var ops = d.ops || {};
    row(table, 'ops', Object.keys(ops).map(function (o) { return o + ' x' + ops[o]; }).join(', '));
    row(table, 'state', (d.state || []).join(', '));
    row(table, 'updates', (d.updates || []).join(', ')); row(table, 'returned as', (d.returns || []).join(', '));
    tip.appendChild(table);
    var trs = table.querySelectorAll('td');
    for (k = 0; k < trs.length; k++) trs[k].style.whiteSpace = 'pre-wrap';
    tip.hidden = false;
    move(evt);
  }
  function move(evt) {
    var w = tip.offsetWidth, h = tip.offsetHeight, x = evt.clientX + 16, y = evt.clientY + 16;
    if (x + w > window.innerWidth - 4) x = Math.max(4, evt.clientX - w - 16);
    if (y + h > window.innerHeight - 4) y = Math.max(4, window.innerHeight - h - 4);
    tip.style.left = x + 'px'; tip.style.top = y + 'px';
  }
  function focus(id, on) {
    var g = document.getElementById(id);
    if (g) g.classList.toggle('focus', on);
    data.edges.forEach(function (e) {
      if (e[1] === id || e[2] === id) {
        var el = document.getElementById(e[0]);
        if (el) el.classList.toggle('focus', on);
      }
    });
  }
  var current = null;
  svg.addEventListener('mouseover', function (evt) {
    var g = evt.target.closest ? evt.target.closest('g.node') : null;
    if (!g || drag) return;
    if (current && current !== g.id) focus(current, false);
    current = g.id; focus(current, true); show(current, evt);
  });
  svg.addEventListener('mousemove', function (evt) { if (!tip.hidden) move(evt); });
  svg.addEventListener('mouseout', function (evt) {
    var to = evt.relatedTarget && evt.relatedTarget.closest ? evt.relatedTarget.closest('g.node') : null;
    if (to && to.id === current) return;
    if (current) focus(current, false);
    current = null; tip.hidden = true;
  });

  var find = document.getElementById('find');
  find.addEventListener('keydown', function (evt) {
    if (evt.key !== 'Enter') return;
    var q = find.value.trim().toLowerCase(), first = null, count = 0;
    for (k = 0; k < nodes.length; k++) {
      var d = data.nodes[nodes[k].id] || {};
      var hit = q !== '' && JSON.stringify(d).toLowerCase().indexOf(q) >= 0;
      nodes[k].classList.toggle('hit', hit);
      if (hit) { count++; if (!first) first = nodes[k]; }
    }
    document.getElementById('found').textContent = q ? count + ' found' : '';
    if (first && (owners[first.id] || []).some(isClosed)) {  // inside folded bodies: unfold them
      owners[first.id].forEach(function (o) { closed[o] = false; });
      refresh();
    }
    if (first) {
      var r = first.getBBox();
      vb = {w: vb.w, h: vb.h, x: r.x + r.width / 2 - vb.w / 2, y: r.y + r.height / 2 - vb.h / 2};
      apply();
    }
  });
  window.addEventListener('resize', start);
  start();
})();
"""


def json_for_script(data) -> str:
    """JSON that is inert inside ``<script>`` in both HTML and XML parsing.

    >>> json_for_script({"a": "</script><b>&"})
    '{"a": "\\\\u003c/script\\\\u003e\\\\u003cb\\\\u003e\\\\u0026"}'
    """
    text = json.dumps(data, ensure_ascii=True, sort_keys=True)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def fold_data(vg: VizGraph) -> dict:
    """What the page needs to fold control-flow bodies away: ``owners`` (element id -> the
    control-flow nodes holding it, outermost first; for an edge, those of its inner end;
    for a fold edge, its node's and the node itself), ``folds`` (the fold edges) and
    ``controls`` (the nodes whose bodies are drawn).

    >>> import numpy as np, graphc as gc
    >>> from graphc.viz.model import build
    >>> g = gc.jit.trace(lambda x: gc.cond(x.sum() > 0, lambda a: a.relu(), lambda a: -a, (x,)),
    ...              np.ones((2, 3), np.float32))
    >>> d = fold_data(build(g))
    >>> d["controls"], d["owners"]["n2.true_branch"], [d["owners"][e] for e in d["folds"]]
    (['n2'], ['n2'], [['n2']])
    """
    owners: dict = {}
    for n in vg.nodes.values():
        if n.owners:
            owners[n.id] = list(n.owners)
    for c in vg.clusters.values():
        if c.owners:
            owners[c.id] = list(c.owners)
    folds = []
    for e in vg.edges:
        if e.style == "fold":
            folds.append(e.id)
            owners[e.id] = [*vg.nodes[e.dst].owners, e.dst]
        else:
            chain = max(vg.nodes[e.src].owners, vg.nodes[e.dst].owners, key=len)
            if chain:
                owners[e.id] = list(chain)
    order = {nid: k for k, nid in enumerate(vg.nodes)}
    controls = sorted({o for chain in owners.values() for o in chain}, key=order.__getitem__)
    return {"owners": owners, "folds": folds, "controls": controls}


def page_html(vg: VizGraph, svg_inline: str, title: str | None = None) -> str:
    """The page around an inline ``<svg id="graph">`` element."""
    data = {"name": vg.name, "nodes": {nid: dict(n.info, kind=n.kind) for nid, n in vg.nodes.items()},
            "edges": [[e.id, e.src, e.dst] for e in vg.edges], **fold_data(vg)}
    folding = bool(data["controls"])
    title = title or f"graphc: {vg.name}"
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8"/>',
        '<meta name="viewport" content="width=device-width, initial-scale=1"/>',
        f"<title>{xml_text(title)}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
        f'<div id="bar"><b>{xml_text(vg.name)}</b><span>{xml_text(vg.summary())}</span>'
        '<button id="fit" type="button" title="fit the whole graph (0)">fit</button>'
        '<button id="zin" type="button" title="zoom in (+)">+</button>'
        '<button id="zout" type="button" title="zoom out (-)">-</button>'
        '<input id="find" type="search" placeholder="find: op, value, module" title="press Enter"/>'
        '<span id="found"></span>'
        + ('<button id="fold" type="button" title="fold every control-flow body away">fold bodies</button>'
           '<button id="unfold" type="button" title="show every control-flow body">unfold bodies</button>'
           if folding else "") +
        '<span class="hint">wheel: zoom \u00b7 drag: pan \u00b7 hover: details \u00b7 double-click: fit'
        + (" \u00b7 click cond/scan/while_loop: fold its bodies" if folding else "") + '</span></div>',
        f'<div id="view">{svg_inline}</div>',
        '<div id="tip" hidden="hidden"></div>',
        f'<script type="application/json" id="graphc-data">{json_for_script(data)}</script>',
        f"<script>//<![CDATA[{_JS}//]]></script>",
        "</body>",
        "</html>",
    ]) + "\n"
