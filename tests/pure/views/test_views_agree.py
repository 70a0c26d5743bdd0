"""Every view shows the same dependency counts for the same step.

The initial counts come from one function (``distviz.replay.graph.initial_dependencies``: what
``computeDependencies`` counts, a root counting the ``GraphRoot``'s edge); the counts still
pending after a step from ``Replay.state_at``. Each view is read back as a user would see it
(the text of the terminal tree and state screen, the DOT labels, the HTML viewer's data, the
Perfetto args) and compared with those two, on hand-built fixtures and recorded traces, in FAST
and SMART mode. The ``browser`` test checks the viewer's script itself in headless Chromium.
"""

from __future__ import annotations

import io
import json
import re
from collections import Counter
from typing import Any

import pytest
from builders.graphs import judged
from builders.views_agree import CASES, _pending, _replayed
from rich.console import Console, RenderableType

from distviz.render.dot.draw import build_dot
from distviz.render.html.data import viewer_data
from distviz.render.perfetto import to_perfetto
from distviz.render.terminal import render_log, render_state
from distviz.render.terminal_text import node_label
from distviz.render.tree import render_graph
from distviz.replay import Replay, initial_dependencies
from distviz.trace import Trace

PARAMS = [(name, mode) for name in CASES for mode in ("fast", "smart")]


