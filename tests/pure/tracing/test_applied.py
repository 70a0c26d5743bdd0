"""Gradients a distributed backward left in its context that a local optimizer never applies,
the tallies of missing and all-zero gradients, and ``--strict`` (pure, milliseconds): what one
step finds (``distviz.tracing.shared.applied_facts``), the notes' words, the kinds that fail a
strict run (``journal.fails_strict``), ``distviz trace --strict``'s exit status and the pytest
plugin's failed test. The hook itself runs in ``tests/e2e/test_applied_rpc.py``."""

from __future__ import annotations

from typing import Any

import pytest

from distviz.limits import EXIT_BACKWARD_ERROR, EXIT_GRADIENT, EXIT_OK, ExitCode
from distviz.tracing.launcher import run_summary
from distviz.tracing.launcher.command import Finished
from distviz.tracing.pytest_plugin import Findings, strict_failure
from distviz.tracing.shared import applied_facts as facts
from distviz.tracing.shared import journal
from distviz.tracing.shared.applied_facts import GONE, Held, Tally, judge

A, B, C = 1, 2, 3
HELD = {A: Held(7), B: Held(7)}


def test_a_step_over_parameters_without_grad_does_not_apply_the_contexts_gradients() -> None:
    step = judge([(A, None), (B, None), (C, None)], HELD, None)
    assert step == facts.Step([A, B], 2, 7)     # C: the context holds none for it


def test_a_grad_written_since_the_last_step_is_applied() -> None:
    # copied from get_gradients (a new tensor), or a local backward (a new version)
    before = {A: (100, 0), B: (200, 3)}
    assert judge([(A, (101, 0)), (B, (200, 4))], HELD, before).not_applied == []


def test_a_grad_unchanged_since_the_last_step_is_stale() -> None:
    before = {A: (100, 0), B: (200, 3)}
    step = judge([(A, (100, 0)), (B, (201, 0))], HELD, before)
    assert (step.not_applied, step.none_count) == ([A], 0)


def test_the_first_step_cannot_tell_a_stale_grad_and_a_freed_one_is_not_stale() -> None:
    assert judge([(A, (100, 0))], HELD, None).not_applied == []
    assert judge([(A, (100, 0))], HELD, {A: GONE}).not_applied == []


def test_the_note_names_the_line_the_call_the_parameters_and_both_fixes() -> None:
    text = facts.not_applied_text("ps.py:59 in ps_step", "OPT.step()", "SGD",
                                  ["ps.fc.weight", "ps.fc.bias"], 2, 2, "context id 0")
    assert text.startswith("ps.py:59 in ps_step: `OPT.step()` steps a local SGD over 2 "
                           "parameters whose gradient a distributed backward left in context "
                           "id 0 (ps.fc.weight, ps.fc.bias), but they have no .grad")
    assert "DistributedOptimizer" in text and "get_gradients(context_id)" in text
    one = facts.not_applied_text(None, None, "Adam", ["w"], 0, 1, "context 2 (id 1)")
    assert one.startswith("Adam.step() steps a local Adam over 1 parameter whose")
    assert "its .grad is stale (unchanged since the previous step)" in one
    mixed = facts.not_applied_text(None, None, "SGD", ["a", "b", "c"], 1, 3, "context 1")
    assert "1 have no .grad and 2 a stale one" in mixed


def test_many_parameters_are_shown_up_to_a_limit() -> None:
    names = [f"p{k}" for k in range(11)]
    assert facts.shown(names) == "p0, p1, p2, p3, p4, p5, p6, p7, 3 more"


def _names(ids: list[int]) -> list[str]:
    return [f"ps.p{i}" for i in ids]


