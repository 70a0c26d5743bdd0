"""The HTML step viewer of a recording of several contexts: one self-contained page with a
context picker (pure; returns the page as a string).

Each context keeps its own picture (or list view), its replay with the iteration's events at
the end of its log (``get_gradients`` on each worker, the optimizer step, the reference), and a
side panel with the iteration. The page holds them all as JSON; a small script run before the
viewer's own puts the chosen context's picture into the page and its data where the viewer
reads it, so the viewer (``distviz.render.html``) works unchanged. The context is chosen in the
address (``page.html?ctx=3``, with ``#step=N`` as for one context); the picker reloads the page
with another. After the load ``document.body.dataset.context`` holds the context's number.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from distviz.render.html import json_for_script, page, page_parts
from distviz.render.training import iteration_events
from distviz.replay.model import Agreement, ReplayLike
from distviz.replay.timing import Timing
from distviz.trace import Trace
from distviz.training import Iteration

__all__ = ["ContextPage", "to_html_contexts"]

_PICK = r"""
(function () {
  "use strict";
  var all = JSON.parse(document.getElementById("distviz-contexts").textContent);
  var m = /[?&]ctx=(\d+)/.exec(location.search);
  var k = Math.max(1, Math.min(all.length, m ? parseInt(m[1], 10) : 1));
  var c = all[k - 1], graph = document.getElementById("graph");
  graph.innerHTML = c.body;
  if (c.fit) graph.classList.add("fit");
  document.getElementById("iteration").innerHTML = c.side;
  var data = document.createElement("script");
  data.type = "application/json"; data.id = "distviz-data";
  data.textContent = JSON.stringify(c.data);
  document.body.appendChild(data);
  var pick = document.getElementById("context");
  pick.value = String(k);
  pick.onchange = function () { location.search = "?ctx=" + pick.value; };
  document.body.dataset.context = String(k);
})();
"""


@dataclass(frozen=True)
class ContextPage:
    """One context of the page: its label (``context 3 (trainer 3)``), trace, replay, picture
    (Graphviz SVG of ``build_dot(trace)``, or ``None`` for the list view), agreement, timing
    and iteration."""

    label: str
    trace: Trace
    replay: ReplayLike
    svg: str | None = None
    agreement: Agreement | None = None
    timing: Timing | None = None
    iteration: Iteration | None = None


def _iteration_box(it: Iteration | None) -> str:
    if it is None:
        return ""
    items = "".join(f"<li>{html.escape(ev.worker)} {html.escape(ev.action)}: "
                    f"{html.escape(ev.text)}</li>" for ev in iteration_events(it))
    loss = ", ".join(f"{v:.6g}" for v in it.loss) or "-"
    return (f"<h4>iteration: {html.escape(it.label)}</h4><p>loss {html.escape(loss)}</p>"
            f"<ul>{items}</ul>")


def _context_json(c: ContextPage, title: str) -> dict[str, Any]:
    p = page_parts(c.trace, c.replay, c.svg, c.agreement, title, timing=c.timing)
    data = dict(p.data)
    events = list(data["events"])
    last = events[-1] if events else {"step": -1, "pass": 0}
    if c.iteration is not None:
        for k, ev in enumerate(iteration_events(c.iteration)):
            events.append({"step": int(last["step"]) + 1 + k, "pass": last["pass"],
                           "action": ev.action, "worker": ev.worker, "node": None,
                           "text": ev.text})
    data["events"] = events
    side = (f'<div id="hang"></div>{_iteration_box(c.iteration)}{p.time_box}'
            f'<h4>pending per worker</h4><div id="workers"></div>{p.agree}')
    return {"label": c.label, "body": p.body, "fit": p.fit, "side": side, "data": data}


def to_html_contexts(contexts: Sequence[ContextPage], title: str) -> str:
    """The viewer of every context with a picker (see the module docstring). Names are escaped
    as in ``to_html``; the contexts' pictures and panels are HTML made here and in
    ``distviz.render.html`` from escaped text."""
    items = [_context_json(c, title) for c in contexts]
    options = "".join(f'<option value="{i + 1}">{html.escape(c.label)}</option>'
                      for i, c in enumerate(contexts))
    picker = (f' <label>context <select id="context" aria-label="context">{options}</select>'
              "</label>")
    outcomes = sorted({str(c.replay.outcome or "?") for c in contexts})
    data_script = (f'<script type="application/json" id="distviz-contexts">'
                   f"{json_for_script(items)}</script><script>{_PICK}</script>")
    return page(title, "/".join(outcomes), picker, "", False, '<div id="iteration"></div>',
                data_script)
