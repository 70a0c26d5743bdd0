"""Recorded graphs from real RPC workers, checked against PyTorch's own expectations.

The expected shapes are written out by hand, as in PyTorch's ``dist_autograd_test.py``
(``_verify_graph_for_first_rpc_call``, ``_verify_graph_for_nested_rpc_call``) and §1.9 of the
internals notes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, pid_alive, run_cached
from guards import HANG_GUARD_S

from distviz.trace import Node, Trace, load

pytestmark = pytest.mark.rpc


def _by_worker(trace: Trace) -> dict[str, list[Node]]:
    out: dict[str, list[Node]] = {w: [] for w in trace.workers}
    for n in trace.nodes:
        out[n.worker].append(n)
    return out


def _one(nodes: list[Node], kind: str, msg_id: int | None = None) -> Node:
    found = [n for n in nodes if n.kind == kind and (msg_id is None or n.msg_id == msg_id)]
    assert len(found) == 1, (kind, msg_id, [n.id for n in nodes])
    return found[0]


def _targets(node: Node, trace: Trace) -> list[tuple[str, int]]:
    m = trace.node_map()
    return [(m[e[0]].name.rsplit("::", 1)[-1] + (f"({m[e[0]].var})" if m[e[0]].var else ""), e[1])
            for e in node.next if e is not None]


def test_design_note_graph_matches_pytorch() -> None:
    #   worker0:  loss=SumBackward0 -> MulBackward0 -> RecvRpcBackward(1:0)
    #                                              \-> AccumulateGrad(t4)
    #             SendRpcBackward(0:0) -> AccumulateGrad(t1), AccumulateGrad(t2)
    #   worker1:  SendRpcBackward(1:0) -> AddBackward0 -> RecvRpcBackward(0:0) (inputs 0 and 1)
    trace = run_cached("design_note").trace
    assert trace.workers == ["worker0", "worker1"]
    assert trace.initiator == "worker0"
    assert trace.context_id == 0  # (worker 0 << 48) | first context
    w = _by_worker(trace)
    m = trace.node_map()
    root = m[trace.passes[0].roots[0]]
    assert root.name == "SumBackward0" and root.vars == ["loss"]
    mul = m[root.next[0][0]]  # type: ignore[index]
    assert mul.name == "MulBackward0"
    assert _targets(mul, trace) == [("RecvRpcBackward", 0), ("AccumulateGrad(t4)", 0)]
    send0 = _one(w["worker0"], "send")
    assert send0.msg_id == (0 << 48) | 0
    assert _targets(send0, trace) == [("AccumulateGrad(t1)", 0), ("AccumulateGrad(t2)", 0)]
    recv0 = _one(w["worker0"], "recv")
    assert recv0.msg_id == (1 << 48) | 0 and recv0.vars == ["t3"]
    assert recv0.input_shapes == [[3, 3]]
    assert {n.var for n in w["worker0"] if n.kind == "accumulate_grad"} == {"t1", "t2", "t4"}
    assert all(n.seq == 2**64 - 1 for n in trace.nodes if n.kind == "accumulate_grad")
    assert len(w["worker0"]) == 7
    # worker1
    assert len(w["worker1"]) == 3
    send1 = _one(w["worker1"], "send")
    assert send1.msg_id == (1 << 48) | 0
    assert _targets(send1, trace) == [("AddBackward0", 0)]
    add = m[send1.next[0][0]]  # type: ignore[index]
    recv1 = _one(w["worker1"], "recv")
    assert add.next == [(recv1.id, 0), (recv1.id, 1)]
    assert recv1.msg_id == 0 and recv1.input_shapes == [[3, 3], [3, 3]]
    # pairs: every message id has both ends, and the recv sends to worker msg_id >> 48
    pairs = trace.pairs()
    assert [(p["msg_id"], p["send"], p["recv"]) for p in pairs] == [
        (0, send0.id, recv1.id), (1 << 48, send1.id, recv0.id)]
    assert trace.known_workers == {"worker0": ["worker1"], "worker1": ["worker0"]}
    # sequence numbers: the send and ops on worker0 come from the user thread in forward order
    assert send0.seq < mul.seq < root.seq
    # the callee's recv < op < response send (one RPC server thread)
    assert recv1.seq < add.seq < send1.seq


def test_nested_graph_matches_pytorch() -> None:
    #   worker0: send(0:0) -> AccGrad(t1), AccGrad(t2); recv(1:1) = t3.grad_fn
    #   worker1: send(1:0) -> (Recv(0:0), 0), (Recv(0:0), 1)   (forwards t1, t2 to worker2)
    #            send(1:1) -> MulBackward0 -> (Recv(2:0), 0), (Recv(0:0), 1)
    #   worker2: send(2:0) -> AddBackward0 -> (Recv(1:0), 0), (Recv(1:0), 1)
    trace = run_cached("nested").trace
    w = _by_worker(trace)
    m = trace.node_map()
    assert _targets(_one(w["worker0"], "send"), trace) == [("AccumulateGrad(t1)", 0),
                                                           ("AccumulateGrad(t2)", 0)]
    assert _one(w["worker0"], "recv").msg_id == (1 << 48) | 1
    fwd = _one(w["worker1"], "send", (1 << 48) | 0)
    resp = _one(w["worker1"], "send", (1 << 48) | 1)
    r00 = _one(w["worker1"], "recv", 0)
    assert fwd.next == [(r00.id, 0), (r00.id, 1)]
    mul = m[resp.next[0][0]]  # type: ignore[index]
    assert mul.name == "MulBackward0"
    r20 = _one(w["worker1"], "recv", (2 << 48) | 0)
    assert mul.next == [(r20.id, 0), (r00.id, 1)]
    send2 = _one(w["worker2"], "send", (2 << 48) | 0)
    add = m[send2.next[0][0]]  # type: ignore[index]
    r10 = _one(w["worker2"], "recv", (1 << 48) | 0)
    assert add.name == "AddBackward0" and add.next == [(r10.id, 0), (r10.id, 1)]
    assert trace.known_workers["worker1"] == ["worker0", "worker2"]


def test_callback_graph_has_two_sends_and_two_recvs_on_the_caller() -> None:
    #   worker0: send(0:0) -> AccGrad(t1), AccGrad(t2); send(0:1) -> MulBackward0 -> Recv(1:0) x2
    #            recv(1:1) = t3.grad_fn
    #   worker1: send(1:0) -> AddBackward0 -> Recv(0:0) x2 and (Recv(0:0), 1)
    #            send(1:1) -> Recv(0:1)
    trace = run_cached("callback").trace
    w = _by_worker(trace)
    m = trace.node_map()
    sends0 = sorted((n for n in w["worker0"] if n.kind == "send"), key=lambda n: n.msg_id or 0)
    recvs0 = sorted((n for n in w["worker0"] if n.kind == "recv"), key=lambda n: n.msg_id or 0)
    assert [n.msg_id for n in sends0] == [0, 1]
    assert [n.msg_id for n in recvs0] == [(1 << 48) | 0, (1 << 48) | 1]
    assert recvs0[1].vars == ["t3"]
    mul = m[sends0[1].next[0][0]]  # type: ignore[index]
    assert mul.name == "MulBackward0" and mul.next == [(recvs0[0].id, 0), (recvs0[0].id, 1)]
    s10 = _one(w["worker1"], "send", (1 << 48) | 0)
    r00 = _one(w["worker1"], "recv", 0)
    add = m[s10.next[0][0]]  # type: ignore[index]
    assert add.name == "AddBackward0" and add.next == [(r00.id, 0), (r00.id, 1)]
    assert s10.next[1] == (r00.id, 1)  # t2 is sent on as is: the edge goes to the recv directly
    s11 = _one(w["worker1"], "send", (1 << 48) | 1)
    assert s11.next == [(_one(w["worker1"], "recv", 1).id, 0)]


def test_builtin_rpc_is_a_real_builtin_call() -> None:
    # rpc_sync("worker1", torch.add, ...) is a builtin RPC: the callee runs AddBackward0 directly
    # on its recv; no Python function frame is involved.
    trace = run_cached("builtin_rpc").trace
    calls = [c for c in trace.rpc_calls if c.builtin]
    assert calls and calls[0].func == "torch.add"
    w1 = [n for n in trace.nodes if n.worker == "worker1"]
    send = _one(w1, "send")
    assert trace.node_map()[send.next[0][0]].name == "AddBackward0"  # type: ignore[index]


def test_mixed_requires_grad_sends_only_tensors_that_require_grad() -> None:
    trace = run_cached("mixed_requires_grad").trace
    w0 = [n for n in trace.nodes if n.worker == "worker0"]
    send = _one(w0, "send")
    assert len(send.next) == 1
    recv1 = [n for n in trace.nodes if n.worker == "worker1" and n.kind == "recv"]
    assert len(recv1) == 1 and len(recv1[0].input_shapes or []) == 1


def test_parameter_server_leaf_is_named_after_its_worker() -> None:
    trace = run_cached("param_server").trace
    leaves = {n.var: n for n in trace.nodes if n.kind == "accumulate_grad"}
    assert "ps.w" in leaves and leaves["ps.w"].worker == "ps"
    assert leaves["ps.w"].id == "ps/AccumulateGrad(ps.w)"


def test_message_ids_follow_sender_and_counter() -> None:
    for name in ("design_note", "nested", "callback", "fanout", "remote"):
        trace = run_cached(name).trace
        for n in trace.nodes:
            if n.kind == "send" and n.msg_id is not None:
                pair = [p for p in trace.pairs() if p["msg_id"] == n.msg_id][0]
                if pair["recv"] is not None:
                    # the recv sends its gradient to worker msg_id >> 48, which holds the send
                    assert trace.workers[n.msg_id >> 48] == n.worker


def test_node_ids_are_stable_between_runs() -> None:
    a = run_cached("nested").trace
    b = run_cached("nested", hang_timeout=4.0).trace  # a second real run
    assert [n.id for n in a.nodes] == [n.id for n in b.nodes]
    assert [n.next for n in a.nodes] == [n.next for n in b.nodes]


def test_record_api_on_a_hand_written_script_gives_the_same_shape(tmp_path: Path) -> None:
    out = tmp_path / "api.json"
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "scripts" / "design_note_api.py"),
                           str(out)], capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr[-2000:]
    api = load(out)
    ref = run_cached("design_note").trace

    def shape(t: Trace) -> list[tuple[str, str, int | None, list[tuple[str, int] | None],
                                      str | None]]:
        return sorted((n.id, n.kind, n.msg_id, n.next, n.var) for n in t.nodes)
    assert shape(api) == shape(ref)
    assert api.passes[0].roots == ref.passes[0].roots
    assert json.loads(api.dumps())["schema_version"] == 1
    # a second iteration in a new context records the same graph (sequence numbers and ids
    # move on: the counters are per thread and per worker)
    again = load(str(out) + ".2")
    assert again.context_id == 1

    def names(t: Trace) -> list[tuple[str, str, str | None, list[str]]]:
        m = t.node_map()
        return sorted((n.worker, n.name, n.var, [m[e[0]].name for e in n.next if e])
                      for n in t.nodes)
    assert names(again) == names(api)
    assert sorted(n.msg_id for n in again.nodes if n.msg_id is not None) == [
        1, 1, (1 << 48) | 1, (1 << 48) | 1]


def test_workers_are_gone_after_a_run() -> None:
    result = run_cached("design_note")
    assert result.pids and not any(pid_alive(p) for p in result.pids.values())
