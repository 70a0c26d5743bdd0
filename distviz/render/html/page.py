"""One self-contained HTML file that steps through a replay on the graph, at any size.

The page needs no network (a Content-Security-Policy forbids it) and no library: the graph and
the replay are inlined as JSON (``distviz.render.html.data``: flat integer arrays, so 100,000
nodes load in a second), the event sentences as one more JSON string, and a hand-written script
(``viewer/*.js``, modules concatenated in the order of ``VIEWER_MODULES``) lays the graph out in lanes (one per worker, the
initiator first) and rows (the gradient flow), and draws it on a canvas with culling and levels
of detail. Measured in headless Chromium (``bench/bench_viewer.py``): a 100,000-node trace paints
in about a second and steps in a few milliseconds.

What the page offers:

* views: the worker summary (``s``), one box per RPC call (``c``), every node (``f``), one
  worker or one RPC call (the view menu), the neighbourhood of a node (``focus here``); expand
  or collapse each worker (side panel) and each RPC call (click a box; ``collapse its RPC
  call``). It opens on the view ``export`` was given, else every node up to 3,000 nodes and the
  worker summary above, and says which view it shows (bottom left);
* pan (drag), zoom (wheel, ``+``/``-``), fit (``0``), back to the step's node (``.``);
* search (``/``) by node id, op name or variable; Enter goes to the next match;
* the step slider and keys: ``n``/``→``/space next, ``p``/``←`` previous, ``g``/Home first,
  ``G``/End last; the step lives in ``location.hash`` (``#step=5``; ``#step=-1`` the last
  step), ``#search=loss`` searches at load and ``#keys=nnp`` replays key presses from the first
  step (for tests). A replay that hangs or fails opens on its last step, where the outcome is
  drawn and explained; one that completes on its first;
* a legend (``l``), help with every key and the notation (``?``), the pending nodes per worker
  (named as the terminal names them, ``MulBackward0#1~1``, each with its message; read from the
  same replay state the graph is drawn from), the hang's explanation, the agreement with the
  real run in words.
"""

from __future__ import annotations

import gc
import html
import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from distviz.analyses.timing import Timing
from distviz.judge.analysis import Analysis
from distviz.judge.findings import Agreement
from distviz.render.html.data import agreement_words, event_texts, viewer_data
from distviz.views.view import ViewSpec
from distviz.words import NOTATION

__all__ = ["CSP", "VIEWER_MODULES", "PageParts", "json_for_script", "page", "page_parts", "to_html",
           "viewer_script"]

CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
       "img-src data:")


def json_for_script(obj: Any) -> str:
    """Return JSON text safe inside an HTML ``<script>`` element.

    ``<``, ``>`` and ``&`` become ``\\u003c``, ``\\u003e``, ``\\u0026`` and U+2028/U+2029 are
    escaped, so no string can close the element or start a comment (entities are not decoded
    inside ``<script>``, so ``html.escape`` would be wrong here).
    """
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), sort_keys=False)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _asset(name: str) -> str:
    return (resources.files("distviz.render.html") / "viewer" / name).read_text(encoding="utf-8")


#: The viewer's script modules, in the order they run: the page's data, the replay state, the
#: views, the layout, the drawing, the side panel, then stepping, search, input and the start.
VIEWER_MODULES = ("data.js", "state.js", "views.js", "layout.js", "draw.js", "panel.js", "main.js")


def viewer_script() -> str:
    """Return the viewer's script: ``VIEWER_MODULES`` concatenated inside one function, so the
    modules share one scope (as ``tsc --checkJs`` checks them) and nothing leaks into the
    page's globals but ``window.distviz``."""
    body = "\n".join(_asset(name) for name in VIEWER_MODULES)
    return f'(function () {{\n"use strict";\n{body}}})();\n'


