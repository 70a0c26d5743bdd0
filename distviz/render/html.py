"""One self-contained HTML file that steps through a replay on top of the graph picture.

The page needs no network (a Content-Security-Policy forbids it): the Graphviz SVG is inlined, the
replay is inlined as JSON in ``<script type="application/json" id="distviz-data">`` and about 150
lines of vanilla JavaScript recompute the state of any step from the events (compute_dependencies
sets counts, execute decrements them and pushes ready nodes). Without an SVG the page shows a list
of nodes per worker instead and works the same way.

Controls: first / previous / next / last buttons, a slider, ``n``/``→``/space next, ``p``/``←``
previous, Home/``g`` first, End/``G`` last. The step lives in ``location.hash`` (``#step=5``), so
a step can be linked. ``#keys=nnp`` replays key presses at load (for tests). After every update
``document.body.dataset`` holds ``step``, ``current`` (node id), ``currentSvg`` (element id),
``text`` (the event sentence), ``action`` and ``message`` (message label or empty).
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from distviz.render.dot import DEFAULT_NODE_BUDGET, build_dot, initial_deps, node_title
from distviz.replay.model import Agreement, Event, ReplayLike
from distviz.replay.timing import Timing
from distviz.trace import Trace

CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
       "img-src data:")

FIT_BELOW = 300  # pictures with at most this many nodes start scaled to the window

_PROLOG = re.compile(r"<\?xml[^>]*\?>|<!DOCTYPE[^>]*>|<!--.*?-->", re.S)
_XMLNS = re.compile(r'\s+xmlns(?::xlink)?="[^"]*"')


def json_for_script(obj: Any) -> str:
    """Return JSON text safe inside an HTML ``<script>`` element.

    ``<``, ``>`` and ``&`` become ``\\u003c``, ``\\u003e``, ``\\u0026`` and U+2028/U+2029 are
    escaped, so no string can close the element or start a comment (entities are not decoded
    inside ``<script>``, so ``html.escape`` would be wrong here).
    """
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), sort_keys=False)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def inline_svg(svg: str) -> str:
    """Return Graphviz SVG ready to inline: XML prolog, doctype, comments and the namespace
    attributes of the root element removed (HTML does not need them)."""
    svg = _PROLOG.sub("", svg).strip()
    start = svg.find("<svg")
    if start < 0:
        return ""
    end = svg.find(">", start)
    root = _XMLNS.sub("", svg[start:end])
    return svg[:start] + root + svg[end:]


def _event_json(ev: Event) -> dict[str, Any]:
    out: dict[str, Any] = {"step": ev.step, "pass": ev.pass_index, "action": ev.action,
                           "worker": ev.worker, "node": ev.node, "text": ev.text}
    d = ev.detail
    if ev.action == "compute_dependencies":
        out["deps"] = d.get("deps") or {}
    if d.get("decrements"):
        out["dec"] = [list(x) for x in d["decrements"]]
    if d.get("pushed"):
        out["pushed"] = list(d["pushed"])
    if ev.message is not None:
        out["msg"] = ev.message.msg_id
        out["label"] = ev.message.label
    return out


def viewer_data(trace: Trace, replay: ReplayLike, node_ids: Mapping[str, str] | None,
                message_edges: Mapping[int, str] | None,
                agreement: Agreement | None = None,
                timing: Timing | None = None) -> dict[str, Any]:
    """Return the JSON object the page's script reads (nodes, events, message edges, hang).

    ``nodes[id].deps`` is the node's initial dependency count in the first pass (``null``:
    not reached), the count the picture shows; the script takes each pass's counts from its
    ``compute_dependencies`` events (``events[k].deps``).
    """
    deps0 = initial_deps(trace, replay, 0)
    nodes: dict[str, dict[str, Any]] = {}
    for i, n in enumerate(trace.nodes):
        nodes[n.id] = {"el": (node_ids or {}).get(n.id, f"li{i}"), "worker": n.worker,
                       "title": node_title(n), "kind": n.kind, "deps": deps0.get(n.id)}
    return {
        "workers": list(trace.workers),
        "nodes": nodes,
        "messages": {str(k): v for k, v in (message_edges or {}).items()},
        "events": [_event_json(ev) for ev in replay.events],
        "outcome": replay.outcome,
        "hang": replay.hang.to_json() if replay.hang is not None else None,
        "error": replay.error.to_json() if replay.error is not None else None,
        "agreement": agreement.to_json() if agreement is not None else None,
        "critical": _critical(timing),
    }


def _critical(timing: Timing | None) -> dict[str, list[Any]]:
    """The real run's critical path: its node ids and message ids (all passes)."""
    nodes: list[str] = []
    messages: list[int] = []
    for p in timing.passes if timing is not None else ():
        nodes.extend(n for n in p.path.nodes if n not in nodes)
        messages.extend(m for m in p.path.message_ids if m not in messages)
    return {"nodes": nodes, "messages": messages}


