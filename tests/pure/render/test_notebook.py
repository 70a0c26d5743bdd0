"""Traces and recordings in Jupyter: ``_repr_html_`` (the step viewer inline), ``_repr_svg_``,
and two viewers on one page driven in a real headless Chromium."""

from __future__ import annotations

import html
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
import replay_fixtures as fx
from builders.graphs import HOSTILE, design_trace
from chromium import Chromium, browser_fixture
from guards import WAIT_GUARD_S

import distviz
from distviz.render import graphviz_backend
from distviz.render.html import to_html
from distviz.render.notebook import CELL_HEIGHT_PX, cell_title, trace_html
from distviz.replay import replay
from distviz.replay.analysis import analysis
from distviz.trace.recording import Recording

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

browser = browser_fixture(1200, 1400)


def _frame_sessions(browser: Chromium, n: int) -> list[str]:
    """The DevTools sessions of the page's ``n`` viewer frames. Sandboxed frames run in
    processes of their own: each is a target, attached to as it starts and held until its
    uncaught exceptions are reported (``browser.errors()``)."""
    end = time.monotonic() + 30
    while True:
        attached = [m["params"] for m in browser.events
                    if m.get("method") == "Target.attachedToTarget"
                    and m["params"]["targetInfo"]["type"] == "iframe"]
        if len(attached) >= n:
            break
        assert time.monotonic() < end, f"{len(attached)} of {n} frames started"
        browser.eval("1")   # reads the events that came meanwhile
        time.sleep(0.05)
    sessions = [a["sessionId"] for a in attached[-n:]]
    page_session = browser.session
    try:
        for browser.session in sessions:
            browser.call("Runtime.enable", session=True)
            browser.call("Runtime.runIfWaitingForDebugger", session=True)
    finally:
        browser.session = page_session
    return sessions


def _in_frame(browser: Chromium, session: str, expr: str) -> Any:
    """Evaluate ``expr`` in one viewer frame's page (the notebook page cannot reach into it)."""
    page_session, browser.session = browser.session, session
    try:
        return browser.eval(expr)
    finally:
        browser.session = page_session


def _wait_in_frame(browser: Chromium, session: str, expr: str, timeout: float = WAIT_GUARD_S) -> Any:
    end = time.monotonic() + timeout
    while not (value := _in_frame(browser, session, expr)):
        assert time.monotonic() < end, f"{expr} stayed false"
        time.sleep(0.05)
    return value


@pytest.mark.browser
def test_two_viewers_on_one_page_each_step_their_own_replay(browser: Chromium,
                                                            tmp_path: Path) -> None:
    design, hang = fx.design_note(), fx.unused_rpc_result()
    hang.context_id = 7
    page = tmp_path / "notebook.html"
    page.write_text("<!DOCTYPE html><html><body><h1>two traces</h1>"
                    f"<div>{design._repr_html_()}</div><div>{hang._repr_html_()}</div>"
                    "</body></html>", encoding="utf-8")
    browser.call("Target.setAutoAttach", session=True, autoAttach=True,
                 waitForDebuggerOnStart=True, flatten=True)
    browser.goto(page.as_uri())
    frames = _frame_sessions(browser, 2)
    for f in frames:
        _wait_in_frame(browser, f, "document.body.dataset.paintMs")
    by_title = {_in_frame(browser, f, "document.title"): f for f in frames}
    assert len(by_title) == 2
    one, two = (by_title[f"distviz: {cell_title(t)}"] for t in (design, hang))
    # the notebook's page cannot reach into a viewer: each runs in a sandboxed frame
    assert browser.eval("(() => { try { return !!document.querySelector('iframe')"
                        ".contentWindow.document; } catch (e) { return e.name; } })()") \
        == "SecurityError"
    size = browser.eval("[...document.querySelectorAll('iframe')].map(f => "
                        "[f.getBoundingClientRect().width, f.getBoundingClientRect().height])")
    assert all(h == CELL_HEIGHT_PX + 2 and w > 1000 for w, h in size)
    rp_design, rp_hang = replay(design), replay(hang)
    _in_frame(browser, one, "distviz.show(3)")
    _in_frame(browser, two, f"distviz.show({len(rp_hang.events) - 1})")
    first = _in_frame(browser, one, "Object.assign({}, document.body.dataset)")
    second = _in_frame(browser, two, "Object.assign({}, document.body.dataset)")
    assert first["step"] == "3" and first["text"] == rp_design.events[3].text
    want = {n: c for ws in rp_design.state_at(3).workers.values() for n, c in ws.deps.items()
            if c > 0}
    assert json.loads(first["pending"]) == want
    assert second["step"] == str(len(rp_hang.events) - 1)
    assert second["text"] == rp_hang.events[-1].text
    assert browser.errors() == []
