"""The offline HTML step viewer, checked as text and driven in a real headless Chromium."""

from __future__ import annotations

import html as html_mod
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from test_render_dot import HOSTILE, _png_pixels_vary, design_trace, hang_trace, replay_of

from distviz.render.dot import to_dot
from distviz.render.graphviz_backend import render
from distviz.render.html import inline_svg, json_for_script, to_html
from distviz.trace import Trace

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _svg(trace: Trace) -> str | None:
    try:
        return render(to_dot(trace), "svg").decode()
    except Exception:  # noqa: BLE001 - no Graphviz at all: the list view is tested then
        return None


def _page(trace: Trace, svg: bool = True) -> tuple[str, Any]:
    rep = replay_of(trace)
    return to_html(trace, rep, _svg(trace) if svg else None), rep


def _data(page: str) -> dict[str, Any]:
    m = re.search(r'<script type="application/json" id="distviz-data">(.*?)</script>', page, re.S)
    assert m
    return json.loads(m.group(1))


# -- text checks -------------------------------------------------------------------------

def test_json_for_script_cannot_close_the_element() -> None:
    text = json_for_script({"x": "</script><!-- & \u2028"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"x": "</script><!-- & \u2028"}


def test_page_is_self_contained_and_escapes_names() -> None:
    tr = design_trace(HOSTILE)
    page, _ = _page(tr)
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert "http://" not in page and "https://" not in page
    assert not re.search(r"<(link|img|iframe)\b", page)
    assert not re.search(r"<script[^>]*\bsrc=", page)
    assert "<script>&" not in page and 'b<script>' not in page
    assert page.count("<script") == 2  # the data and the viewer, nothing injected
    assert any(v["title"].startswith(HOSTILE) for v in _data(page)["nodes"].values())


def test_list_view_without_svg_escapes_names() -> None:
    page, _ = _page(design_trace(HOSTILE), svg=False)
    assert 'id="listview"' in page and "<svg" not in page
    assert html_mod.escape(HOSTILE) in page


def test_inline_svg_strips_prolog_and_namespaces() -> None:
    svg = ('<?xml version="1.0"?>\n<!DOCTYPE svg PUBLIC "x" "http://www.w3.org/x.dtd">\n'
           '<!-- c -->\n<svg width="1" xmlns="http://www.w3.org/2000/svg" '
           'xmlns:xlink="http://www.w3.org/1999/xlink"><g id="a"/></svg>')
    assert inline_svg(svg) == '<svg width="1"><g id="a"/></svg>'


# -- headless Chromium ---------------------------------------------------------------------

needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed")


def _chromium(tmp_path: Path, url: str, *extra: str) -> str:
    assert CHROMIUM is not None
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp_path / 'profile'}", *extra, url]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    return proc.stdout


def _body(dom: str) -> dict[str, str]:
    m = re.search(r"<body([^>]*)>", dom)
    assert m, dom[:500]
    return {k: html_mod.unescape(v) for k, v in re.findall(r'data-([a-z-]+)="([^"]*)"', m.group(1))}


@pytest.mark.browser
@needs_chromium
def test_keys_step_and_highlight_node(tmp_path: Path) -> None:
    tr = design_trace()
    page, rep = _page(tr)
    f = tmp_path / "view.html"
    f.write_text(page, encoding="utf-8")
    dom = _chromium(tmp_path, f.as_uri() + "#keys=nnnnnnp", "--dump-dom")
    body = _body(dom)
    ev = rep.events[5]
    assert body["step"] == "5"
    assert body["current"] == (ev.node or "")
    assert body["text"] == (ev.text or ev.action)
    # the highlighted SVG element is the event's node
    if ev.node:
        svg_id = body["current-svg"]
        assert re.search(rf'<g id="{re.escape(svg_id)}" class="node[^"]*\bdv-current\b', dom), svg_id
    # the pending counts match the replay's own state after that step
    want = {n: c for ws in rep.state_at(5).workers.values() for n, c in ws.deps.items() if c > 0}
    assert json.loads(body["pending"]) == want


