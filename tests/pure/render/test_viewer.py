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
from builders.graphs import hang_trace, judged, replay_of
from builders.viewer import twin_trace
from guards import HANG_GUARD_S
from rich.console import Console

from distviz.render.dot.draw import to_dot
from distviz.render.html.data import viewer_data
from distviz.render.html.page import VIEWER_MODULES, viewer_script
from distviz.render.tree import render_graph
from distviz.trace import Trace

VIEWER = Path(__file__).resolve().parents[3] / "distviz" / "render" / "html" / "viewer"


def unused_result_trace() -> Trace:
    """``side = rpc.rpc_sync("worker1", f, ...)`` never used: the recorder found no variable
    holding the result (the recv has no ``vars``), the call still says where it went."""
    tr = hang_trace()
    tr.rpc_calls[1].result_var = "side"
    tr.rpc_calls[1].line = 4
    return tr


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
    from distviz.render.dot.draw import to_dot
    src = to_dot(twin_trace(), replay_of(twin_trace()), full=True)
    labels = [line for line in src.splitlines() if "MulBackward0 #1" in line]
    assert len(labels) == 2 and len({("~1" in line) for line in labels}) == 2, labels