def test_the_tally_names_the_parameters_no_context_ever_held() -> None:
    t = Tally()
    for _ in range(3):     # A and B held every time, C never (and no .grad)
        t.count({A: Held(1), B: Held(1)}, [A, B, C], False, _names)
    found = t.finding()
    assert found is not None and found.startswith(
        "1 parameter of a local optimizer got no gradient in any distributed backward "
        "(ps.p3): dist_autograd.get_gradients(context_id) on its owner held none for it in "
        "any of the 3 steps that asked, so the optimizer never changes it")
    assert len(t.recs) == 3       # one record per parameter, whatever the steps
    t.count({C: Held(2)}, [A, B, C], False, _names)      # held once: never named
    assert t.finding() is None


def test_a_local_training_is_not_counted() -> None:
    """No context holds any of the optimizer's parameters, and they have a .grad (a local
    backward wrote it): not a distributed training's step."""
    t = Tally()
    t.count({}, [A, B], False, _names)
    assert t.recs == {} and t.finding() is None
    t.count({}, [A, B], True, _names)       # a context lives, and nothing has a .grad
    assert (t.finding() or "").startswith("2 parameters of a local optimizer got no gradient")


KINDS_THAT_FAIL = {journal.NO_GRADIENT, journal.ZERO_GRADIENT, journal.GRADS_LEFT,
                   journal.LOCAL_BACKWARD, journal.NOT_APPLIED, journal.CUT}


@pytest.mark.parametrize("kind", list(journal.EventKind))
def test_strict_fails_on_a_gradient_gone_wrong_only(kind: journal.EventKind) -> None:
    assert journal.fails_strict(kind) == (kind in KINDS_THAT_FAIL)


def _note(kind: journal.EventKind, test: str | None = None) -> journal.Event:
    return journal.Event(kind=kind, pid=1, worker="ps", message=f"a {kind} note", test=test)


def _entry(code: ExitCode) -> run_summary.Entry:
    row = journal.ContextRow(
        file="t.ctx1.trace.json", initiator="trainer", index=1, context_id=1, pid=1,
        workers=["trainer", "ps"], nodes=5, messages=1, outcome="completed",
        predicted="completed", real=journal.RealState.COMPLETED,
        agreement=journal.VerdictStatus.AGREES, exit_code=int(code))
    return run_summary.Entry(row=row, change="first recorded")


def _finished(returncode: int, *events: journal.Event) -> Finished:
    return Finished(returncode, False, False, 0, list(events))


def test_strict_turns_a_successful_run_with_a_gradient_note_into_status_9() -> None:
    run = _finished(0, _note(journal.NOT_APPLIED))
    found = [_entry(EXIT_OK)]
    assert run_summary.exit_code(run, found) == EXIT_OK            # the default: PyTorch's
    assert run_summary.exit_code(run, found, strict=True) == EXIT_GRADIENT == 9
    notes = run_summary.notes(run, found, strict=True)
    assert notes[0] == "ps: a not_applied note"
    assert notes[-1].startswith("--strict: 1 note above says a gradient went wrong; distviz "
                                "exits with status 9")
    assert not any(n.startswith("--strict") for n in run_summary.notes(run, found))


def test_strict_keeps_the_programs_failure_and_a_worse_verdict() -> None:
    note = _note(journal.NO_GRADIENT)
    assert run_summary.exit_code(_finished(3, note), [_entry(EXIT_OK)], strict=True) == 3
    assert run_summary.exit_code(_finished(0, note), [_entry(EXIT_BACKWARD_ERROR)],
                             strict=True) == EXIT_BACKWARD_ERROR


def test_strict_ignores_notes_that_are_not_about_a_gradient() -> None:
    run = _finished(0, _note(journal.EventKind.NOT_RECORDED), _note(journal.SCRIPTED))
    assert run_summary.exit_code(run, [_entry(EXIT_OK)], strict=True) == EXIT_OK


class _Report:
    """What ``strict_failure`` reads and writes of pytest's ``TestReport``."""

    def __init__(self, outcome: str) -> None:
        self.outcome, self.longrepr = outcome, None

    @property
    def passed(self) -> bool:
        return self.outcome == "passed"


