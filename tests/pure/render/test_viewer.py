"""The HTML viewer against the other views: the side panel lists the replay state the terminal
shows, names nodes as the terminal does, a hang opens where it happens, a recv names the
variable its RPC result went to in every picture; and the viewer's script modules type-check.

The page is driven in a real headless Chromium (``tests/chromium.py``); the type check runs the
real TypeScript compiler when one is installed (``TSC`` or ``tsc`` on PATH; ``.ci/run``
installs it)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from builders.graphs import _node, design_trace, hang_trace, judged, replay_of
from chromium import Chromium, browser_fixture, needs_chromium
from guards import HANG_GUARD_S
from rich.console import Console

from distviz.render.dot import to_dot
from distviz.render.html import VIEWER_MODULES, to_html, viewer_script
from distviz.render.html_data import viewer_data
from distviz.render.text import node_label
from distviz.render.tree import render_graph
from distviz.trace import ACCUMULATE_GRAD_SEQ, BackwardPass, Trace

VIEWER = Path(__file__).resolve().parents[3] / "distviz" / "render" / "viewer"


def unused_result_trace() -> Trace:
    """``side = rpc.rpc_sync("worker1", f, ...)`` never used: the recorder found no variable
    holding the result (the recv has no ``vars``), the call still says where it went."""
    tr = hang_trace()
    tr.rpc_calls[1].result_var = "side"
    tr.rpc_calls[1].line = 4
    return tr


def twin_trace() -> Trace:
    """Two ``MulBackward0 #1`` on one worker (ids ``#1`` and ``#1~1``), both pending at once:
    ``loss = (x * 2).sum() + (x * 3).sum()`` seen as one sum over two products."""
    nodes = [
        _node("worker0/AddBackward0#3", "op", 3, [("worker0/MulBackward0#1", 0),
                                                  ("worker0/MulBackward0#1~1", 0)]),
        _node("worker0/MulBackward0#1", "op", 1, [("worker0/AccumulateGrad(x)", 0)]),
        _node("worker0/MulBackward0#1~1", "op", 1, [("worker0/AccumulateGrad(x)", 0)]),
        _node("worker0/AccumulateGrad(x)", "accumulate_grad", ACCUMULATE_GRAD_SEQ, var="x",
              shape=[2]),
    ]
    return Trace(workers=["worker0"], initiator="worker0", context_id=0, nodes=nodes,
                 passes=[BackwardPass(roots=["worker0/AddBackward0#3"])])


# -- a recv names the variable its RPC result went to (pure) ---------------------------------------

def test_unused_result_recv_names_its_variable_in_every_picture() -> None:
    tr = unused_result_trace()
    rep = replay_of(tr)
    assert rep.outcome == "hang"
    recv = "worker0/RecvRpcBackward#4"          # the caller's recv of the unused result
    assert not tr.node_map()[recv].vars
    assert "`side`" in rep.hang.blocked_sends[0].reason   # type: ignore[union-attr]
    dot = to_dot(tr, rep, len(rep.events) - 1)
    assert "RecvRpcBackward #4 = side" in dot
    data = viewer_data(judged(tr, rep))
    notes = dict(zip(data["notes"][::2], data["notes"][1::2], strict=True))
    assert "= side" in notes[data["ids"].index(recv)].split(" · ")
    # the callee's recv of the same call holds the arguments, not the result
    callee_recv = data["ids"].index("worker1/RecvRpcBackward#2")
    assert "= side" not in notes.get(callee_recv, "")
    assert "RecvRpcBackward #2 = side" not in dot
    tree = _text(render_graph(tr))                          # the terminal's graph
    assert "RecvRpcBackward#4 = side" in tree and "RecvRpcBackward#2 = side" not in tree


def _text(renderable: Any) -> str:
    console = Console(width=200, color_system=None, record=True)
    console.print(renderable)
    return console.export_text()


# -- in a browser ----------------------------------------------------------------------------------

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

# -- the script's modules ----------------------------------------------------------------------------

def test_viewer_script_is_every_module_in_order_in_one_function() -> None:
    script = viewer_script()
    assert sorted(VIEWER_MODULES) == sorted(p.name for p in VIEWER.glob("*.js"))
    starts = [script.index((VIEWER / m).read_text(encoding="utf-8")) for m in VIEWER_MODULES]
    assert starts == sorted(starts)
    assert script.startswith("(function () {") and script.rstrip().endswith("})();")
    for m in VIEWER_MODULES:
        assert (VIEWER / m).read_text(encoding="utf-8").startswith("// @ts-check\n"), m


def _tsc() -> str | None:
    return os.environ.get("TSC") or shutil.which("tsc")


@pytest.mark.skipif(_tsc() is None,
                    reason="TypeScript's tsc is not installed (npm install typescript; or set TSC)")
def test_viewer_modules_type_check_with_tsc() -> None:
    tsc = _tsc()
    assert tsc is not None
    out = subprocess.run([tsc, "-p", str(VIEWER / "tsconfig.json")], capture_output=True,
                         text=True, timeout=HANG_GUARD_S, check=False)
    assert out.returncode == 0, out.stdout + out.stderr


def test_no_viewer_function_is_over_80_lines() -> None:
    """Each top-level function of the modules (``function name(`` at the start of a line up to
    the ``}`` that starts a line) is at most 80 lines, as the project's Python is."""
    long = []
    for m in VIEWER_MODULES:
        lines = (VIEWER / m).read_text(encoding="utf-8").splitlines()
        start = None
        for k, line in enumerate(lines):
            if re.match(r"function \w+\(", line) and not line.rstrip().endswith("}"):
                start = k
            elif start is not None and line.startswith("}"):
                if k - start + 1 > 80:
                    long.append(f"{m}:{start + 1} {k - start + 1} lines")
                start = None
    assert long == []


def test_two_nodes_alike_have_different_labels_in_the_pictures() -> None:
    from distviz.render.dot import to_dot
    src = to_dot(twin_trace(), replay_of(twin_trace()), full=True)
    labels = [line for line in src.splitlines() if "MulBackward0 #1" in line]
    assert len(labels) == 2 and len({("~1" in line) for line in labels}) == 2, labels


@pytest.mark.browser
@needs_chromium
def test_two_nodes_alike_have_different_titles_in_the_viewer(browser: Chromium,
                                                             tmp_path: Path) -> None:
    tr = twin_trace()
    _open(browser, tmp_path / "twins_titles.html", to_html(judged(tr, replay_of(tr))), "#step=0")
    titles = browser.eval(f"[...Array({len(tr.nodes)}).keys()].map(distviz.title)")
    assert sorted(t for t in titles if t.startswith("Mul")) == ["MulBackward0 #1",
                                                               "MulBackward0 #1~1"]