_LEGEND = """<div id="legend" class="overlay"><b>legend</b> (l)<table>
<tr><td><span class="sw" style="background:#fff"></span></td><td>op: <i>Name #sequence_nr</i></td></tr>
<tr><td><span class="sw" style="background:#ffd8a8;border-color:#d9480f"></span></td><td>SendRpcBackward (msg <i>sender:n</i>)</td></tr>
<tr><td><span class="sw" style="background:#b2f2bb;border-color:#2b8a3e"></span></td><td>RecvRpcBackward (msg <i>sender:n</i>)</td></tr>
<tr><td><span class="sw" style="background:#add8e6;border-color:#1864ab"></span></td><td>leaf (AccumulateGrad): its variable</td></tr>
<tr><td><span class="sw" style="background:#f1f3f5;border-width:2px"></span></td><td>collapsed: an RPC call's nodes on a worker, or a whole worker (click to expand)</td></tr>
<tr><td><span class="sw" style="background:#bdbdbd"></span></td><td>executed in this pass</td></tr>
<tr><td><span class="sw" style="background:#fff176"></span></td><td>ready (queued)</td></tr>
<tr><td><span class="sw" style="background:#fff"></span></td><td>waiting: <i>deps D (R left)</i></td></tr>
<tr><td><span class="sw" style="background:#ff8a80;border-color:#c92a2a"></span></td><td>blocked send: its gradient never comes</td></tr>
<tr><td><span class="sw" style="background:#e5dbff;border-color:#7048e8"></span></td><td>never runs: the replay hangs first</td></tr>
<tr><td><span class="sw" style="border:3px solid #e03131"></span></td><td>the node of the current step</td></tr>
<tr><td><span class="sw" style="border:3px solid #1c7ed6"></span></td><td>a search match</td></tr>
<tr><td style="color:#868e96">&#8212;&#8250;</td><td>gradient flow: node &#8594; its next function</td></tr>
<tr><td style="color:#c2255c">- - &#8250;</td><td>gradient message: recv &#8594; the send it feeds (red: this step's)</td></tr>
</table></div>"""

_HELP = """<div id="help" class="overlay"><b>help</b> (? or Esc to close)<table>
<tr><td><kbd>n</kbd> <kbd>&#8594;</kbd> <kbd>space</kbd></td><td>next step</td></tr>
<tr><td><kbd>p</kbd> <kbd>&#8592;</kbd></td><td>previous step</td></tr>
<tr><td><kbd>g</kbd> <kbd>G</kbd></td><td>first / last step (also Home / End)</td></tr>
<tr><td><kbd>s</kbd> <kbd>c</kbd> <kbd>f</kbd></td><td>the worker summary / one box per RPC call / every node</td></tr>
<tr><td><kbd>/</kbd></td><td>search a node id, op name or variable; Enter: next match</td></tr>
<tr><td><kbd>+</kbd> <kbd>-</kbd> <kbd>0</kbd> <kbd>.</kbd></td><td>zoom in / out / fit / back to the step's node; drag to pan, wheel to zoom</td></tr>
<tr><td><kbd>l</kbd> <kbd>?</kbd></td><td>legend / this help</td></tr>
<tr><td>click</td><td>a node: its details, with <i>focus here</i>, <i>its worker only</i>, <i>collapse its RPC call</i>; a collapsed box: expand it</td></tr>
</table><b>notation</b><table>@@NOTATION@@</table></div>"""


def _help() -> str:
    rows = "".join(f"<tr><td><i>{html.escape(shown)}</i></td><td>{html.escape(meaning)}</td></tr>"
                   for shown, meaning in NOTATION)
    return _HELP.replace("@@NOTATION@@", rows)


def _agreement_html(agreement: Agreement | None) -> str:
    if agreement is None:
        return ""
    rows = "".join(f"<li>{html.escape(line)}</li>" for line in agreement_words(agreement))
    return (f"<h3>replay and the real run</h3><p>{html.escape(agreement.text)}</p>"
            f"<ul>{rows}</ul>")


def _time_box(timing: Timing | None) -> str:
    if timing is None or not timing.passes:
        return ""
    lines = "".join(f"<p>{html.escape(x)}</p>" for x in timing.summary())
    return (f'<div id="time"><h3>time (real run; its critical path is outlined in violet)</h3>'
            f"{lines}</div>")


