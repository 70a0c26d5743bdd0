"""Traces in Jupyter, in a real Chromium: two inline viewers on one page (the rest is
tests/pure/render/test_notebook.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import replay_fixtures as fx
from chromium import Chromium, browser_fixture
from guards import WAIT_GUARD_S

from distviz.render.notebook import CELL_HEIGHT_PX, cell_title
from distviz.replay import replay

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
