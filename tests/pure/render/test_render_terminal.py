"""Terminal renderings: the numbered log (golden), state screens, graph and summary views."""

from __future__ import annotations

import io
import os
import re
from pathlib import Path
from typing import Any

import pytest
from builders.terminal import design_note_trace, replay_of
from rich.console import Console, Group, RenderableType
from rich.tree import Tree

from distviz.judge.findings import Agreement
from distviz.render.terminal import render_log, render_state
from distviz.render.tree import render_graph, render_summary
from distviz.replay import initial_dependencies
from distviz.trace import ACCUMULATE_GRAD_SEQ, BackwardPass, Node, RpcCall, Trace, message_label

GOLDEN = Path(__file__).parents[2] / "golden" / "design_note_log.txt"
M = 1 << 48


def _node(nid: str, kind: str, seq: int, nxt: list[tuple[str, int] | None] | None = None,
          **kw: Any) -> Node:
    worker, rest = nid.split("/", 1)
    name = {"op": rest.split("#")[0], "send": "torch::distributed::autograd::SendRpcBackward",
            "recv": "torch::distributed::autograd::RecvRpcBackward",
            "accumulate_grad": "torch::autograd::AccumulateGrad"}[kind]
    return Node(id=nid, worker=worker, name=name, kind=kind, seq=seq, next=nxt or [], **kw)


def _leaf(worker: str, var: str) -> Node:
    return _node(f"{worker}/AccumulateGrad({var})", "accumulate_grad", ACCUMULATE_GRAD_SEQ,
                 var=var, shape=[3, 3], dtype="float32")


def local_design_note() -> Trace:
    """PyTorch's design-note example: ``t3 = rpc_sync(worker1, torch.add, (t1, t2))``,
    ``loss = (t3 * t4).sum()`` on worker0, backward from ``loss``.

    worker0: SumBackward0 -> MulBackward0 -> {RecvRpcBackward 1:0, AccumulateGrad(t4)};
             SendRpcBackward 0:0 -> {AccumulateGrad(t1), AccumulateGrad(t2)}
    worker1: SendRpcBackward 1:0 -> AddBackward0 -> RecvRpcBackward 0:0 (inputs 0 and 1)
    """
    nodes = [
        _node("worker0/SumBackward0#2", "op", 2, [("worker0/MulBackward0#1", 0)], vars=["loss"]),
        _node("worker0/MulBackward0#1", "op", 1, [("worker0/RecvRpcBackward#0", 0),
                                                  ("worker0/AccumulateGrad(t4)", 0)],
              vars=["t5"]),
        _node("worker0/RecvRpcBackward#0", "recv", 0, msg_id=M | 0, call=0, vars=["t3"],
              input_shapes=[[3, 3]]),
        _leaf("worker0", "t4"),
        _node("worker0/SendRpcBackward#0", "send", 0, [("worker0/AccumulateGrad(t1)", 0),
                                                       ("worker0/AccumulateGrad(t2)", 0)],
              msg_id=0, call=0),
        _leaf("worker0", "t1"),
        _leaf("worker0", "t2"),
        _node("worker1/SendRpcBackward#2", "send", 2, [("worker1/AddBackward0#1", 0)],
              msg_id=M | 0, call=0),
        _node("worker1/AddBackward0#1", "op", 1, [("worker1/RecvRpcBackward#0", 0),
                                                  ("worker1/RecvRpcBackward#0", 1)]),
        _node("worker1/RecvRpcBackward#0", "recv", 0, msg_id=0, call=0,
              input_shapes=[[3, 3], [3, 3]]),
    ]
    return Trace(workers=["worker0", "worker1"], initiator="worker0", context_id=0, nodes=nodes,
                 passes=[BackwardPass(roots=["worker0/SumBackward0#2"], root_vars=["loss"])],
                 rpc_calls=[RpcCall(caller="worker0", callee="worker1", api="rpc_sync",
                                    func="torch.add", builtin=True, grad_enabled=True, line=5,
                                    result_var="t3", msg_ids=[0, M | 0])],
                 known_workers={"worker0": ["worker1"], "worker1": ["worker0"]})


