"""The HTML step viewer of a recording of several contexts: one self-contained page with a
context picker (pure; returns the page as a string).

Each context keeps its own graph, its replay with the iteration's events at the end of its log
(``get_gradients`` on each worker, the optimizer step, the reference), and side panel boxes with
the iteration. The page holds them all as JSON; a small script run before the viewer's own puts
the chosen context's data and sentences where the viewer reads them, and its boxes into the side
panel, so the viewer (``distviz.render.html.page``) works unchanged. The context is chosen in the
address (``page.html?ctx=3``, with ``#step=N`` as for one context); the picker reloads the page
with another. After the load ``document.body.dataset.context`` holds the context's number.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from distviz.judge.analysis import Analysis
from distviz.render.html.page import json_for_script, page, page_parts
from distviz.render.iterations import iteration_events
from distviz.trace.iteration import Iteration

__all__ = ["ContextPage", "to_html_contexts"]

_PICK = r"""
(function () {
  "use strict";
  var all = JSON.parse(document.getElementById("distviz-contexts").textContent);
  var m = /[?&]ctx=(\d+)/.exec(location.search);
  var k = Math.max(1, Math.min(all.length, m ? parseInt(m[1], 10) : 1));
  var c = all[k - 1];
  document.getElementById("extra").innerHTML = c.extra;
  document.getElementById("after").innerHTML = c.after;
  [["distviz-data", JSON.stringify(c.data)], ["distviz-texts", JSON.stringify(c.texts)]].forEach(function (p) {
    var el = document.createElement("script");
    el.type = "application/json"; el.id = p[0]; el.textContent = p[1];
    document.body.appendChild(el);
  });
  var pick = document.getElementById("context");
  pick.value = String(k);
  pick.onchange = function () { location.search = "?ctx=" + pick.value; };
  document.body.dataset.context = String(k);
})();
"""


@dataclass(frozen=True)
class ContextPage:
    """One context of the page: its label (``context 3 (trainer 3)``), its analysis (the
    trace, replay, verdict and timing, ``distviz.judge.analysis``) and its iteration."""

    label: str
    analysis: Analysis
    iteration: Iteration | None = None


def _iteration_box(it: Iteration | None) -> str:
    if it is None:
        return ""
    items = "".join(f"<li>{html.escape(ev.worker)} {html.escape(ev.action)}: "
                    f"{html.escape(ev.text)}</li>" for ev in iteration_events(it))
    loss = ", ".join(f"{v:.6g}" for v in it.loss) or "-"
    return (f"<h3>iteration: {html.escape(it.label)}</h3><p>loss {html.escape(loss)}</p>"
            f"<ul>{items}</ul>")


def _context_json(c: ContextPage, title: str) -> dict[str, Any]:
    p = page_parts(c.analysis, title)
    data = dict(p.data)
    texts = p.texts
    if c.iteration is not None:   # the iteration's events end the log: no count changes
        actions = list(data["actions"])
        ea, ew, en = list(data["ea"]), list(data["ew"]), list(data["en"])
        ep, em = list(data["ep"]), list(data["em"])
        last_pass = ep[-1] if ep else 0
        lines = [texts] if texts else []
        for ev in iteration_events(c.iteration):
            if ev.action not in actions:
                actions.append(ev.action)
            ea.append(actions.index(ev.action))
            ew.append(data["workers"].index(ev.worker) if ev.worker in data["workers"] else -1)
            en.append(-1)
            ep.append(last_pass)
            em.append(-1)
            lines.append(ev.text.replace("\n", " "))
        data.update({"actions": actions, "ea": ea, "ew": ew, "en": en, "ep": ep, "em": em})
        texts = "\n".join(lines)
    return {"label": c.label, "extra": _iteration_box(c.iteration) + p.extra, "after": p.after,
            "data": data, "texts": texts}


def to_html_contexts(contexts: Sequence[ContextPage], title: str) -> str:
    """The viewer of every context with a picker (see the module docstring). Names are escaped
    as in ``to_html``; the contexts' panels are HTML made here and in ``distviz.render.html.page``
    from escaped text."""
    items = [_context_json(c, title) for c in contexts]
    options = "".join(f'<option value="{i + 1}">{html.escape(c.label)}</option>'
                      for i, c in enumerate(contexts))
    picker = (f' <label>context <select id="context" aria-label="context">{options}</select>'
              "</label>")
    outcomes = sorted({str(c.analysis.replay.outcome or "?") for c in contexts})
    data_script = (f'<script type="application/json" id="distviz-contexts">'
                   f"{json_for_script(items)}</script><script>{_PICK}</script>")
    return page(title, f"{len(contexts)} contexts · outcome: {'/'.join(outcomes)}", picker, "",
                "", data_script)
