"""FAST-mode surprises, one test each, pinned with what distviz reports for them.

Each test names the surprise; the assertions are what a user sees from ``distviz replay``.
"""

from __future__ import annotations

import replay_fixtures as F

from distviz.replay import replay


def test_unused_rpc_result_hangs_the_backward() -> None:
    r = replay(F.unused_rpc_result())
    assert r.outcome == "hang"
    assert r.hang is not None
    assert r.hang.summary == (
        "worker0's SendRpcBackward for message 0:0 never gets a gradient: the result of "
        "rpc_sync(torch.add) at line 7, assigned to `unused`, is not used by the loss (`loss`)")


def test_rpc_under_no_grad_leaves_an_orphan_send_that_hangs() -> None:
    r = replay(F.no_grad_rpc())
    assert r.outcome == "hang" and r.hang is not None
    assert r.hang.blocked_sends[0].kind == "no_grad"
    assert "made under torch.no_grad()" in r.hang.summary
    assert any("torch.no_grad()" in f for f in r.hang.fixes)


def test_leftover_sends_from_an_earlier_forward_in_the_same_context_hang() -> None:
    r = replay(F.leftover_sends())
    assert r.outcome == "hang" and r.hang is not None
    assert {b.var for b in r.hang.blocked_sends} == {"r1"}
    assert any("new dist_autograd.context()" in f for f in r.hang.fixes)


def test_unused_outputs_of_a_multi_output_rpc_get_zero_gradients_that_do_appear() -> None:
    r = replay(F.multi_output_unused())
    assert r.outcome == "completed"
    assert r.accumulated["worker1/AccumulateGrad(W2)"].to_json() == {
        "count": 1, "zero": True, "var": "W2", "worker": "worker1"}


def test_errors_travel_only_the_first_message_chain() -> None:
    r = replay(F.fail_backward())
    assert r.error is not None
    assert r.error.message == "Error on Node 0: Error on Node 1: Error on Node 2: boom"
    assert r.error.chain == ("worker2", "worker1", "worker0")
    assert r.error.unnotified == ()


def test_error_leaves_workers_off_the_chain_uninformed() -> None:
    # worker0 calls worker1 (which also holds an unused send) and worker2 (which fails):
    # the error reaches worker0 along worker2's first-message chain; worker1 is never told.
    b = F.TraceBuilder(3)
    t1 = b.acc(0, "t1")
    b.send(0, F.M(0, 0), [t1], seq=0)
    b.send(0, F.M(0, 1), [t1], seq=1)
    ra = b.recv(0, F.M(1, 0), seq=0)
    rb = b.recv(0, F.M(2, 0), seq=1)
    loss = b.op(0, "AddBackward0", 2, [ra, rb])
    r1 = b.recv(1, F.M(0, 0), seq=0)
    b.send(1, F.M(1, 0), [b.op(1, "CosBackward0", 1, [r1])], seq=2)
    b.send(1, F.M(1, 1), [r1], seq=3)                        # unused: worker1 never finishes
    r2 = b.recv(2, F.M(0, 1), seq=0)
    b.send(2, F.M(2, 0), [b.op(2, "SinBackward0", 1, [r2],
                               fault={"kind": "fail", "message": "boom"})], seq=2)
    b.backward([loss])
    r = replay(b.build())
    assert r.error is not None
    assert r.error.message == "Error on Node 0: Error on Node 2: boom"
    assert r.error.chain == ("worker2", "worker0")
    assert r.error.unnotified == ("worker1",)


def test_second_backward_without_retain_graph_errors() -> None:
    r = replay(F.two_passes(retain_first=False, saved_on="worker0"))
    assert r.outcome == "error" and r.error is not None
    assert r.error.message.startswith(
        "Error on Node 0: Trying to backward through the graph a second time (or directly "
        "access saved tensors after they have already been freed).")


def test_passes_accumulate_in_one_context() -> None:
    r = replay(F.two_passes(retain_first=True))
    assert r.outcome == "completed"
    assert r.accumulated["worker0/AccumulateGrad(t1)"].count == 2
    assert "(2nd time)" in [e.text for e in r.events
                            if e.node == "worker0/AccumulateGrad(t1)"][-1]


def test_accumulate_grad_runs_before_everything_else_ready() -> None:
    r = replay(F.g1())
    w0 = r.order[0]["worker0"]
    # t4's AccumulateGrad and the recv become ready together; the AccumulateGrad goes first
    assert w0.index("worker0/AccumulateGrad(t4)") + 1 == w0.index("worker0/RecvRpcBackward#0")
    # t2's AccumulateGrad jumps ahead of MulBackward0#0 that was ready before it
    assert w0.index("worker0/AccumulateGrad(t2)") < w0.index("worker0/MulBackward0#0")


def test_ties_are_not_fifo() -> None:
    r = replay(F.stack_tie(6))
    order = [e.detail["var"] for e in r.events if e.action == "accumulate"]
    assert order != [f"t{k}" for k in range(6)]
    assert order == ["t0", "t2", "t5", "t4", "t1", "t3"]
