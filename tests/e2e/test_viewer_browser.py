"""The HTML viewer against the other views, in a real Chromium: the side panel, hangs, nodes
alike (the rest is tests/pure/render/test_viewer.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from builders.graphs import design_trace, hang_trace, judged, replay_of
from builders.viewer import twin_trace
from chromium import Chromium, browser_fixture, needs_chromium

from distviz.render.html.page import to_html
from distviz.render.terminal_text import node_label

browser = browser_fixture()


def _open(browser: Chromium, path: Path, page: str, hash_: str = "") -> None:
    path.write_text(page, encoding="utf-8")
    browser.goto(path.as_uri() + hash_)
    browser.wait_for("document.body.dataset.paintMs")
    assert browser.errors() == []


_PANEL = """(function () {
  var out = {};
  var hs = document.querySelectorAll("#workers h4");
  hs.forEach(function (h) {
    var ul = h.nextElementSibling, name = h.firstChild.textContent.split(" · ")[0];
    out[name] = Array.from(ul.children).map(function (e) { return [e.className, e.textContent]; });
  });
  return out;
})()"""


def _kind(text: str) -> str:
    """What a line of a worker's list in the side panel says."""
    if re.fullmatch(r".+: \d+ of \d+ deps left", text):
        return "pending"
    if text.endswith(": ready"):
        return "ready"
    if re.fullmatch(r"[\d,]+ executed", text):
        return "executed"
    return ""


def _panel(browser: Chromium) -> dict[str, list[tuple[str, str]]]:
    """Each worker's list in the side panel: ``[(kind, text), ...]`` (``_kind``)."""
    got = browser.eval(_PANEL)
    return {w: [(_kind(t), t) for _c, t in items] for w, items in got.items()}


@pytest.mark.browser
@needs_chromium
def test_side_panel_lists_the_replay_state_the_terminal_shows(browser: Chromium,
                                                              tmp_path: Path) -> None:
    for name, tr in (("hang", hang_trace()), ("design", design_trace())):
        rep = replay_of(tr)
        _open(browser, tmp_path / f"{name}.html", to_html(judged(tr, rep)), "#step=0")
        for step in range(len(rep.events)):
            browser.eval(f"distviz.show({step})")
            panel = _panel(browser)
            state = rep.state_at(step)
            for w, ws in state.workers.items():
                pending = [t.split(":")[0].split(" (msg ")[0] for c, t in panel[w]
                           if c == "pending"]
                want = [node_label(n) for n, _c in sorted(
                    ws.deps.items(), key=lambda kv: (tr.node_map()[kv[0]].seq, kv[0]),
                    reverse=True)]
                assert pending == want, (name, step, w)
                executed = [t for c, t in panel[w] if c == "executed"]
                assert executed == [f"{len(ws.executed)} executed"], (name, step, w)


@pytest.mark.browser
@needs_chromium
def test_hang_at_its_last_step_panel_and_graph_agree(browser: Chromium, tmp_path: Path) -> None:
    tr = hang_trace()
    rep = replay_of(tr)
    last = len(rep.events) - 1
    _open(browser, tmp_path / "hang.html", to_html(judged(tr, rep)), f"#step={last}")
    panel = _panel(browser)
    for w, ws in rep.state_at(last).workers.items():
        for n, left in ws.deps.items():
            line = next((t for c, t in panel[w]
                         if c == "pending" and t.startswith(node_label(n))), "")
            assert f": {left} of " in line, (w, n, panel[w])
        if ws.deps:
            assert ("", "nothing pending") not in panel[w]


@pytest.mark.browser
@needs_chromium
def test_two_nodes_alike_are_told_apart_in_the_pending_list(browser: Chromium,
                                                            tmp_path: Path) -> None:
    tr = twin_trace()
    rep = replay_of(tr)
    step = next(e.step for e in rep.events if e.action == "compute_dependencies")
    assert {"worker0/MulBackward0#1", "worker0/MulBackward0#1~1"} <= set(
        rep.state_at(step).workers["worker0"].deps)
    _open(browser, tmp_path / "twins.html", to_html(judged(tr, rep)), f"#step={step}")
    lines = [t for c, t in _panel(browser)["worker0"] if c == "pending" and "Mul" in t]
    assert lines == ["MulBackward0#1~1: 1 of 1 deps left", "MulBackward0#1: 1 of 1 deps left"]


@pytest.mark.browser
@needs_chromium
def test_hang_opens_on_its_last_step_and_step_minus_one_is_the_last(browser: Chromium,
                                                                    tmp_path: Path) -> None:
    tr = hang_trace()
    rep = replay_of(tr)
    last = len(rep.events) - 1
    _open(browser, tmp_path / "hang.html", to_html(judged(tr, rep)))
    body = browser.eval("Object.assign({}, document.body.dataset)")
    assert body["step"] == str(last)
    states = browser.eval("Array.from(distviz.state().st)")
    assert 4 in states and 5 in states        # blocked sends and nodes that never run coloured
    assert "The replay hangs" in browser.eval("document.getElementById('hang').textContent")
    ok = design_trace()
    ok_rep = replay_of(ok)
    _open(browser, tmp_path / "design.html", to_html(judged(ok, ok_rep)))
    assert browser.eval("document.body.dataset.step") == "0"   # a completed replay: the start
    _open(browser, tmp_path / "design2.html", to_html(judged(ok, ok_rep)), "#step=-1")
    assert browser.eval("document.body.dataset.step") == str(len(ok_rep.events) - 1)


@pytest.mark.browser
@needs_chromium
def test_collapse_button_stands_apart_from_the_worker_name(browser: Chromium,
                                                           tmp_path: Path) -> None:
    tr = design_trace()
    _open(browser, tmp_path / "design.html", to_html(judged(tr, replay_of(tr))))
    gaps = browser.eval("""Array.from(document.querySelectorAll('#workers h4')).map(function (h) {
        var r = document.createRange(); r.selectNodeContents(h.firstChild);
        return h.querySelector('button').getBoundingClientRect().left
               - r.getBoundingClientRect().right; })""")
    assert len(gaps) == len(tr.workers)
    assert all(g >= 6 for g in gaps), gaps     # a word's space at least, not touching


@pytest.mark.browser
@needs_chromium
def test_two_nodes_alike_have_different_titles_in_the_viewer(browser: Chromium,
                                                             tmp_path: Path) -> None:
    tr = twin_trace()
    _open(browser, tmp_path / "twins_titles.html", to_html(judged(tr, replay_of(tr))), "#step=0")
    titles = browser.eval(f"[...Array({len(tr.nodes)}).keys()].map(distviz.title)")
    assert sorted(t for t in titles if t.startswith("Mul")) == ["MulBackward0 #1",
                                                               "MulBackward0 #1~1"]