@pytest.mark.browser
@needs_chromium
def test_deep_link_shows_the_travelling_message(tmp_path: Path) -> None:
    tr = design_trace()
    page, rep = _page(tr)
    step = next(ev.step for ev in rep.events if ev.action == "send_gradient")
    f = tmp_path / "view.html"
    f.write_text(page, encoding="utf-8")
    dom = _chromium(tmp_path, f.as_uri() + f"#step={step}", "--dump-dom")
    body = _body(dom)
    assert body["step"] == str(step) and body["action"] == "send_gradient"
    label = rep.events[step].message.label
    assert body["message"] == label
    assert re.search(rf'<g id="m_{label.replace(":", "_")}" class="edge[^"]*\bdv-msg\b', dom)


@pytest.mark.browser
@needs_chromium
def test_hang_last_step_shows_blocked_sends(tmp_path: Path) -> None:
    tr = hang_trace()
    page, rep = _page(tr)
    assert rep.outcome == "hang"
    f = tmp_path / "view.html"
    f.write_text(page, encoding="utf-8")
    dom = _chromium(tmp_path, f.as_uri() + "#keys=G", "--dump-dom")
    assert _body(dom)["step"] == str(len(rep.events) - 1)
    m = re.search(r'<div id="hang">(.*?)</div>', dom, re.S)
    assert m and "blocked: " in m.group(1)
    for b in rep.hang.blocked_sends:
        assert html_mod.escape(b.node) in m.group(1)


@pytest.mark.browser
@needs_chromium
def test_screenshot_is_not_blank(tmp_path: Path) -> None:
    page, _ = _page(design_trace())
    f = tmp_path / "view.html"
    f.write_text(page, encoding="utf-8")
    shot = tmp_path / "out.png"
    _chromium(tmp_path, f.as_uri() + "#step=3", f"--screenshot={shot}", "--window-size=1000,700")
    assert shot.exists() and shot.stat().st_size > 5000
    assert _png_pixels_vary(shot.read_bytes())


def _timed_page(svg: bool = True) -> tuple[str, Any, Any]:
    """The design note with a real run and its timing analysis (critical path)."""
    from test_render_perfetto import _real

    from distviz.replay.timing import analyze
    tr = design_trace()
    tr.real = _real(tr)
    tr.real.update({"passes_run": 1, "pass_seconds": [140e-6], "pass_start_us": [0.0]})
    timing = analyze(tr)
    rep = replay_of(tr)
    return to_html(tr, rep, _svg(tr) if svg else None, timing=timing), rep, timing


def test_timing_in_the_side_panel_and_the_data() -> None:
    page, _rep, timing = _timed_page()
    data = _data(page)
    path = timing.passes[0].path
    assert data["critical"] == {"nodes": path.nodes, "messages": path.message_ids}
    m = re.search(r'<div id="time">(.*?)</div>', page, re.S)
    assert m and all(html_mod.escape(line) in m.group(1) for line in timing.summary())
    assert _data(_page(design_trace())[0])["critical"] == {"nodes": [], "messages": []}


@pytest.mark.browser
@needs_chromium
def test_critical_path_stays_outlined(tmp_path: Path) -> None:
    page, rep, timing = _timed_page()
    f = tmp_path / "view.html"
    f.write_text(page, encoding="utf-8")
    dom = _chromium(tmp_path, f.as_uri() + "#keys=nnG", "--dump-dom")
    body = _body(dom)
    path = timing.passes[0].path
    data = _data(page)
    if data["nodes"][path.nodes[0]]["el"].startswith("li"):   # no Graphviz: the list view
        pytest.skip("no SVG picture")
    assert body["critical"] == str(len(path.nodes) + len(path.message_ids))
    for nid in path.nodes:
        el = data["nodes"][nid]["el"]
        assert re.search(rf'<g id="{re.escape(el)}" class="node[^"]*\bdv-critical\b', dom), nid
    # stepping clears the step's own marks, never the path's
    assert len(re.findall(r'class="[^"]*\bdv-critical\b', dom)) == int(body["critical"])
