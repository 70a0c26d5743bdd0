"""What tests/pure/render/test_render_html.py and tests/e2e/test_render_html_browser.py share."""

from __future__ import annotations

from typing import Any

from builders.graphs import design_trace, judged, replay_of
from distviz.render.html.page import to_html


def _timed_page() -> tuple[str, Any, Any, Any]:
    """The design note with a real run and its timing analysis (critical path)."""
    from builders.perfetto import _real
    from distviz.analyses.timing import analyze
    tr = design_trace()
    tr.real = _real(tr)
    tr.real.update({"passes_run": 1, "pass_seconds": [140e-6], "pass_start_us": [0.0]})
    timing = analyze(tr)
    rep = replay_of(tr)
    return to_html(judged(tr, rep)), rep, timing, tr
