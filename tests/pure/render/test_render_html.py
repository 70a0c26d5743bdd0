"""The offline HTML viewer: its data checked against the trace and the replay, and the page
driven in a real headless Chromium (few tests: each one costs seconds)."""

from __future__ import annotations

import json
import re
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest
from builders.graphs import HOSTILE, _png_pixels_vary, design_trace, hang_trace, judged, replay_of
from chromium import Chromium, browser_fixture, needs_chromium

from distviz.render.html import json_for_script, to_html
from distviz.render.html_data import viewer_data
from distviz.replay import initial_dependencies
from distviz.views import ViewSpec


def _data(page: str) -> dict[str, Any]:
    m = re.search(r'<script type="application/json" id="distviz-data">(.*?)</script>', page, re.S)
    assert m
    out: dict[str, Any] = json.loads(m.group(1))
    return out


# -- text checks -------------------------------------------------------------------------

def test_json_for_script_cannot_close_the_element() -> None:
    text = json_for_script({"x": "</script><!-- & \u2028"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"x": "</script><!-- & \u2028"}


def test_page_is_self_contained_and_escapes_names() -> None:
    tr = design_trace(HOSTILE)
    page = to_html(judged(tr, replay_of(tr)))
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert "http://" not in page and "https://" not in page
    assert not re.search(r"<(link|img|iframe)\b", page)
    assert not re.search(r"<script[^>]*\bsrc=", page)
    assert "<script>&" not in page and 'b<script>' not in page
    assert page.count("<script") == 3  # the data, the sentences, the viewer; nothing injected
    assert HOSTILE in _data(page)["names"]


def test_data_holds_the_graph_the_counts_and_the_words() -> None:
    tr = hang_trace()
    rep = replay_of(tr)
    d = viewer_data(judged(tr, rep))
    ids = d["ids"]
    assert ids == [n.id for n in tr.nodes]
    for i, n in enumerate(tr.nodes):   # the next edges, as a compressed row per node
        assert [ids[t] for t in d["next"][d["off"][i]:d["off"][i + 1]]] == \
            [e[0] for e in n.next if e is not None]
    pairs = {(ids[d["pairs"][k]], ids[d["pairs"][k + 1]]) for k in range(0, len(d["pairs"]), 2)}
    assert ("worker0/RecvRpcBackward#0", "worker1/SendRpcBackward#0") in pairs
    first = initial_dependencies(tr, 0)
    assert d["deps0"] == [first.get(nid, -1) for nid in ids]
    assert len(d["ea"]) == len(rep.events) and d["hang"]["blocked"]
    notes = dict(zip(d["notes"][::2], d["notes"][1::2], strict=True))
    assert notes[ids.index("worker0/RecvRpcBackward#0")].startswith("msg 1:0")
    assert d["order"][0] == d["initiator"] == 0
    assert d["summary"]["links"] and d["groups"]


def test_agreement_is_in_words() -> None:
    tr = design_trace()
    rep = replay_of(tr)
    page = to_html(judged(tr, rep))
    assert "replay and the real run" in page
    assert "fifo_order" not in page and "exact:" not in page
    assert "the gradients: not compared" in page


def test_unknown_worker_in_the_start_view_is_a_usage_error() -> None:
    from distviz.errors import UsageError
    tr = design_trace()
    with pytest.raises(UsageError, match="--worker wrokerX"):
        to_html(judged(tr, replay_of(tr)), spec=ViewSpec(worker="wrokerX"))


# -- headless Chromium ---------------------------------------------------------------------

browser = browser_fixture()


def _open(browser: Chromium, tmp_path: Path, page: str, hash_: str = "") -> None:
    f = tmp_path / "view.html"
    f.write_text(page, encoding="utf-8")
    browser.goto(f.as_uri() + hash_)
    browser.wait_for("document.body.dataset.paintMs")
    assert browser.errors() == []


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


def _timed_page() -> tuple[str, Any, Any, Any]:
    """The design note with a real run and its timing analysis (critical path)."""
    from builders.perfetto import _real

    from distviz.replay.timing import analyze
    tr = design_trace()
    tr.real = _real(tr)
    tr.real.update({"passes_run": 1, "pass_seconds": [140e-6], "pass_start_us": [0.0]})
    timing = analyze(tr)
    rep = replay_of(tr)
    return to_html(judged(tr, rep)), rep, timing, tr


def test_timing_in_the_side_panel_and_the_data() -> None:
    import html as html_mod
    page, _rep, timing, tr = _timed_page()
    data = _data(page)
    path = timing.passes[0].path
    ids = [n.id for n in tr.nodes]
    assert [ids[i] for i in data["critical"]["nodes"]] == path.nodes
    assert [tr.nodes[r].msg_id for r in data["critical"]["messages"]] == path.message_ids
    m = re.search(r'<div id="time">(.*?)</div>', page, re.S)
    assert m and all(html_mod.escape(line) in m.group(1) for line in timing.summary())
    plain = design_trace()
    assert _data(to_html(judged(plain, replay_of(plain))))["critical"] == {"nodes": [], "messages": []}


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
