"""The offline HTML viewer in a real Chromium: keys, hangs, search, the critical path (the
rest is tests/pure/render/test_render_html.py)."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import pytest
from builders.graphs import _png_pixels_vary, design_trace, hang_trace, judged, replay_of
from builders.render_html import _timed_page
from chromium import Chromium, browser_fixture, needs_chromium

from distviz.render.html.page import to_html

browser = browser_fixture()


def _open(browser: Chromium, tmp_path: Path, page: str, hash_: str = "") -> None:
    f = tmp_path / "view.html"
    f.write_text(page, encoding="utf-8")
    browser.goto(f.as_uri() + hash_)
    browser.wait_for("document.body.dataset.paintMs")
    assert browser.errors() == []


def _pixels(png: bytes) -> tuple[int, int, list[bytes]]:
    """Decode an 8-bit RGB(A) PNG without filters beyond the basic five: (width, height, rows)."""
    pos, chunks, width, height, ctype = 8, b"", 0, 0, 2
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos:pos + 4])
        kind, body = png[pos + 4:pos + 8], png[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, _depth, ctype = struct.unpack(">IIBB", body[:10])
        elif kind == b"IDAT":
            chunks += body
        pos += 12 + length
    bpp = 4 if ctype == 6 else 3
    raw = zlib.decompress(chunks)
    stride = width * bpp
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line) if bpp == 3 else bytes(
            v for k in range(0, stride, 4) for v in line[k:k + 3]))
        prev = line
    return width, height, rows


@pytest.mark.browser
@needs_chromium
def test_keys_step_and_the_counts_match_the_replay(browser: Chromium, tmp_path: Path) -> None:
    tr = design_trace()
    rep = replay_of(tr)
    _open(browser, tmp_path, to_html(judged(tr, rep)), "#keys=nnnnnnp")
    body = browser.eval("Object.assign({}, document.body.dataset)")
    ev = rep.events[5]
    assert body["step"] == "5" and body["current"] == (ev.node or "")
    assert body["text"] == ev.text
    want = {n: c for ws in rep.state_at(5).workers.values() for n, c in ws.deps.items() if c > 0}
    assert json.loads(body["pending"]) == want
    send = next(e.step for e in rep.events if e.action == "send_gradient")
    browser.eval(f"distviz.show({send})")
    body = browser.eval("Object.assign({}, document.body.dataset)")
    assert body["message"] == rep.events[send].message.label   # type: ignore[union-attr]
    browser.key("s")   # the worker summary, then every node again
    assert browser.eval("document.body.dataset.view") == "summary:all"
    browser.key("f")
    assert browser.eval("document.body.dataset.view") == "full:all"


@pytest.mark.browser
@needs_chromium
def test_hang_marks_blocked_sends_and_nodes_that_never_run(browser: Chromium,
                                                           tmp_path: Path) -> None:
    tr = hang_trace()
    rep = replay_of(tr)
    assert rep.outcome == "hang"
    _open(browser, tmp_path, to_html(judged(tr, rep)), "#keys=G")
    states = browser.eval("(function(){var s=distviz.state().st;return Array.from(s)})()")
    ran = {n for per in rep.order[-1:] for nodes in per.values() for n in nodes}
    blocked = {b.node for b in rep.hang.blocked_sends}  # type: ignore[union-attr]
    for i, n in enumerate(tr.nodes):
        want = 3 if n.id in ran else 4 if n.id in blocked else 5
        assert states[i] == want, n.id
    text = browser.eval("document.getElementById('hang').textContent")
    assert "blocked send: " in text and "never runs: " in text


@pytest.mark.browser
@needs_chromium
def test_100k_nodes_search_finds_a_variable_and_shows_it(browser: Chromium,
                                                        tmp_path: Path) -> None:
    from distviz.replay import replay
    from distviz.replay.synthetic import synthetic_trace
    tr = synthetic_trace(100_000, 8, 0)
    page = to_html(judged(tr, replay(tr)))
    _open(browser, tmp_path, page)
    assert browser.eval("document.body.dataset.view") == "summary:all"   # 100k: the summary
    browser.key("/")
    browser.type_text("s5.w2")
    browser.key("Enter")
    body = browser.eval("Object.assign({}, document.body.dataset)")
    assert body["selected"] == "worker5/AccumulateGrad(s5.w2)"
    assert int(body["hits"]) >= 1
    shot = browser.screenshot()
    assert _png_pixels_vary(shot)
    (tmp_path / "search.png").write_bytes(shot)
    x, y, w, h = (int(v) for v in body["hitBox"].split(","))
    width, height, rows = _pixels(shot)
    canvas_top = browser.eval("document.getElementById('canvas').getBoundingClientRect().top")
    top = int(canvas_top)
    blue = 0
    for yy in range(max(0, top + y - 8), min(height, top + y + h + 8)):
        row = rows[yy]
        for xx in range(max(0, x - 8), min(width, x + w + 8)):
            r, g, b = row[3 * xx:3 * xx + 3]
            blue += b > 180 and r < 80 and 90 < g < 160     # the search match's ring, #1c7ed6
    assert blue > 100, blue


@pytest.mark.browser
@needs_chromium
def test_critical_path_stays_outlined(browser: Chromium, tmp_path: Path) -> None:
    page, rep, timing, _tr = _timed_page()
    _open(browser, tmp_path, page, "#keys=nnG")
    path = timing.passes[0].path
    assert browser.eval("document.body.dataset.critical") == str(
        len(path.nodes) + len(path.message_ids))
    assert browser.eval("document.body.dataset.step") == str(len(rep.events) - 1)
    shot = browser.screenshot()   # violet (#7048e8) outlines are drawn
    width, height, rows = _pixels(shot)
    violet = sum(1 for row in rows for x in range(0, width * 3, 3)
                 if abs(row[x] - 0x70) < 12 and abs(row[x + 1] - 0x48) < 12
                 and abs(row[x + 2] - 0xe8) < 12)
    assert violet > 200, violet