def _text(renderable: RenderableType) -> str:
    console = Console(color_system=None, width=400, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def _passes(r: Replay) -> list[int]:
    return sorted({ev.pass_index for ev in r.events})


# -- the engine and the step log --------------------------------------------------------------

@pytest.mark.parametrize(("name", "mode"), PARAMS)
def test_step_log_counts_are_the_initial_dependencies(name: str, mode: str) -> None:
    trace, r = _replayed(name, mode)
    kinds = {n.id: n.kind for n in trace.nodes}
    workers = {n.id: n.worker for n in trace.nodes}
    log = {line.plain.split()[0]: line.plain for line in render_log(trace, r)
           if line.plain[:1].isspace() or line.plain[:1].isdigit()}
    seen = 0
    for ev in r.events:
        if ev.action != "compute_dependencies":
            continue
        truth = initial_dependencies(trace, ev.pass_index, mode)
        want = {k: v for k, v in truth.items() if workers[k] == ev.worker and kinds[k] != "send"}
        assert ev.detail["deps"] == want
        assert f": {len(want)} nodes to wait for" in log[str(ev.step)]
        assert ev.to_json()["detail"]["deps"] == want          # the --json step log
        seen += 1
    assert seen


# -- the terminal: graph tree and state screen --------------------------------------------------

_TREE_LINE = re.compile(r"^[\s│├└─┬╰╭]*(?:\[in \d+\] )?(.+?)  (deps (\d+)|not reached)$")


def _tree_counts(trace: Trace, pass_index: int, mode: str) -> dict[str, int | None]:
    """Read ``render_graph``'s text back: ``{node id: deps N or None (not reached)}``."""
    out: dict[str, int | None] = {}
    worker = ""
    for line in _text(render_graph(trace, 10_000, pass_index=pass_index, mode=mode)).splitlines():
        line = line.rstrip()
        head = re.match(r"^(\S+) \(\d+ nodes\)$", line)
        if head:
            worker = head.group(1)
            continue
        m = _TREE_LINE.match(line)
        if not m:
            continue
        label = m.group(1)
        if label.startswith("AccumulateGrad "):
            nid = f"{worker}/AccumulateGrad({label.split()[1]})"
        else:
            nid = f"{worker}/{label.split()[0]}"
        out[nid] = int(m.group(3)) if m.group(3) is not None else None
    return out


@pytest.mark.parametrize(("name", "mode"), PARAMS)
def test_terminal_graph_shows_the_initial_dependencies(name: str, mode: str) -> None:
    trace, r = _replayed(name, mode)
    for p in _passes(r):
        truth = initial_dependencies(trace, p, mode)
        shown = _tree_counts(trace, p, mode)
        assert set(shown) == {n.id for n in trace.nodes}
        assert shown == {n.id: truth.get(n.id) for n in trace.nodes}


@pytest.mark.parametrize(("name", "mode"), PARAMS)
def test_terminal_state_shows_the_pending_counts(name: str, mode: str) -> None:
    trace, r = _replayed(name, mode)
    for step in sorted({*range(-1, len(r.events), 3), len(r.events) - 1}):   # a screen is slow
        text = _text(render_state(trace, r, step, max_items=10_000))
        shown = Counter(re.findall(r"(\S+) \((\d+)\)", text))
        want = Counter((node_label(n), str(c)) for n, c in _pending(r, step).items())
        assert shown == want, step


# -- DOT (SVG and PNG are drawn from it) --------------------------------------------------------

_DOT_NODE = re.compile(r'^\s+"(n_[^"]+)" \[id="[^"]+", label="([^"]*)"', re.M)


def _deps_line(label: str) -> str:
    """The label line with the count: ``deps D``, ``deps D (R left)`` or ``not reached``."""
    return next(ln for ln in label.split("\\n") if ln.startswith("deps ") or ln == "not reached")


@pytest.mark.parametrize(("name", "mode"), PARAMS)
def test_dot_labels_show_initial_and_pending_counts(name: str, mode: str) -> None:
    trace, r = _replayed(name, mode)
    last = len(r.events) - 1
    for step in [None, *range(-1, len(r.events))]:
        g = build_dot(trace, r, step=step)
        node_of = {key: nid for nid, key in g.node_ids.items()}
        p = r.events[step].pass_index if step is not None and step >= 0 else 0
        truth = initial_dependencies(trace, p, mode)
        # without a step, a replay that hangs is drawn as it ends
        at = step if step is not None else (last if r.outcome == "hang" else None)
        pending = _pending(r, at) if at is not None else {}
        labels = {node_of[k]: _deps_line(label) for k, label in _DOT_NODE.findall(g.source)}
        assert set(labels) == {n.id for n in trace.nodes}
        for nid, line in labels.items():
            if nid not in truth:
                assert line == "not reached", (step, nid, line)
            elif nid in pending:
                assert line == f"deps {truth[nid]} ({pending[nid]} left)", (step, nid, line)
            else:
                assert line == f"deps {truth[nid]}", (step, nid, line)


# -- the HTML viewer --------------------------------------------------------------------------------

def _viewer_state(data: dict[str, Any], step: int) -> tuple[dict[str, int], dict[str, int]]:
    """The viewer script's state (its counts), step for step from the page's data:
    ``(pending, initial)`` by node id."""
    ids = data["ids"]
    deps: dict[int, int] = {}
    init: dict[int, int] = {}
    pass_start = data["actions"].index("pass_start")
    for k in range(step + 1):
        if data["ea"][k] == pass_start:
            deps, init = {}, {}
        ch = data["ed"].get(str(k))
        if ch:
            for j in range(0, len(ch[0]), 2):
                init[ch[0][j]] = ch[0][j + 1]
                deps[ch[0][j]] = ch[0][j + 1]
            for j in range(0, len(ch[1]), 2):
                deps[ch[1][j]] = ch[1][j + 1]
        if data["actions"][data["ea"][k]] in ("execute", "accumulate") and data["en"][k] >= 0:
            deps[data["en"][k]] = 0
    return ({ids[n]: c for n, c in deps.items() if c > 0}, {ids[n]: c for n, c in init.items()})


@pytest.mark.parametrize(("name", "mode"), PARAMS)
def test_html_viewer_data_gives_the_same_counts(name: str, mode: str) -> None:
    trace, r = _replayed(name, mode)
    data = json.loads(json.dumps(viewer_data(judged(trace, r))))
    first = initial_dependencies(trace, 0, mode)
    assert data["deps0"] == [first.get(n.id, -1) for n in trace.nodes]
    for step in range(len(r.events)):
        pending, init = _viewer_state(data, step)
        assert pending == _pending(r, step), step
        truth = initial_dependencies(trace, r.events[step].pass_index, mode)
        assert all(truth[n] == c for n, c in init.items()), step


# -- Perfetto ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "mode"), PARAMS)
def test_perfetto_slices_carry_the_initial_dependencies(name: str, mode: str) -> None:
    trace, r = _replayed(name, mode)
    slices = [e for e in to_perfetto(judged(trace, r))["traceEvents"]
              if e.get("cat") == "replay" and e["ph"] == "X"]
    assert slices
    for e in slices:
        truth = initial_dependencies(trace, e["args"]["pass"], mode)
        assert e["args"].get("deps") == truth.get(e["args"]["node"]), e["args"]


# -- the viewer's script in a real browser ------------------------------------------------------
