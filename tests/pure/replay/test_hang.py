"""Hang diagnosis (``distviz.replay.hang`` and ``rpc_calls``), on traces the recorder wrote.

``tests/traces/`` holds traces recorded with ``distviz run scenarios/NAME.yaml --confirm-hang
-o ...`` (PyTorch's real backward hung too): the diagnosis must work on what the recorder really
writes (an RPC under ``torch.no_grad()`` has no message ids), not only on hand-built fixtures.
The ``rpc`` tests run the same scenarios on real workers.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import replay_fixtures as F
from builders.hang import _check_no_grad, _check_overwritten, _hang

from distviz.trace import load

TRACES = Path(__file__).parents[2] / "traces"


# -- an RPC under torch.no_grad() -------------------------------------------------------------------

def test_recorded_no_grad_rpc_has_no_message_ids() -> None:
    trace = load(TRACES / "no_grad_rpc.json")
    call = trace.rpc_calls[0]
    assert (call.grad_enabled, call.line, call.result_var, call.msg_ids) == (False, 12, "side", [])
    assert trace.real is not None and trace.real["outcome"] == "hang"


def test_no_grad_hang_names_the_caller_the_line_and_the_variable() -> None:
    _check_no_grad(_hang(load(TRACES / "no_grad_rpc.json")))


def test_no_grad_hang_without_the_call_log_still_names_the_caller() -> None:
    trace = load(TRACES / "no_grad_rpc.json")
    trace = replace(trace, rpc_calls=[])
    (b,) = _hang(trace).blocked_sends
    assert b.kind == "no_recv"
    assert "(the caller worker0 attached none)" in b.reason


def test_no_grad_rpcs_in_a_loop_each_find_their_own_call() -> None:
    hang = _hang(F.no_grad_loop())
    found = [(b.label, b.kind, b.call, b.line) for b in hang.blocked_sends]
    assert found == [("1:1", "no_grad", 1, 6), ("1:2", "no_grad", 2, 6)]
    assert hang.blocked_sends[0].reason.startswith("the 1st of 2 RPCs rpc_sync(g) at line 6")
    assert hang.blocked_sends[1].reason.startswith("the 2nd of 2 RPCs rpc_sync(g) at line 6")


# -- a result overwritten in a loop -------------------------------------------------------------


def test_result_overwritten_in_a_loop_says_which_iteration() -> None:
    trace = load(TRACES / "overwritten_result.json")
    assert [c.line for c in trace.rpc_calls] == [12, 12, 12]
    _check_overwritten(_hang(trace))


def test_result_overwritten_by_another_line_names_that_call() -> None:
    b = F.TraceBuilder(2)
    t1 = b.acc(0, "t1")
    c0 = b.rpc(0, 1, "rpc_sync", "f", [F.M(0, 0), F.M(1, 0)], line=5, result_var="t3")
    c1 = b.rpc(0, 1, "rpc_sync", "g", [F.M(0, 1), F.M(1, 1)], line=7, result_var="t3")
    b.send(0, F.M(0, 0), [t1], seq=0, call=c0)
    b.send(0, F.M(0, 1), [t1], seq=1, call=c1)
    b.recv(0, F.M(1, 0), seq=0, call=c0)
    r1 = b.recv(0, F.M(1, 1), seq=1, vars=["t3"], call=c1)
    loss = b.op(0, "SumBackward0", 2, [r1])
    for k, call in ((0, c0), (1, c1)):
        r = b.recv(1, F.M(0, k), seq=0, call=call)
        b.send(1, F.M(1, k), [b.op(1, "MulBackward0", 1, [r])], seq=2, call=call)
    b.backward([loss], root_vars=["loss"])
    (first, *_rest) = _hang(b.build()).blocked_sends
    assert first.reason == ("the result of rpc_sync(f) at line 5, assigned to `t3`, was "
                            "overwritten by the result of rpc_sync(g) at line 7, so the loss "
                            "(`loss`) never uses it")


def test_a_result_still_held_by_its_variable_is_unused_not_overwritten() -> None:
    hang = _hang(F.unused_rpc_result())
    assert "is not used by the loss" in hang.blocked_sends[0].reason
    assert any("use `unused` in the loss" in f for f in hang.fixes)


# -- the same scenarios on real workers ---------------------------------------------------------
