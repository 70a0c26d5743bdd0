"""What tests/pure/replay/test_hang.py and tests/e2e/test_hang_rpc.py share."""

from __future__ import annotations

from distviz.replay import Hang, replay
from distviz.trace import Trace


def _hang(trace: Trace) -> Hang:
    r = replay(trace)
    assert r.outcome == "hang" and r.hang is not None
    return r.hang


def _check_no_grad(hang: Hang) -> None:
    (b,) = hang.blocked_sends
    assert (b.worker, b.label, b.kind, b.call, b.line, b.var) == (
        "worker1", "1:0", "no_grad", 0, 12, "side")
    assert b.reason == (
        "the RPC rpc_sync(my_add) at line 12 from worker0, assigned to `side`, was made under "
        "torch.no_grad(), so worker0 attached no RecvRpcBackward for its result and nothing "
        "will ever send a gradient for message 1:0")
    assert "rank 1" not in hang.summary and "worker1 attached" not in hang.summary
    assert any("torch.no_grad()" in f for f in hang.fixes)


def _check_overwritten(hang: Hang) -> None:
    reasons = {(b.worker, b.label): b.reason for b in hang.blocked_sends}
    assert set(reasons) == {("worker0", "0:0"), ("worker0", "0:1"),
                            ("worker1", "1:0"), ("worker1", "1:1")}
    assert reasons[("worker0", "0:0")] == (
        "the 1st of 3 results of rpc_sync(my_add) at line 12, assigned to `t3`, was overwritten "
        "by the 2nd, so the loss (`loss`) never uses it")
    assert reasons[("worker1", "1:1")] == (
        "the 2nd of 3 results of rpc_sync(my_add) at line 12, assigned to `t3`, was overwritten "
        "by the 3rd, so the loss (`loss`) never uses it")
    assert all("is not used" not in r for r in reasons.values())
    assert not any("use `t3` in the loss" in f or "t3.sum()" in f for f in hang.fixes)
    assert hang.fixes[0].startswith("keep every result of the RPC at line 12 instead of "
                                    "overwriting `t3`")
    assert all("overwritten by the" in r.reason for r in hang.unreachable_recvs)