@dataclass(frozen=True)
class PageParts:
    """What one trace's viewer is made of: the script's data, the event sentences, the side
    panel's boxes above (``extra``: the real run's time) and below (``after``: the agreement,
    how the replay ends) the fixed ones, the title, the outcome and the number of nodes."""

    data: dict[str, Any]
    texts: str
    extra: str
    after: str
    name: str
    outcome: str
    nodes: int


def page_parts(found: Analysis, title: str | None = None, spec: ViewSpec | None = None
               ) -> PageParts:
    """The parts of ``to_html``'s page for one trace (the same arguments)."""
    data = viewer_data(found, spec)
    after = (_agreement_html(found.agreement) + "<h3>how the replay ends</h3>"
             f"<p>{html.escape(str(data['summaryText']))}</p>")
    return PageParts(data=data, texts=event_texts(found.replay), extra=_time_box(found.timing),
                     after=after, name=title or str(data["title"]),
                     outcome=str(found.replay.outcome or "?"), nodes=len(found.trace.nodes))


def page(name: str, what: str, header_extra: str, extra: str, after: str,
         data_script: str) -> str:
    """The viewer's page around its parts: ``what`` follows the name in the header (``15,434
    nodes · outcome: completed``); ``data_script`` holds the data (``to_html``: the
    ``distviz-data`` and ``distviz-texts`` elements; ``html_contexts`` a context picker that
    makes them from the chosen context)."""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>distviz: {html.escape(name)}</title>
<style>{_asset("viewer.css")}</style></head>
<body>
<header><b>distviz</b> <span>{html.escape(name)} · {html.escape(what)}</span>{header_extra}
<button id="first" title="first step (g, Home)">« first</button><button id="prev" title="previous step (p, ←)">‹ prev</button>
<input id="slider" type="range" min="0" max="0" value="0" aria-label="step">
<button id="next" title="next step (n, →)">next ›</button><button id="last" title="last step (G, End)">last »</button>
<select id="viewsel" aria-label="view" title="what to show (s, c, f)"><option value="summary">worker summary</option><option value="calls">one box per RPC call</option><option value="full">every node</option><option value="call">one RPC call…</option></select>
<input id="search" type="search" placeholder="search: node id, op or variable (/)" aria-label="search"><span id="hits"></span>
<button id="fit" title="fit (0)">fit</button><button id="legendbtn" title="legend (l)">legend</button><button id="helpbtn" title="help (?)">?</button></header>
<div id="text"></div>
<main><div id="graph"><canvas id="canvas"></canvas><div id="viewnote"></div>{_LEGEND}{_help()}</div>
<aside id="side"><div id="hang"></div><div id="extra">{extra}</div><h3>selected node</h3><div id="details">click a node</div>
<h3>pending per worker</h3><div id="workers"></div><div id="after">{after}</div></aside></main>
{data_script}
<script>{viewer_script()}</script>
</body></html>
"""


def to_html(found: Analysis, title: str | None = None, spec: ViewSpec | None = None) -> str:
    """Return the step viewer of one run's analysis (``distviz.judge.analysis``: the trace,
    its replay, the verdict's agreement and the timing) as one self-contained HTML page (see
    the module docstring).

    ``spec`` is the view the page opens on. With the timing (where the real backward spent its
    time) the side panel shows its summary and its critical path stays outlined in violet
    (nodes and message edges) at every step. Every name from the trace is escaped: HTML text
    with ``html.escape``, the JSON with ``json_for_script``, and the script inserts names with
    ``textContent`` or draws them on the canvas. Raises ``UsageError`` when ``spec`` names a
    worker, RPC call or node the trace does not have.
    """
    # millions of small acyclic objects: the cyclic collector would rescan them again and again
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        p = page_parts(found, title, spec)
        data_script = (f'<script type="application/json" id="distviz-data">'
                       f"{json_for_script(p.data)}</script>\n"
                       f'<script type="application/json" id="distviz-texts">'
                       f"{json_for_script(p.texts)}</script>")
        return page(p.name, f"{p.nodes:,} nodes · outcome: {p.outcome}", "", p.extra, p.after,
                    data_script)
    finally:
        if was_enabled:
            gc.enable()
