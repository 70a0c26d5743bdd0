"""Traces and recordings in Jupyter: ``_repr_html_`` (the step viewer inline), ``_repr_svg_``,
and two viewers on one page driven in a real headless Chromium."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
import replay_fixtures as fx
from builders.graphs import HOSTILE, design_trace

import distviz
from distviz.judge.analysis import analysis
from distviz.render import graphviz_backend
from distviz.render.html.page import to_html
from distviz.render.notebook import CELL_HEIGHT_PX, cell_title, trace_html
from distviz.trace.contexts_file import Recording

TRACES = Path(__file__).resolve().parents[2] / "traces"
_SRCDOC = re.compile(r'<iframe srcdoc="([^"]*)"')


def _srcdoc(markup: str) -> str:
    m = _SRCDOC.search(markup)
    assert m, markup[:200]
    return html.unescape(m.group(1))


def test_repr_html_is_the_export_page_in_a_frame_sized_for_a_cell() -> None:
    trace = distviz.load(TRACES / "pipeline.json")
    markup = trace._repr_html_()
    assert markup.startswith("<iframe ") and markup.endswith("</iframe>")
    assert f"height: {CELL_HEIGHT_PX}px" in markup and "width: 100%" in markup
    page = to_html(analysis(trace), title=cell_title(trace))
    assert _srcdoc(markup) == page   # the very page export -f html writes
    assert "pipeline (context " in cell_title(trace)


def test_the_inline_page_is_self_contained_and_keeps_hostile_names_in_the_attribute() -> None:
    markup = design_trace(t4=HOSTILE)._repr_html_()
    assert markup.count('"') == len(re.findall(r'="', markup)) * 2   # no quote ends srcdoc early
    inner = _srcdoc(markup)
    assert "default-src 'none'" in inner          # the page's own policy: no network
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", inner)
    assert "<script>&" not in inner and HOSTILE not in inner.replace("\\u003c", "<")


def test_a_trace_without_a_pass_shows_its_graph() -> None:
    trace = fx.design_note()
    trace.passes = []
    assert "distviz-data" in _srcdoc(trace_html(trace))


@pytest.mark.skipif(not graphviz_backend.available_backends(), reason="no Graphviz backend")
def test_repr_svg_is_the_picture_export_draws() -> None:
    svg = fx.design_note()._repr_svg_()
    assert svg is not None and "<svg" in svg and "</svg>" in svg
    assert "AccumulateGrad" in svg


def test_a_recording_shows_a_table_of_its_contexts_and_one_viewer() -> None:
    one, two = fx.design_note(), fx.design_note()
    two.context_id = 2
    rec = Recording(contexts=[one, two], iterations=[None, None], workers=list(one.workers))
    markup = rec._repr_html_()
    assert markup.count("<tr>") == 3 and markup.count("<iframe ") == 1
    assert "recording.pick(N)" in markup
    assert Recording.single(one)._repr_html_().startswith("<iframe ")


# -- headless Chromium ---------------------------------------------------------------------
