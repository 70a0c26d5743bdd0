"""A RecvRpcBackward carries the variables its RPC result was assigned to (``t3`` in
``t3 = rpc.rpc_sync(...)``), and every view shows them where it shows other nodes' names: the
graph tree, the step log, the DOT labels and the HTML viewer."""

from __future__ import annotations

import replay_fixtures as F
from builders.graphs import judged
from builders.recv_names import _text

from distviz.render.dot.draw import to_dot
from distviz.render.html.data import viewer_data
from distviz.render.html.page import to_html
from distviz.render.terminal import render_log
from distviz.render.tree import render_graph
from distviz.replay import replay
from distviz.trace import Trace


def named_design_note() -> Trace:
    """The design note with ``t3``, the RPC result, on worker0's recv (as the recorder does)."""
    trace = F.design_note()
    recv = next(n for n in trace.nodes if n.kind == "recv" and n.worker == "worker0")
    recv.vars = ["t3"]
    return trace


def test_graph_tree_shows_the_recv_name() -> None:
    text = _text(render_graph(named_design_note()))
    assert "RecvRpcBackward#0 = t3 1:0 → worker1/SendRpcBackward#2" in text


def test_step_log_names_the_recv_like_a_leaf() -> None:
    trace = named_design_note()
    log = [line.plain for line in render_log(trace, replay(trace))]
    assert any("worker0 runs RecvRpcBackward(t3) (seq 0) in task 0; it sends its gradient to "
               "worker1 (message 1:0)" in line for line in log)
    assert any("RecvRpcBackward(t3) and AccumulateGrad(t4) become ready" in line for line in log)
    # worker1's recv has no name: it stays plain
    assert any("worker1 runs RecvRpcBackward (seq 0)" in line for line in log)


def test_dot_label_and_html_show_the_recv_name() -> None:
    trace = named_design_note()
    rp = replay(trace)
    assert 'label="RecvRpcBackward #0 = t3\\nmsg 1:0' in to_dot(trace, rp)
    data = viewer_data(judged(trace, rp))   # the viewer's box and side panel show the notes
    notes = dict(zip(data["notes"][::2], data["notes"][1::2], strict=True))
    recv = data["ids"].index("worker0/RecvRpcBackward#0")
    assert "= t3" in notes[recv] and "RecvRpcBackward" in to_html(judged(trace, rp))