def local_unused_send() -> Trace:
    """``test_backward_unused_send_function``: ``rpc_sync(worker1, torch.add, (t1, t2))`` whose
    result is unused; ``loss = (t1 * t2).sum()``. worker0's send 0:0 never gets a gradient."""
    nodes = [
        _node("worker0/SumBackward0#1", "op", 1, [("worker0/MulBackward0#0", 0)], vars=["loss"]),
        _node("worker0/MulBackward0#0", "op", 0, [("worker0/AccumulateGrad(t1)", 0),
                                                  ("worker0/AccumulateGrad(t2)", 0)]),
        _leaf("worker0", "t1"),
        _leaf("worker0", "t2"),
        _node("worker0/SendRpcBackward#2", "send", 2, [("worker0/AccumulateGrad(t1)", 0),
                                                       ("worker0/AccumulateGrad(t2)", 0)],
              msg_id=0, call=0),
        _node("worker0/RecvRpcBackward#0", "recv", 0, msg_id=M | 0, call=0, vars=["t3"]),
        _node("worker1/RecvRpcBackward#0", "recv", 0, msg_id=0, call=0),
        _node("worker1/AddBackward0#1", "op", 1, [("worker1/RecvRpcBackward#0", 0),
                                                  ("worker1/RecvRpcBackward#0", 1)]),
        _node("worker1/SendRpcBackward#2", "send", 2, [("worker1/AddBackward0#1", 0)],
              msg_id=M | 0, call=0),
    ]
    return Trace(workers=["worker0", "worker1"], initiator="worker0", context_id=0, nodes=nodes,
                 passes=[BackwardPass(roots=["worker0/SumBackward0#1"], root_vars=["loss"])],
                 rpc_calls=[RpcCall(caller="worker0", callee="worker1", api="rpc_sync",
                                    func="torch.add", builtin=True, grad_enabled=True, line=4,
                                    result_var="t3", msg_ids=[0, M | 0])],
                 known_workers={"worker0": ["worker1"], "worker1": ["worker0"]})