def test_the_plugin_fails_a_passed_test_whose_run_logged_a_gradient_note() -> None:
    findings = Findings.of([_note(journal.ZERO_GRADIENT, "t.py::a"),
                            _note(journal.EventKind.NOT_RECORDED, "t.py::b")])
    assert findings.failing == {"t.py::a": ["ps: a zero_gradient note"]}
    passed: Any = _Report("passed")
    strict_failure(passed, findings.failing["t.py::a"])
    assert passed.outcome == "failed"
    assert passed.longrepr == ("distviz --distviz-strict: 1 gradient note in this test's run:\n"
                               "  ps: a zero_gradient note")
    other: Any = _Report("passed")
    strict_failure(other, findings.failing.get("t.py::b", []))
    skipped: Any = _Report("skipped")
    strict_failure(skipped, findings.failing["t.py::a"])
    assert (other.outcome, skipped.outcome) == ("passed", "skipped")


# -- all-zero gradients: distviz why's fact, said for a recorded context --------------------------

def _zero_trace() -> Any:
    """``a, b = rpc_sync(w1, two_mm, (x,))`` with only ``a`` in the loss, and PyTorch's context
    as the replay predicts it: W2's gradient all zeros (``replay_fixtures``)."""
    import replay_fixtures as F
    from builders.verdicts import _real

    from distviz.trace.sections import Real

    trace = F.multi_output_unused()
    trace.real = Real.from_json(_real(trace))
    return trace


def test_why_names_the_rpc_output_the_loss_does_not_use_for_a_zero_gradient() -> None:
    from distviz.analyses.why import why

    trace = _zero_trace()
    answer = why(trace, "W2")
    assert answer.gets_gradient
    assert ("PyTorch's gradient is all zeros: output 1 (`b`) of rpc_sync(two_mm) to worker1 "
            "(assigned to `a, b`) is not used by the loss (`loss`): FAST mode sends zeros for "
            "it") in answer.details, answer.details
    assert not [d for d in why(trace, "W1").details if "all zeros" in d]


def test_a_recorded_contexts_zero_gradients_are_one_note_per_cause() -> None:
    from distviz.replay import replay
    from distviz.tracing.recording import report

    trace = _zero_trace()
    assert report.zero_notes(trace, replay(trace)) == [
        "W2 got an all-zero gradient in the context: output 1 (`b`) of rpc_sync(two_mm) to "
        "worker1 (assigned to `a, b`) is not used by the loss (`loss`): FAST mode sends zeros "
        "for it. Fix: use that result in the loss, or leave it out of what the RPC returns if "
        "it needs no gradient"]
    assert trace.real is not None
    trace.real.gradients = {k: {**v, "zero": False} for k, v in trace.real.gradients.items()}
    assert report.zero_notes(trace, replay(trace)) == []      # PyTorch's fact, not the replay's


def test_parameters_no_node_of_the_context_reaches_are_named_per_worker() -> None:
    import replay_fixtures as F

    from distviz.trace.absent import AbsentLeaf
    from distviz.tracing.recording import report

    trace = F.multi_output_unused()
    trace.absent_leaves = [
        AbsentLeaf(var="w1.fc.weight", worker="worker1", why="not_reached", shape=[2],
                   dtype="float32", parameter=True, grad=False),
        AbsentLeaf(var="w1.fc.bias", worker="worker1", why="not_reached", shape=[2],
                   dtype="float32", parameter=True, grad=False),
        AbsentLeaf(var="x2", worker="worker0", why="not_reached", shape=[2],
                   dtype="float32", parameter=False, grad=False),      # not a parameter
        AbsentLeaf(var="w0.frozen", worker="worker0", why="requires_grad_false", shape=[2],
                   dtype="float32", parameter=True, grad=False)]       # frozen on purpose
    notes = report.absent_notes(trace)
    assert len(notes) == 1 and notes[0].startswith(
        "2 parameters on worker1 got no gradient (w1.fc.weight, w1.fc.bias): the parameter "
        "`w1.fc.weight` on worker1 requires grad, but no node of the context's graph "
        "accumulates into it"), notes
