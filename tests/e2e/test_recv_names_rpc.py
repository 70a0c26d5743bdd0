"""A RecvRpcBackward's variable names, recorded from real RPC workers (the rest is
tests/pure/render/test_recv_names.py)."""

from __future__ import annotations

import pytest
from builders.recv_names import _text
from conftest import run_cached

from distviz.render.tree import render_graph


@pytest.mark.rpc
def test_recorded_recv_names_reach_the_graph() -> None:
    trace = run_cached("design_note").trace
    recv = next(n for n in trace.nodes if n.kind == "recv" and n.worker == "worker0")
    assert recv.vars == ["t3"]
    assert "RecvRpcBackward#0 = t3 1:0" in _text(render_graph(trace))
