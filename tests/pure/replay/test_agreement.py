"""The replay against PyTorch's real run (``trace.real``), with fake real runs: each check of
``compare``, and the sentence the one judge (``distviz.judge.verdict.judge``) words from it."""

from __future__ import annotations

import replay_fixtures as F
from builders.agreement import _real_from_replay

from distviz.judge.agreement import compare
from distviz.judge.verdict import judge
from distviz.replay import replay


def test_no_real_run_is_skipped() -> None:
    t = F.design_note()
    a = compare(t, replay(t))
    assert judge(t, replay(t)).agreement.status == "not compared"
    assert all(a.check(k) is None for k in ("outcome", "order", "executed", "gradients"))


def test_matching_real_run() -> None:
    t = F.design_note()
    t.real = _real_from_replay(t)
    t.reference = {"comparable": True, "ok": True}
    a = compare(t, replay(t))
    assert (a.outcome, a.order, a.executed, a.gradients, a.leaves,
            a.exact) == (True, True, True, True, True, True)
    assert judge(t, replay(t)).text == (
        "replay matches PyTorch on all 2 workers (10 nodes, 2 messages); "
        "gradients equal the single-process reference")
    assert a.mismatches == ()


def test_swapped_order_is_reported_with_its_first_difference() -> None:
    t = F.stack_tie(6)
    real = _real_from_replay(t)
    ev = real["events"]
    ev[2]["node"], ev[3]["node"] = ev[3]["node"], ev[2]["node"]   # FIFO-ish guess
    t.real = real
    a = compare(t, replay(t))
    assert a.order is False and a.executed is True and a.outcome is True
    (m,) = a.mismatches
    assert (m.worker, m.pass_index, m.first_difference_index) == ("worker0", 0, 2)
    assert judge(t, replay(t)).text.startswith(
        "replay differs from PyTorch: on worker0 in pass 1 the order differs at position 2")


def test_more_interop_threads_leave_the_order_to_the_rules() -> None:
    t = F.g1()
    real = _real_from_replay(t, interop=2)
    real["events"].reverse()
    t.real = real
    a = compare(t, replay(t))
    assert a.exact is False and a.order is False
    v = judge(t, replay(t))     # the order is not compared; the legality check decides
    assert v.status == "agrees" and v.text.endswith(
        "; with 2 inter-op threads each worker's observed order is one that FAST mode's rules "
        "allow")
    t.real = _real_from_replay(t, interop=2)
    a = compare(t, replay(t))
    assert a.order is True


def test_real_hang_compares_what_ran_before_it() -> None:
    t = F.unused_rpc_result()
    t.real = _real_from_replay(t)
    assert t.real["outcome"] == "hang"
    a = compare(t, replay(t))
    assert a.outcome is True and a.order is True


def test_outcome_mismatch_and_missing_node() -> None:
    t = F.design_note()
    real = _real_from_replay(t, outcome="hang")
    real["events"] = [e for e in real["events"] if e["node"] != "worker0/AccumulateGrad(t2)"]
    real["gradients"].pop("worker0/AccumulateGrad(t2)")
    t.real = real
    a = compare(t, replay(t))
    assert a.outcome is False and a.executed is False


def test_real_error_compares_common_prefix() -> None:
    t = F.fail_backward()
    real = _real_from_replay(t)
    real["error"] = "Error on Node 0: Error on Node 1: Error on Node 2: boom"
    t.real = real
    a = compare(t, replay(t))
    assert a.outcome is True and a.order is True


def test_leaf_set_difference_is_reported() -> None:
    t = F.design_note()
    real = _real_from_replay(t)
    real["gradients"].pop("worker0/AccumulateGrad(t2)")
    t.real = real
    a = compare(t, replay(t))
    v = judge(t, replay(t))
    assert a.leaves is False and v.agreement.status == "differs"
    assert "the set of leaves with gradients differs" in v.text


def test_reference_gradient_mismatch_is_reported() -> None:
    t = F.design_note()
    t.real = _real_from_replay(t)
    t.reference = {"comparable": True, "ok": False}
    a = compare(t, replay(t))
    assert a.gradients is False
    assert "differ from the single-process reference" in judge(t, replay(t)).text


def test_racing_messages_are_replayed_in_their_observed_arrival_order() -> None:
    # worker0 gets its three gradients from three workers; PyTorch saw them arrive 2, 3, 1
    t = F.fanout()
    fifo = replay(t)
    order0 = fifo.order[0]["worker0"]
    sends = [n for n in order0 if "SendRpcBackward" in n]
    assert len(sends) == 3
    observed = [sends[1], sends[2], sends[0]]
    real = _real_from_replay(t)
    # x's AccumulateGrad runs in the call of whichever send comes last
    head = order0[:order0.index(sends[0])]
    new0 = iter(head + observed + ["worker0/AccumulateGrad(x)"])
    for e in real["events"]:
        if e["worker"] == "worker0":
            e["node"] = next(new0)
    t.real = real
    a = compare(t, fifo)
    assert a.fifo_order is False
    assert a.order is True and a.arrival_differs == ("worker0",)
    assert "race on its RPC agent threads" in judge(t, fifo).text
    again = replay(t, arrival={(0, "worker0"): observed})
    assert [n for n in again.order[0]["worker0"] if "Send" in n] == observed


def test_a_real_model_difference_is_not_excused_by_arrival_order() -> None:
    t = F.stack_tie(6)
    real = _real_from_replay(t)
    ev = real["events"]
    ev[2]["node"], ev[3]["node"] = ev[3]["node"], ev[2]["node"]
    t.real = real
    a = compare(t, replay(t))
    assert a.order is False and a.arrival_differs == ()


def test_smart_report_says_what_each_leaf_would_receive() -> None:
    from distviz.judge.agreement import smart_report

    t = F.unused_rpc_result()
    t.reference = {"comparable": False, "ok": None, "gradients": {
        "t1": {"shape": [2, 2], "sum": 4.0, "norm": 2.0}, "t2": {"shape": [2, 2], "sum": 8.0,
                                                              "norm": 4.0}}}
    fast, smart = replay(t), replay(t, mode="smart")
    report = smart_report(t, smart, fast)
    assert (report.fast_outcome, report.smart_outcome) == ("hang", "completed")
    assert report.excluded
    would = report.leaves["t1"].would_receive
    assert would is not None and would["sum"] == 4.0
    assert report.same_leaves is True
    assert "t1 (sum 4)" in report.text and "t2 (sum 8)" in report.text