def text_of(renderable: RenderableType, width: int = 100) -> str:
    console = Console(color_system=None, width=width, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def log_text(trace: Trace, replay: Any, width: int = 100, **kw: Any) -> str:
    console = Console(color_system=None, width=width, record=True, file=io.StringIO())
    for line in render_log(trace, replay, width=width, **kw):
        console.print(line, soft_wrap=True)
    return console.export_text()


def step_of(replay: Any, action: str, worker: str | None = None) -> int:
    for ev in replay.events:
        if ev.action == action and (worker is None or ev.worker == worker):
            return int(ev.step)
    raise AssertionError(f"no {action} event on {worker}")


# -- graph and summary (no replay needed) ------------------------------------------------------

def test_initial_dependencies_count_one_per_edge() -> None:
    deps = initial_dependencies(local_design_note())
    assert deps["worker1/RecvRpcBackward#0"] == 2        # two edges from AddBackward0
    assert deps["worker0/MulBackward0#1"] == 1
    assert deps["worker0/SumBackward0#2"] == 1           # the root: the GraphRoot's edge
    assert deps["worker1/SendRpcBackward#2"] == 0        # sends are BFS roots


def test_initial_dependencies_unreached_recv_is_none() -> None:
    deps = initial_dependencies(local_unused_send())
    assert "worker0/RecvRpcBackward#0" not in deps
    assert deps["worker0/AccumulateGrad(t1)"] == 2       # from MulBackward0 and the send


def test_graph_tree_shows_pairs_both_ends_and_references() -> None:
    out = text_of(render_graph(local_design_note()))
    assert "SendRpcBackward#2 1:0 ← worker0/RecvRpcBackward#0  deps 0" in out
    assert "RecvRpcBackward#0 = t3 1:0 → worker1/SendRpcBackward#2  deps 1" in out
    assert "RecvRpcBackward#0 0:0 → worker0/SendRpcBackward#0  deps 2" in out
    assert "[in 1] ↺ RecvRpcBackward#0 (shown above)" in out
    assert "AccumulateGrad t4 [3, 3] float32  deps 1" in out
    assert out.index("worker0 (7 nodes)") < out.index("worker1 (3 nodes)")


def test_graph_marks_unreached_nodes() -> None:
    out = text_of(render_graph(local_unused_send()))
    assert "RecvRpcBackward#0 = t3 1:0 → worker1/SendRpcBackward#2  not reached" in out


def test_graph_deep_chain_needs_no_recursion() -> None:
    n = 3000
    nodes = [_node(f"w/Op#{i}", "op", i, [(f"w/Op#{i - 1}", 0)] if i else []) for i in range(n)]
    trace = Trace(workers=["w"], initiator="w", context_id=0, nodes=nodes,
                  passes=[BackwardPass(roots=[f"w/Op#{n - 1}"])])
    group = render_graph(trace, max_nodes=n)           # deeper than the recursion limit
    assert isinstance(group, Group)
    tree = group.renderables[0]
    assert isinstance(tree, Tree)
    depth = 0
    while tree.children:
        tree = tree.children[0]
        depth += 1
    assert depth == n and "Op#0  deps 1" in str(tree.label)


def test_graph_above_max_nodes_is_a_summary() -> None:
    out = text_of(render_graph(local_design_note(), max_nodes=5))
    assert "10 nodes is more than max_nodes=5" in out
    assert re.search(r"worker0\s*│\s*2\s*│\s*1\s*│\s*1\s*│\s*3", out)


def test_summary_lists_kinds_pairs_and_leaves() -> None:
    out = text_of(render_summary(local_design_note()))
    assert "7: op 2, send 1, recv 1, accumulate_grad 3" in out
    assert "t1 [3, 3] float32" in out
    assert re.search(r"1:0\s+worker1/SendRpcBackward#2\s+←\s+worker0/RecvRpcBackward#0", out)


# -- the log -----------------------------------------------------------------------------------

def test_design_note_log_golden() -> None:
    trace = design_note_trace()
    out = log_text(trace, replay_of(trace))
    if os.environ.get("DISTVIZ_UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(out, encoding="utf-8")
    assert out == GOLDEN.read_text(encoding="utf-8")


def test_log_lines_fit_the_width() -> None:
    trace = design_note_trace()
    out = log_text(trace, replay_of(trace), width=60)
    assert max(len(line) for line in out.splitlines()) <= 60


def test_log_without_width_is_one_line_per_event() -> None:
    trace = design_note_trace()
    rep = replay_of(trace)
    lines = [line.plain for line in render_log(trace, rep)]
    numbered = [line for line in lines if re.match(r"\s*\d+ worker", line)]
    assert len(numbered) == len(rep.events)
    assert all("\n" not in line for line in lines)


def test_log_worker_filter_and_range() -> None:
    trace = design_note_trace()
    rep = replay_of(trace)
    lines = [line.plain for line in render_log(trace, rep, worker="worker1")]
    numbered = [line for line in lines if re.match(r"\s*\d+ ", line)]
    assert numbered and all(line.split()[1] in ("worker1", "-") for line in numbered)
    lines = [line.plain for line in render_log(trace, rep, start=3, end=5)]
    steps = [int(line.split()[0]) for line in lines if re.match(r"\s*\d+ ", line)]
    assert steps == [3, 4, 5]
    assert any(line.startswith("outcome: completed") for line in lines)


def test_a_long_log_shows_its_first_and_last_steps_and_says_what_it_left_out() -> None:
    trace = design_note_trace()
    rep = replay_of(trace)
    n = len(rep.events)
    lines = [line.plain for line in render_log(trace, rep, limit=6)]
    steps = [int(line.split()[0]) for line in lines if re.match(r"\s*\d+ ", line)]
    assert steps == [0, 1, 2, n - 3, n - 2, n - 1]
    assert f"… {n - 6} steps not shown: pick any range with --from and --to" in "\n".join(lines)
    assert any(line.startswith("outcome: completed") for line in lines)
    whole = [line.plain for line in render_log(trace, rep, limit=n)]
    assert not any("not shown" in line for line in whole)


def test_log_unknown_worker_is_an_error() -> None:
    trace = design_note_trace()
    with pytest.raises(ValueError, match="unknown worker 'worker9'"):
        list(render_log(trace, replay_of(trace), worker="worker9"))


def test_log_to_a_pipe_has_no_control_codes() -> None:
    trace = design_note_trace()
    buf = io.StringIO()
    console = Console(file=buf, width=100)            # not a terminal: rich drops all styles
    for line in render_log(trace, replay_of(trace)):
        console.print(line, soft_wrap=True)
    assert "\x1b" not in buf.getvalue()


def test_log_ends_with_agreement_sentence() -> None:
    trace = design_note_trace()
    agreement = Agreement(outcome=True, order=True, executed=True, gradients=None, leaves=None,
                          fifo_order=True, arrival_differs=(), exact=True, mismatches=(),
                          status="agrees", text="order and gradients match")
    lines = [line.plain for line in render_log(trace, replay_of(trace), agreement=agreement)]
    assert lines[-1] == "agreement with the real run: order and gradients match"


def test_hang_log_points_at_send_and_variable() -> None:
    trace = local_unused_send()
    rep = replay_of(trace)
    assert rep.outcome == "hang"
    out = log_text(trace, rep)
    assert "outcome: HANG" in out
    tail = out[out.index("outcome: HANG"):]
    assert "worker0/SendRpcBackward#2" in tail
    assert "fix:" in tail


# -- state screens -----------------------------------------------------------------------------

def test_state_after_worker1_computes_dependencies() -> None:
    trace = design_note_trace()
    rep = replay_of(trace)
    step = step_of(rep, "compute_dependencies", "worker1")
    out = text_of(render_state(trace, rep, step))
    assert re.search(rf"step {step}/{len(rep.events) - 1} · pass 1/1", out)
    assert "AddBackward0#1 (1)" in out
    assert "RecvRpcBackward#0 (2)" in out
    assert "messages in flight" in out


def test_a_message_in_flight_to_a_worker_not_started_is_incoming_not_a_call() -> None:
    trace = design_note_trace()
    rep = replay_of(trace)
    step = next(ev.step for ev in rep.events if ev.action == "send_gradient" and ev.worker == "worker0")
    ws = rep.state_at(step).workers["worker1"]
    assert not ws.initialized and ws.pending_calls    # the message is on its way
    out = text_of(render_state(trace, rep, step), width=160)
    panel = out[out.index("worker1"):]
    assert "not started" in panel
    send = trace.node_map()[ws.pending_calls[0]]
    assert send.msg_id is not None
    assert re.search(rf"incoming +SendRpcBackward#\d+ {message_label(send.msg_id)} "
                     r"\(in flight\)", panel), panel
    assert not re.search(r"\bcalls\b", panel)

def test_state_shows_queue_in_pop_order() -> None:
    trace = design_note_trace()
    rep = replay_of(trace)
    for ev in rep.events:
        if ev.action == "execute" and (ev.node or "").startswith("worker0/MulBackward0#"):
            queue = ev.detail.get("queue") or rep.state_at(ev.step).workers["worker0"].queue
            out = text_of(render_state(trace, rep, ev.step), width=140)
            positions = [out.index(q.split("/", 1)[1]) for q in queue]
            assert positions == sorted(positions)
            return
    raise AssertionError("MulBackward0 never ran")


def test_state_initial_and_final() -> None:
    trace = design_note_trace()
    rep = replay_of(trace)
    last = len(rep.events) - 1
    assert "before the first event" in text_of(render_state(trace, rep, -1))
    final = text_of(render_state(trace, rep, last), width=140)
    assert f"step {last}/{last}" in final
    assert "t1" in final and "t2" in final and "t4" in final
    with pytest.raises(IndexError):
        render_state(trace, rep, last + 1)


def test_state_stepping_back_shows_the_same_screen() -> None:
    trace = design_note_trace()
    rep = replay_of(trace)
    steps = range(-1, len(rep.events))
    forward = {s: text_of(render_state(trace, rep, s)) for s in steps}
    backward = {s: text_of(render_state(trace, rep, s)) for s in reversed(steps)}
    assert forward == backward


def test_state_hang_has_explanation_panel() -> None:
    trace = local_unused_send()
    rep = replay_of(trace)
    out = text_of(render_state(trace, rep, len(rep.events) - 1), width=120)
    assert "why it hangs" in out
    assert "SendRpcBackward#2" in out


def test_state_truncates_long_lists() -> None:
    trace = design_note_trace()
    rep = replay_of(trace)
    step = step_of(rep, "compute_dependencies", "worker0")
    out = text_of(render_state(trace, rep, step, max_items=1), width=140)
    assert "… " in out and "more" in out


def test_error_log_names_node_and_chain() -> None:
    fixtures = pytest.importorskip("replay_fixtures")
    trace = fixtures.fail_backward()
    rep = replay_of(trace)
    assert rep.outcome == "error"
    out = log_text(trace, rep)
    tail = out[out.index("outcome: ERROR"):]
    assert "AddBackward0" in tail and "boom" in tail
    assert "travelled: worker2 → worker1 → worker0" in tail
    final = text_of(render_state(trace, rep, len(rep.events) - 1), width=120)
    assert "why it failed" in final and "boom" in final