def _list_view(trace: Trace) -> str:
    parts = ['<div id="listview">']
    by_worker: dict[str, list[str]] = {w: [] for w in trace.workers}
    for i, n in enumerate(trace.nodes):
        by_worker.setdefault(n.worker, []).append(
            f'<li id="li{i}" class="node">{html.escape(node_title(n))}'
            f' <small>{html.escape(n.id)}</small></li>')
    for w, items in by_worker.items():
        rank = trace.workers.index(w) if w in trace.workers else -1
        parts.append(f"<section><h3>{html.escape(w)} (rank {rank})</h3><ul>"
                     + "".join(items) + "</ul></section>")
    parts.append("</div>")
    return "".join(parts)


_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:0;display:flex;flex-direction:column;height:100vh}
header{padding:6px 10px;background:#f1f3f5;border-bottom:1px solid #ced4da;display:flex;gap:8px;
 align-items:center;flex-wrap:wrap}
header input[type=range]{flex:1;min-width:150px}
#text{padding:6px 10px;font-weight:600;border-bottom:1px solid #dee2e6;min-height:1.4em}
main{flex:1;display:flex;min-height:0}
#graph{flex:3;overflow:auto;padding:6px}
#graph.fit svg{max-width:100%;height:auto}
#side{flex:1;min-width:240px;max-width:420px;overflow:auto;border-left:1px solid #dee2e6;
 padding:6px 10px;font-size:12px}
