"""The FAST-mode replay engine: event sequences, orders, outcomes, state_at, JSON."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest
import replay_fixtures as F

from distviz.replay import ACTIONS, Replay, replay, synthetic_trace
from distviz.replay.engine import FREED_MESSAGE
from distviz.replay.events import LazyEvent
from distviz.trace import Trace


def _actions(r: Replay) -> list[tuple[str, str | None, str | None]]:
    return [(e.action, e.worker, e.node) for e in r.events]


def _subsequence(needles: list[tuple[str, str | None, str | None]],
                 hay: list[tuple[str, str | None, str | None]]) -> bool:
    it = iter(hay)
    return all(any(h == n for h in it) for n in needles)


# -- the design note ---------------------------------------------------------------------------

def test_design_note_replays_as_the_note_narrates() -> None:
    r = replay(F.design_note())
    assert r.outcome == "completed"
    story = [
        ("pass_start", "worker0", None),
        ("compute_dependencies", "worker0", None),     # from the loss and send1
        ("call_start", "worker0", None),                # GraphRoot
        ("execute", "worker0", "worker0/SumBackward0#3"),
        ("execute", "worker0", "worker0/MulBackward0#2"),
        ("accumulate", "worker0", "worker0/AccumulateGrad(t4)"),
        ("execute", "worker0", "worker0/RecvRpcBackward#0"),   # recv2
        ("send_gradient", "worker0", "worker0/RecvRpcBackward#0"),
        ("receive_gradient", "worker1", "worker1/SendRpcBackward#2"),
        ("compute_dependencies", "worker1", None),      # on its first message
        ("execute", "worker1", "worker1/SendRpcBackward#2"),   # send2
        ("execute", "worker1", "worker1/AddBackward0#1"),
        ("execute", "worker1", "worker1/RecvRpcBackward#0"),   # recv1
        ("send_gradient", "worker1", "worker1/RecvRpcBackward#0"),
        ("receive_gradient", "worker0", "worker0/SendRpcBackward#1"),
        ("execute", "worker0", "worker0/SendRpcBackward#1"),   # send1
        ("accumulate", "worker0", "worker0/AccumulateGrad(t1)"),
        ("accumulate", "worker0", "worker0/AccumulateGrad(t2)"),
        ("worker_done", "worker0", None),
        ("pass_end", "worker0", None),
    ]
    assert _subsequence(story, _actions(r))
    deps = r.events[1].detail
    assert deps["roots"] == ["worker0/SumBackward0#3", "worker0/SendRpcBackward#1"]
    assert deps["outstanding"] == 2
    assert r.events[9].action == "receive_gradient" and r.events[9].message is not None
    assert r.events[9].message.first is True
    assert r.events[9].text == ("worker1 receives gradient for message 1:0 from worker0; first "
                                "message for context 1 here, so it computes dependencies")
    assert sorted(a.var for a in r.accumulated.values()) == ["t1", "t2", "t4"]
    assert r.order == [{
        "worker0": ["worker0/SumBackward0#3", "worker0/MulBackward0#2",
                    "worker0/AccumulateGrad(t4)", "worker0/RecvRpcBackward#0",
                    "worker0/SendRpcBackward#1", "worker0/AccumulateGrad(t1)",
                    "worker0/AccumulateGrad(t2)"],
        "worker1": ["worker1/SendRpcBackward#2", "worker1/AddBackward0#1",
                    "worker1/RecvRpcBackward#0"]}]


def test_design_note_ack_waits_for_worker1_done_and_its_own_message_acked() -> None:
    r = replay(F.design_note())
    acts = _actions(r)
    done1 = acts.index(("worker_done", "worker1", None))
    acks = [(k, e) for k, e in enumerate(r.events) if e.action == "ack"]
    assert [e.message.label for _, e in acks if e.message] == ["0:0", "1:0"]
    # worker1's first message is answered only after it is done and 0:0 was acknowledged
    assert done1 < acks[0][0] < acks[1][0]
    assert acks[1][1].worker == "worker1" and acks[1][1].detail["first"] is True


def test_execute_text_names_ready_nodes() -> None:
    r = replay(F.design_note())
    mul = next(e for e in r.events if e.node == "worker0/MulBackward0#2")
    assert mul.text == ("worker0 runs MulBackward0 (seq 2) in task 0; RecvRpcBackward and "
                        "AccumulateGrad(t4) become ready")
    assert mul.detail["decrements"] == [["worker0/RecvRpcBackward#0", 0],
                                        ["worker0/AccumulateGrad(t4)", 0]]
    assert mul.detail["queue"] == ["worker0/AccumulateGrad(t4)", "worker0/RecvRpcBackward#0"]
    assert mul.detail["queue_len"] == 2


def test_every_event_has_text_and_a_known_action() -> None:
    for make in (F.design_note, F.g1, F.nested, F.callback, F.unused_rpc_result,
                 F.fail_backward, F.crash_backward, F.missing_send):
        r = replay(make())
        assert [e.step for e in r.events] == list(range(len(r.events)))
        for e in r.events:
            assert e.action in ACTIONS
            assert e.text and "\n" not in e.text


# -- orders ----------------------------------------------------------------------------------

def test_g1_orders_match_internals_3_5() -> None:
    r = replay(F.g1())
    short = {w: [n.split("/", 1)[1] for n in ids] for w, ids in r.order[0].items()}
    assert short["worker0"] == [
        "AddBackward0#10", "MeanBackward0#9", "AddBackward0#8", "SumBackward0#7",
        "SumBackward0#6", "AddBackward0#5", "CosBackward0#4", "MulBackward0#3",
        "AccumulateGrad(t4)", "RecvRpcBackward#0", "SendRpcBackward#2", "ExpBackward0#1",
        "AccumulateGrad(t2)", "MulBackward0#0", "AccumulateGrad(t1)"]
    assert short["worker1"] == [
        "SendRpcBackward#6", "MulBackward0#5", "AddBackward0#4", "ExpBackward0#3",
        "SinBackward0#2", "MulBackward0#1", "RecvRpcBackward#0"]


def test_g1_nodes_run_in_the_call_of_their_last_decrement() -> None:
    r = replay(F.g1())
    call_of = {e.node: e.call for e in r.events if e.action in ("execute", "accumulate")}
    assert call_of["worker0/ExpBackward0#1"] == call_of["worker0/SendRpcBackward#2"] != 0
    assert call_of["worker0/RecvRpcBackward#0"] == 0


def test_stack_ties_follow_libstdcxx() -> None:
    r = replay(F.stack_tie(6))
    accs = [e.detail["var"] for e in r.events if e.action == "accumulate"]
    assert accs == ["t0", "t2", "t5", "t4", "t1", "t3"]
    r10 = replay(F.stack_tie(10))
    accs10 = [int(e.detail["var"][1:]) for e in r10.events if e.action == "accumulate"]
    assert accs10 == [0, 2, 6, 9, 8, 5, 7, 4, 1, 3]


def test_nested_three_workers_first_message_chain() -> None:
    r = replay(F.nested())
    assert r.outcome == "completed"
    firsts = [(e.worker, e.message.label) for e in r.events
              if e.action == "receive_gradient" and e.message and e.message.first]
    assert firsts == [("worker1", "1:1"), ("worker2", "2:0")]
    assert r.order[0]["worker2"] == ["worker2/SendRpcBackward#2", "worker2/AddBackward0#1",
                                     "worker2/RecvRpcBackward#0"]


def test_callback_worker0_receives_mid_pass_and_acks_at_once() -> None:
    r = replay(F.callback())
    assert r.outcome == "completed"
    recv0 = [e for e in r.events if e.action == "receive_gradient" and e.worker == "worker0"]
    assert [e.detail["first"] for e in recv0] == [False, False]
    acks = [e.message.label for e in r.events if e.action == "ack" and e.message]
    assert acks == ["0:1", "1:0", "0:0", "1:1"]
    assert r.accumulated["worker0/AccumulateGrad(t1)"].count == 1


def test_multi_root_seeds_every_root() -> None:
    r = replay(F.multi_root())
    assert r.outcome == "completed"
    root_call = next(e for e in r.events if e.action == "call_start")
    assert root_call.node is None and root_call.detail["reason"] == "graph_root"
    assert root_call.detail["pushed"] == ["worker0/SumBackward0#2", "worker0/SumBackward0#3"]
    assert r.accumulated["worker0/AccumulateGrad(t1)"].count == 1


# -- zero gradients ------------------------------------------------------------------------------

def test_unused_output_of_multi_output_rpc_sends_zeros_that_are_accumulated() -> None:
    r = replay(F.multi_output_unused())
    sent = next(e for e in r.events if e.action == "send_gradient" and e.worker == "worker0")
    assert sent.message is not None and sent.message.zero_slots == (1,)
    assert "zeros for unused output 1" in sent.text
    assert r.accumulated["worker1/AccumulateGrad(W2)"].zero is True
    assert r.accumulated["worker1/AccumulateGrad(W1)"].zero is False
    assert r.accumulated["worker0/AccumulateGrad(x)"].zero is False
    w2 = next(e for e in r.events if e.node == "worker1/AccumulateGrad(W2)")
    assert w2.detail["zero"] is True and "all zeros" in w2.text


# -- hangs ----------------------------------------------------------------------------------------

def test_unused_rpc_result_hangs_and_names_send_message_and_variable() -> None:
    r = replay(F.unused_rpc_result())
    assert r.outcome == "hang"
    assert r.events[-2].action == "hang" and r.events[-1].action == "pass_end"
    assert r.hang is not None
    (b,) = r.hang.blocked_sends
    assert (b.node, b.label, b.kind, b.var, b.line) == (
        "worker0/SendRpcBackward#0", "0:0", "unused", "unused", 7)
    assert b.recv == "worker1/RecvRpcBackward#0" and b.recv_worker == "worker1"
    assert "assigned to `unused`, is not used by the loss" in b.reason
    assert "message 0:0" in r.hang.summary and "`unused`" in r.hang.summary
    assert any("--mode smart" in f for f in r.hang.fixes)
    assert any("another root" in f for f in r.hang.fixes)


def test_remote_unused_send_blocks_the_first_message_chain() -> None:
    r = replay(F.remote_unused())
    assert r.outcome == "hang" and r.hang is not None
    kinds = {b.node: b.kind for b in r.hang.blocked_sends}
    assert kinds == {"worker0/SendRpcBackward#0": "blocked",
                     "worker1/SendRpcBackward#1": "unused"}
    # `tmp` lives in worker1's function: the initiator cannot pass it to backward
    assert r.hang.fixes[0].startswith("use `tmp` in what worker1's function returns"), \
        r.hang.fixes
    assert not any("another root" in f for f in r.hang.fixes), r.hang.fixes
    traced = F.remote_unused()
    traced.rpc_calls[1] = dataclasses.replace(traced.rpc_calls[1],
                                              site="model.py:12 in udf <- model.py:30 in serve")
    fixes = replay(traced).hang.fixes    # type: ignore[union-attr]
    assert fixes[0].startswith("use `tmp` in what `udf` returns on worker1"), fixes
    assert r.hang.chain[0].startswith("worker1 waits for a gradient")
    assert any("worker0 waits for worker1 to acknowledge message 1:1" in c
               for c in r.hang.chain)
    assert r.hang.chain[-1] == "so backward() on worker0 never returns"
    assert "`tmp`" in r.hang.summary


def test_no_grad_rpc_hang_is_explained() -> None:
    r = replay(F.no_grad_rpc())
    assert r.outcome == "hang" and r.hang is not None
    (b,) = r.hang.blocked_sends
    assert b.kind == "no_grad" and b.recv is None and b.worker == "worker1"
    assert "torch.no_grad()" in b.reason and "no RecvRpcBackward" in b.reason
    bw = {x.worker: x.waiting_for for x in r.hang.blocked_workers}
    assert bw["worker0"] == "the acknowledgement of message 1:1"


def test_hang_stops_later_passes() -> None:
    t = F.unused_rpc_result()
    t.passes.append(t.passes[0])
    r = replay(t)
    assert r.outcome == "hang" and len(r.order) == 1
    assert all(e.pass_index == 0 for e in r.events)


# -- errors ---------------------------------------------------------------------------------------

def test_fail_on_remote_worker_travels_the_first_message_chain() -> None:
    r = replay(F.fail_backward())
    assert r.outcome == "error" and r.error is not None
    assert r.error.message == "Error on Node 0: Error on Node 1: Error on Node 2: boom"
    assert (r.error.worker, r.error.node) == ("worker2", "worker2/AddBackward0#1")
    assert r.error.chain == ("worker2", "worker1", "worker0")
    errs = [(e.worker, e.detail["error"]) for e in r.events if e.action == "error"]
    assert errs == [("worker2", "Error on Node 2: boom"),
                    ("worker1", "Error on Node 1: Error on Node 2: boom"),
                    ("worker0", "Error on Node 0: Error on Node 1: Error on Node 2: boom")]
    assert r.events[-1].action == "pass_end" and r.events[-1].detail["outcome"] == "error"


def test_fail_on_initiator() -> None:
    t = F.design_note()
    for n in t.nodes:
        if n.id == "worker0/MulBackward0#2":
            n.fault = {"kind": "fail", "message": "boom"}
    r = replay(t)
    assert r.outcome == "error" and r.error is not None
    assert r.error.message == "Error on Node 0: boom"
    assert "worker0/AccumulateGrad(t4)" not in r.order[0]["worker0"]


def test_crash_fails_the_sender_of_its_first_message() -> None:
    r = replay(F.crash_backward())
    assert r.outcome == "error" and r.error is not None
    assert any(e.action == "crash" and e.worker == "worker2" for e in r.events)
    assert r.error.message.startswith("Error on Node 0: Error on Node 1: ")
    assert "worker2" in r.error.message and "died" in r.error.message


def test_missing_send_is_rejected_by_the_receiver() -> None:
    r = replay(F.missing_send())
    assert r.outcome == "error" and r.error is not None
    msg_id = (1 << 48) | 5
    assert r.error.message == (
        f"Error on Node 0: Could not find send function for autograd message id: {msg_id}")


def test_second_pass_without_retain_graph_errors_on_the_remote_worker() -> None:
    r = replay(F.two_passes(retain_first=False, saved_on="worker1"))
    assert r.outcome == "error" and r.error is not None and r.error.pass_index == 1
    assert r.error.message.startswith(
        "Error on Node 0: Error on Node 1: Trying to backward through the graph a second time")
    assert r.error.message.endswith(FREED_MESSAGE)


def test_second_pass_with_retain_graph_completes_and_accumulates_twice() -> None:
    r = replay(F.two_passes(retain_first=True))
    assert r.outcome == "completed" and len(r.order) == 2
    assert {a.count for a in r.accumulated.values()} == {2}
    assert [e.detail["count"] for e in r.events
            if e.node == "worker0/AccumulateGrad(t1)"] == [1, 2]


def test_retain_graph_reaches_remote_workers_through_their_first_message() -> None:
    r = replay(F.two_passes(retain_first=True))
    deps1 = [e.detail["retain_graph"] for e in r.events
             if e.action == "compute_dependencies" and e.pass_index == 0]
    assert deps1 == [True, True]
    s = r.state_at(next(e.step for e in r.events if e.action == "compute_dependencies"
                        and e.worker == "worker1"))
    assert s.workers["worker1"].keep_graph is True


# -- SMART mode ----------------------------------------------------------------------------------

def test_smart_completes_where_fast_hangs() -> None:
    for make in (F.unused_rpc_result, F.leftover_sends, F.no_grad_rpc, F.remote_unused):
        assert replay(make()).outcome == "hang"
        r = replay(make(), mode="smart")
        assert r.outcome == "completed", make.__name__
        assert r.to_json()["excluded_sends"][0]


def test_smart_excludes_only_sends_outside_the_lineage() -> None:
    r = replay(F.unused_rpc_result(), mode="smart")
    assert r.excluded == [["worker0/SendRpcBackward#0", "worker1/SendRpcBackward#2"]]
    assert replay(F.design_note(), mode="smart").excluded == [[]]


def test_unknown_mode_raises() -> None:
    with pytest.raises(ValueError, match="unknown replay mode"):
        replay(F.design_note(), mode="slow")


# -- state_at ------------------------------------------------------------------------------------

def _state_json(r: Replay, k: int) -> str:
    return json.dumps(r.state_at(k).to_json(), sort_keys=True)


@pytest.mark.parametrize("make", [F.design_note, F.callback, F.unused_rpc_result,
                                  lambda: F.two_passes(True), F.fail_backward])
def test_state_at_is_the_same_in_any_order(make: object) -> None:
    t = make()  # type: ignore[operator]
    steps = list(range(-1, len(replay(t).events)))
    forward = [_state_json(replay(t), k) for k in steps]   # fresh replay each: no cache
    r = replay(t)
    assert [_state_json(r, k) for k in steps] == forward
    assert [_state_json(r, k) for k in reversed(steps)] == forward[::-1]
    order = steps[:]
    random.Random(1).shuffle(order)
    assert {k: _state_json(r, k) for k in order} == dict(zip(steps, forward, strict=True))


def test_state_at_with_snapshots_on_a_big_replay() -> None:
    r = replay(synthetic_trace(3000, n_workers=4, seed=1))
    n = len(r.events)
    assert n > 1000
    ks = [n - 1, 5, n // 2, 300, n // 2 + 1, 0, -1]
    got = {k: _state_json(r, k) for k in ks}
    fresh = replay(synthetic_trace(3000, n_workers=4, seed=1))
    for k in sorted(ks):
        assert _state_json(fresh, k) == got[k]
    assert r._snap_keys  # snapshots were made


def test_engine_clone_copies_every_mutable_field() -> None:
    from dataclasses import fields

    from distviz.replay.engine import Engine
    from distviz.replay.graph import IndexedGraph

    for make in (F.nested, F.callback, F.fail_backward, F.unused_rpc_result):
        g = IndexedGraph(make())
        eng = Engine(g, "fast", emit=False)
        for _ in range(9):
            eng.advance()
        twin = eng.clone()
        for mine, copy in ((eng.s, twin.s), (eng.p, twin.p)):
            for f in fields(mine):
                a, b = getattr(mine, f.name), getattr(copy, f.name)
                assert a == b or f.name == "heap", f.name
                if hasattr(a, "copy"):          # mutable: the copy is its own object
                    assert a is not b, f"{type(mine).__name__}.{f.name} is shared"
        before = twin.state(twin.s.step, None).to_json()
        while not eng.s.finished:
            eng.advance()
        assert twin.state(twin.s.step, None).to_json() == before   # untouched by the original


def test_state_reflects_events() -> None:
    r = replay(F.design_note())
    s = r.state_at(-1)
    assert not any(w.initialized for w in s.workers.values()) and s.event is None
    k = next(e.step for e in r.events if e.action == "send_gradient")
    s = r.state_at(k)
    assert [m.label for m in s.in_flight] == ["1:0"]
    assert s.workers["worker0"].waiting_sends == ["worker0/SendRpcBackward#1"]
    assert s.workers["worker0"].deps == {"worker0/AccumulateGrad(t1)": 1,
                                         "worker0/AccumulateGrad(t2)": 1}
    assert s.workers["worker1"].pending_calls == ["worker1/SendRpcBackward#2"]
    last = r.state_at(len(r.events) - 1)
    assert all(w.done for w in last.workers.values())
    assert last.workers["worker0"].accumulated == {"worker0/AccumulateGrad(t4)": 1,
                                                   "worker0/AccumulateGrad(t1)": 1,
                                                   "worker0/AccumulateGrad(t2)": 1}
    with pytest.raises(IndexError):
        r.state_at(len(r.events))


def test_hang_state_shows_waiting_sends() -> None:
    r = replay(F.unused_rpc_result())
    s = r.state_at(len(r.events) - 1)
    assert s.workers["worker0"].waiting_sends == ["worker0/SendRpcBackward#0"]
    assert not s.workers["worker0"].done and not s.workers["worker1"].initialized


# -- output ------------------------------------------------------------------------------------

def test_to_json_round_trips_and_lazy_events_equal_eager_ones() -> None:
    r = replay(F.g1())
    out = r.to_json()
    assert json.loads(json.dumps(out)) == out
    assert out["counts"] == {"workers": 2, "nodes": 22, "messages": 2}
    assert set(out) >= {"outcome", "mode", "steps", "hang", "error", "order", "accumulated",
                        "counts"}
    lazy = next(e for e in r.events if isinstance(e, LazyEvent))
    text, detail = lazy.text, lazy.detail
    lazy.text = text  # materializes
    assert lazy.text == text and lazy.detail == detail


def test_summary_is_one_sentence() -> None:
    assert replay(F.design_note()).summary() == (
        "FAST replay of 1 pass on 2 workers completes in 28 steps (10 node runs, 2 gradient "
        "messages).")
    s = replay(F.unused_rpc_result()).summary()
    assert s.startswith("FAST replay of 1 pass on 2 workers hangs in pass 1: ")


def test_trace_without_passes_replays_to_nothing() -> None:
    t = F.design_note()
    t.passes = []
    r = replay(t)
    assert r.outcome == "completed" and r.events == [] and r.order == []
    assert r.state_at(-1).workers["worker0"].initialized is False


def test_root_not_on_initiator_is_a_trace_error() -> None:
    from distviz.errors import TraceError

    t = F.design_note()
    t.passes[0].roots = ["worker1/AddBackward0#1"]
    with pytest.raises(TraceError, match="not on the initiator"):
        replay(t)


# -- scale ---------------------------------------------------------------------------------------

def test_synthetic_10k_replays_and_completes() -> None:
    t = synthetic_trace(10_000)
    assert 9_000 <= len(t.nodes) <= 10_000
    r = replay(t)
    assert r.outcome == "completed"
    assert sum(len(v) for v in r.order[0].values()) == len(t.nodes)
    assert r.messages > 1000
    assert Trace.from_json(json.loads(t.dumps())).to_json() == t.to_json()


def test_synthetic_is_deterministic() -> None:
    a, b = synthetic_trace(2000, 3, seed=5), synthetic_trace(2000, 3, seed=5)
    assert a.dumps() == b.dumps()
    assert [e.to_json() for e in replay(a).events] == [e.to_json() for e in replay(b).events]