#side h4{margin:8px 0 2px}
#side ul{margin:0;padding-left:16px}
#hang{color:#c92a2a}
.dv-executed polygon,.dv-executed path,.dv-executed ellipse{fill:#bdbdbd}
.dv-waiting polygon,.dv-waiting path,.dv-waiting ellipse{fill:#ffffff}
.dv-ready polygon,.dv-ready path,.dv-ready ellipse{fill:#fff176}
.dv-blocked polygon,.dv-blocked path,.dv-blocked ellipse{fill:#ff8a80;stroke:#c92a2a}
.dv-current polygon,.dv-current path,.dv-current ellipse{stroke:#e03131;stroke-width:4}
g.edge.dv-msg path{stroke:#e03131;stroke-width:4}
g.edge.dv-msg polygon{stroke:#e03131;fill:#e03131}
.dv-critical polygon,.dv-critical path,.dv-critical ellipse{stroke:#7048e8;stroke-width:3}
g.edge.dv-critical path{stroke:#7048e8;stroke-width:3}
g.edge.dv-critical polygon{stroke:#7048e8;fill:#7048e8}
li.dv-critical{border-left:4px solid #7048e8;padding-left:2px}
#time p{margin:2px 0}
li.dv-executed{color:#868e96}li.dv-ready{background:#fff176}li.dv-blocked{background:#ff8a80}
li.dv-current{outline:2px solid #e03131;font-weight:600}
"""

_JS = r"""
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("distviz-data").textContent);
  var E = D.events, N = D.nodes, last = E.length - 1, step = 0, touched = [];
  var slider = document.getElementById("slider");
  slider.max = String(Math.max(last, 0));
  function el(id) { return id ? document.getElementById(id) : null; }
  var critical = 0;     // the real run's critical path stays outlined at every step
  (D.critical.nodes || []).forEach(function (n) {
    var e = N[n] ? el(N[n].el) : null; if (e) { e.classList.add("dv-critical"); critical++; }
  });
  (D.critical.messages || []).forEach(function (m) {
    var e = el(D.messages[String(m)]); if (e) { e.classList.add("dv-critical"); critical++; }
  });
  document.body.dataset.critical = String(critical);
  function stateAt(k) {
    var deps = {}, init = {}, ready = {}, done = {}, blocked = {}, ev = null;
    for (var i = 0; i <= k && i <= last; i++) {
      ev = E[i];
      if (ev.action === "pass_start") { deps = {}; init = {}; ready = {}; done = {}; }
      else if (ev.action === "compute_dependencies") {
        for (var n in ev.deps) { init[n] = ev.deps[n]; if (ev.deps[n] > 0) deps[n] = ev.deps[n]; }
      } else if (ev.action === "call_start" && ev.node) { ready[ev.node] = 1; }
      else if ((ev.action === "execute" || ev.action === "accumulate") && ev.node) {
        delete ready[ev.node]; delete deps[ev.node]; done[ev.node] = 1;
      } else if (ev.action === "hang" && D.hang) {
        (D.hang.blocked_sends || []).forEach(function (b) { blocked[b.node] = 1; });
      }
      (ev.dec || []).forEach(function (d) {
        if (d[1] > 0) deps[d[0]] = d[1]; else delete deps[d[0]];
      });
      (ev.pushed || []).forEach(function (p) { ready[p] = 1; });
    }
    return {deps: deps, init: init, ready: ready, done: done, blocked: blocked, ev: ev};
  }
  function mark(nodeId, cls) {
    var info = N[nodeId], e = info ? el(info.el) : null;
    if (e) { e.classList.add(cls); touched.push([e, cls]); }
  }
  function line(parent, text) {
    var li = document.createElement("li"); li.textContent = text; parent.appendChild(li);
  }
  function show(k) {
    step = Math.max(0, Math.min(last, k | 0));
    touched.forEach(function (t) { t[0].classList.remove(t[1]); });
    touched = [];
    var s = stateAt(step), ev = s.ev, n;
    for (n in s.done) mark(n, "dv-executed");
    for (n in s.deps) mark(n, "dv-waiting");
    for (n in s.ready) mark(n, "dv-ready");
    for (n in s.blocked) mark(n, "dv-blocked");
    var cur = ev && ev.node ? ev.node : "";
    if (cur) mark(cur, "dv-current");
    var msgLabel = "";
    if (ev && ev.msg !== undefined && ev.msg !== null) {
      msgLabel = ev.label || "";
      var me = el(D.messages[String(ev.msg)]);
      if (me) { me.classList.add("dv-msg"); touched.push([me, "dv-msg"]); }
    }
    var text = ev ? ev.text || ev.action : "(no events)";
    document.getElementById("text").textContent = ev ? "step " + ev.step + "/" + last + ": " + text : text;
    slider.value = String(step);
    var side = document.getElementById("workers"); side.textContent = "";
    D.workers.forEach(function (w) {
      var h = document.createElement("h4"); h.textContent = w; side.appendChild(h);
      var ul = document.createElement("ul"), count = 0, nd = 0, nr = 0;
      for (var id in s.deps) if (N[id] && N[id].worker === w) {
        if (count++ < 40) line(ul, N[id].title + ": " + s.deps[id] + " of " + s.init[id] + " deps left");
      }
      for (id in s.ready) if (N[id] && N[id].worker === w) { if (nr++ < 40) line(ul, N[id].title + ": ready"); }
      for (id in s.done) if (N[id] && N[id].worker === w) nd++;
      if (count > 40 || nr > 40) line(ul, "(" + count + " waiting, " + nr + " ready in all)");
      if (!count && !nr) line(ul, "nothing pending");
      line(ul, nd + " executed");
      side.appendChild(ul);
    });
    var hb = document.getElementById("hang"); hb.textContent = "";
    if (D.hang && Object.keys(s.blocked).length) {
      var p = document.createElement("p"); p.textContent = D.hang.summary || "The replay hung.";
      hb.appendChild(p);
      var ul2 = document.createElement("ul");
      (D.hang.blocked_sends || []).forEach(function (b) {
        line(ul2, "blocked: " + b.node + (b.reason ? " (" + b.reason + ")" : ""));
      });
      (D.hang.fixes || []).forEach(function (f) { line(ul2, "fix: " + (typeof f === "string" ? f : JSON.stringify(f))); });
      hb.appendChild(ul2);
    }
    var b = document.body.dataset;
    b.step = String(step); b.current = cur; b.currentSvg = cur && N[cur] ? N[cur].el : "";
    b.text = text; b.action = ev ? ev.action : ""; b.message = msgLabel;
    b.pending = JSON.stringify(s.deps); b.initial = JSON.stringify(s.init);
    var want = "#step=" + step;
    if (location.hash !== want && !/^#keys=/.test(location.hash)) {
      try { history.replaceState(null, "", want); } catch (x) { /* file: URLs in some browsers */ }
    }
    var ce = cur && N[cur] ? el(N[cur].el) : null;
    if (ce && ce.scrollIntoView && !document.body.dataset.noscroll) ce.scrollIntoView({block: "nearest", inline: "nearest"});
  }
  function key(k) {
    if (k === "n" || k === "ArrowRight" || k === " ") show(step + 1);
    else if (k === "p" || k === "ArrowLeft") show(step - 1);
    else if (k === "Home" || k === "g") show(0);
    else if (k === "End" || k === "G") show(last);
    else return false;
    return true;
  }
  document.addEventListener("keydown", function (e) {
    if (e.target && e.target.tagName === "INPUT" && e.target.type !== "range") return;
    if (key(e.key)) e.preventDefault();
  });
  document.getElementById("first").onclick = function () { show(0); };
  document.getElementById("prev").onclick = function () { show(step - 1); };
  document.getElementById("next").onclick = function () { show(step + 1); };
  document.getElementById("last").onclick = function () { show(last); };
  document.getElementById("fit").onclick = function () { document.getElementById("graph").classList.toggle("fit"); };
  slider.oninput = function () { show(parseInt(slider.value, 10)); };
  function fromHash() {
    var h = location.hash, m = /^#step=(-?\d+)$/.exec(h);
    if (m) { show(parseInt(m[1], 10)); return; }
    m = /^#keys=([A-Za-z ]*)$/.exec(h);
    show(0);
    if (m) m[1].split("").forEach(function (c) {
      document.dispatchEvent(new KeyboardEvent("keydown", {key: c, bubbles: true}));
    });
  }
  window.addEventListener("hashchange", fromHash);
  fromHash();
})();
"""


@dataclass(frozen=True)
class PageParts:
    """What one context's viewer is made of: the picture (or the list view) and whether it
    starts fitted, the script's data, the side panel's boxes, the title and the outcome."""

    body: str
    fit: bool
    data: dict[str, Any]
    time_box: str
    agree: str
    name: str
    outcome: str


def page_parts(trace: Trace, replay: ReplayLike, svg: str | None = None,
               agreement: Agreement | None = None, title: str | None = None,
               full: bool = False, node_budget: int = DEFAULT_NODE_BUDGET,
               timing: Timing | None = None) -> PageParts:
    """The parts of ``to_html``'s page for one trace (the same arguments)."""
    node_ids: dict[str, str] | None = None
    message_edges: dict[int, str] | None = None
    fit = False
    if svg is not None:
        g = build_dot(trace, full=full, node_budget=node_budget)
        node_ids, message_edges = g.node_ids, g.message_edges
        body = inline_svg(svg)
        fit = g.drawn_nodes <= FIT_BELOW
    else:
        body = _list_view(trace)
    data = viewer_data(trace, replay, node_ids, message_edges, agreement, timing)
    name = title or (str(trace.scenario.get("name")) if trace.scenario and trace.scenario.get("name")
                     else "distributed backward")
    agree = time_box = ""
    if agreement is not None:
        marks = {True: "yes", False: "NO", None: "not compared"}
        rows = "".join(f"<li>{html.escape(k)}: {marks[agreement.check(k)]}</li>"
                       for k in Agreement.CHECKS)
        text = html.escape(agreement.text)
        agree = f"<h4>replay vs real run</h4><p>{text}</p><ul>{rows}</ul>"
    if timing is not None and timing.passes:
        lines = "".join(f"<p>{html.escape(x)}</p>" for x in timing.summary())
        time_box = (f'<div id="time"><h4>time (real run; the critical path is outlined in '
                    f"violet)</h4>{lines}</div>")
    return PageParts(body=body, fit=fit, data=data, time_box=time_box, agree=agree, name=name,
                     outcome=str(replay.outcome or "?"))


def page(name: str, outcome: str, header_extra: str, graph: str, fit: bool, side: str,
         data_script: str) -> str:
    """The viewer's page around its parts (``to_html``; ``html_contexts`` adds a context
    picker to the header and fills the graph and the data from the chosen context)."""
    fit_attr = ' class="fit"' if fit else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>distviz: {html.escape(name)}</title>
<style>{_CSS}</style></head>
<body>
<header><b>distviz</b> <span>{html.escape(name)} · outcome: {html.escape(outcome)}</span>{header_extra}
<button id="first" title="first (Home)">« first</button><button id="prev" title="previous (p, ←)">‹ prev</button>
<input id="slider" type="range" min="0" max="0" value="0" aria-label="step">
<button id="next" title="next (n, →)">next ›</button><button id="last" title="last (End)">last »</button>
<button id="fit" title="fit the picture to the window">fit</button></header>
<div id="text"></div>
<main><div id="graph"{fit_attr}>{graph}</div>
<aside id="side">{side}</aside></main>
{data_script}
<script>{_JS}</script>
</body></html>
"""


def to_html(trace: Trace, replay: ReplayLike, svg: str | None = None,
            agreement: Agreement | None = None, title: str | None = None,
            full: bool = False, node_budget: int = DEFAULT_NODE_BUDGET,
            timing: Timing | None = None) -> str:
    """Return the step viewer as one self-contained HTML page (see the module docstring).

    ``svg`` is Graphviz output of ``distviz.render.dot.build_dot(trace)`` (the same trace, no
    step, and the same ``full``/``node_budget`` given here, so element ids match); ``None``
    gives a list view.
    ``agreement`` (replay vs real run) is shown in the side panel, and so is ``timing`` (where
    the real backward spent its time): its critical path stays outlined in violet on the
    picture (nodes and message edges) at every step. Every name from the trace is
    escaped: HTML text with ``html.escape``, the JSON with ``json_for_script``, and the script
    inserts names with ``textContent`` only.
    """
    p = page_parts(trace, replay, svg, agreement, title, full, node_budget, timing)
    side = (f'<div id="hang"></div>{p.time_box}<h4>pending per worker</h4>'
            f'<div id="workers"></div>{p.agree}')
    data_script = (f'<script type="application/json" id="distviz-data">'
                   f'{json_for_script(p.data)}</script>')
    return page(p.name, p.outcome, "", p.body, p.fit, side, data_script)
