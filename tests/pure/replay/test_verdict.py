"""The one verdict (``distviz.judge.verdict``): each check, the sentence and the exit code, and
the same verdict from every command that reads a trace. Pure: recorded and hand-built traces,
no workers."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
import replay_fixtures as F
from builders.verdicts import _real, _traced
from typer.testing import CliRunner

from distviz.cli import app
from distviz.cli.contexts_report import context_reports
from distviz.cli.options import View
from distviz.cli.running import show_run
from distviz.fuzz.runner import judge_trace
from distviz.judge.verdict import judge, recording_exit_code
from distviz.limits import EXIT_DISAGREE, EXIT_HANG, EXIT_OK
from distviz.replay import replay
from distviz.trace import Trace, load
from distviz.trace.contexts_file import Recording
from distviz.tracing.launcher import run_summary
from distviz.tracing.recording import report

TRACES = Path(__file__).parents[2] / "traces"


def _zero_by_value() -> Trace:
    """``test_backward_unused_tensors``'s shape: a leaf whose real gradient is all zeros
    although the graph carries one to it (narrow of stack: zero by value)."""
    t = _traced(F.design_note())
    t.real = _real(t)
    t.real["gradients"]["worker0/AccumulateGrad(t2)"]["zero"] = True
    return t


# -- all-zero gradients: a difference only when proven ------------------------------------------

def test_a_zero_gradient_by_value_is_not_compared_without_a_reference() -> None:
    t = _zero_by_value()
    v = judge(t, replay(t))
    zeros = v.check("zeros")
    assert zeros is not None and zeros.status == "not compared"
    assert "t2" in zeros.sentence and "zero by value" in zeros.sentence
    assert (v.status, v.exit_code) == ("agrees", EXIT_OK)
    assert "differs" not in v.text
    row = report.row(t, replay(t), "t.json", 1, 1, {})
    assert (row.agreement, row.agreement_text) == ("agrees", v.text)


def test_pytorchs_unused_tensors_test_is_no_false_alarm() -> None:
    """``tests/traces/unused_tensors.json``: ``distviz trace`` of ``tests/programs/
    unused_tensors.py`` (PyTorch's test_backward_unused_tensors over RPC). t2's real gradient is
    all zeros through narrow of stack; the trace has no reference to decide it by."""
    t = load(TRACES / "unused_tensors.json")
    assert t.real is not None and t.real["gradients"]["worker0/AccumulateGrad(t2)"]["zero"]
    v = judge(t, replay(t))
    zeros = v.check("zeros")
    assert zeros is not None and zeros.status == "not compared" and "t2" in zeros.sentence
    assert (v.status, v.exit_code) == ("agrees", EXIT_OK)
    assert report.row(t, replay(t), "t.json", 1, 1, {}).agreement == "agrees"


@pytest.mark.parametrize(("status", "check", "code"), [
    ("match", "agrees", EXIT_OK), ("zero_unused", "differs", EXIT_DISAGREE)])
def test_a_zero_gradient_by_value_is_decided_by_the_reference(status: str, check: str,
                                                              code: int) -> None:
    t = _zero_by_value()
    t.meta = {}
    t.reference = {"comparable": True, "ok": status == "match", "comparison": [
        {"var": "t2", "leaf": "worker0/AccumulateGrad(t2)", "worker": "worker0",
         "status": status}]}
    v = judge(t, replay(t))
    zeros = v.check("zeros")
    assert zeros is not None and zeros.status == check
    assert v.exit_code == code


def test_a_nonzero_gradient_where_the_graph_sends_only_zeros_differs() -> None:
    t = F.multi_output_unused()
    rp = replay(t)
    assert rp.accumulated["worker1/AccumulateGrad(W2)"].zero
    t.real = _real(t)
    t.real["gradients"]["worker1/AccumulateGrad(W2)"]["zero"] = False
    v = judge(t, rp)
    assert v.differences == ("zeros",)
    assert v.text == "replay differs from PyTorch: all-zero gradient differs for W2"
    assert (v.status, v.exit_code, v.agreement.status) == ("differs", EXIT_DISAGREE, "differs")


@pytest.mark.parametrize("output_nr", [0, 1])
def test_a_root_that_is_an_rpc_result_seeds_its_own_output(output_nr: int) -> None:
    """The loss is an RPC's result itself: the ones go into the root's output of the recv, so
    the leaf behind it gets a gradient and the one behind the other output zeros."""
    t = F.rpc_result_root(output_nr)
    rp = replay(t)
    zero = {nid.split("(")[1][:-1]: a.zero for nid, a in rp.accumulated.items()}
    assert zero == {"x": False, "W1": output_nr != 0, "W2": output_nr != 1}
    t.real = _real(t)
    assert judge(t, rp).status == "agrees"


def _behind_python(node_name: str) -> Trace:
    """multi_output_unused with W2's MmBackward0 a custom Function's node: W2's gradient
    is what its Python backward returns."""
    t = F.multi_output_unused()
    nodes = list(t.nodes)
    mm2 = next(n for n in nodes if n.worker == "worker1" and n.seq == 2)
    mm2.name, mm2.python = node_name, True
    t.nodes = nodes
    return t


def test_a_nonzero_gradient_behind_a_python_backward_is_not_compared() -> None:
    """Only zeros reach W2, but through a custom Function (its backward may return a
    constant): PyTorch's non-zero gradient is not a proven difference."""
    t = _behind_python("ConstantBackward")
    rp = replay(t)
    assert rp.accumulated["worker1/AccumulateGrad(W2)"].zero
    t.real = _real(t)
    t.real["gradients"]["worker1/AccumulateGrad(W2)"]["zero"] = False
    v = judge(t, rp)
    zeros = v.check("zeros")
    assert zeros is not None and zeros.status == "not compared", v.text
    assert "W2 comes through ConstantBackward, a custom Function" in zeros.sentence
    assert (v.status, v.exit_code) == ("agrees", EXIT_OK)


def test_a_leaf_without_a_gradient_behind_a_python_backward_is_not_compared() -> None:
    """A custom Function whose backward returns None: PyTorch stores no gradient for the
    leaf behind it on its worker; the replay cannot know, so the leaves do not differ."""
    t = _behind_python("DroppedBackward")
    rp = replay(t)
    t.real = _real(t)
    del t.real["gradients"]["worker1/AccumulateGrad(W2)"]
    v = judge(t, rp)
    assert v.check("leaves").status == "agrees", v.text
    assert v.check("zeros").status == "not compared" and v.exit_code == EXIT_OK
    plain = F.multi_output_unused()     # the same run without the custom Function: proven
    plain.real = t.real
    assert judge(plain, replay(plain)).differences == ("leaves",)


def test_zeros_from_a_none_sent_across_an_rpc_are_not_compared_never_differ() -> None:
    """fuzz-20261130-9's shape: behind DroppedBackward (a Python backward that returns None)
    the reference has no gradient for a leaf and PyTorch all zeros (a recv sends an undefined
    gradient as zeros) where the replay predicts a gradient: not compared, never "differs".
    Without the custom Function the same values stay a proven difference."""
    t = _behind_python("DroppedBackward")
    rp = replay(t)
    leaf = "worker0/AccumulateGrad(x)"
    assert not rp.accumulated[leaf].zero
    t.real = _real(t)
    t.real["gradients"][leaf]["zero"] = True
    t.reference = {"comparable": True, "ok": True, "comparison": [
        {"var": "x", "leaf": leaf, "worker": "worker0", "status": "zero_unused"}]}
    v = judge(t, rp)
    zeros = v.check("zeros")
    assert zeros is not None and zeros.status == "not compared", v.text
    assert "behind DroppedBackward a Python backward returned None" in zeros.sentence
    assert (v.status, v.exit_code) == ("agrees", EXIT_OK)
    plain = F.multi_output_unused()
    plain.real, plain.reference = t.real, t.reference
    assert judge(plain, replay(plain)).differences == ("zeros",)


# -- hangs, threads, outcomes --------------------------------------------------------------------

def test_a_time_out_where_the_replay_completes_is_not_compared_never_differs() -> None:
    # a backward slower than the hang timeout (a starved machine) is not proven to hang
    t = F.design_note()
    t.real = _real(t, outcome="hang")
    t.real["events"] = t.real["events"][:3]       # it was stopped part-way
    t.real["hang_timeout_s"] = 5.0
    rp = replay(t)
    assert rp.outcome == "completed"
    v = judge(t, rp)
    assert (v.outcome, v.status, v.exit_code, v.differences) == (
        "hang", "not compared", EXIT_HANG, ())
    assert v.text.startswith("PyTorch's backward had not returned after 5 s, while the replay "
                             "completes: ")

def test_an_observed_hang_agrees_with_a_predicted_one_and_names_what_followed() -> None:
    t = F.unused_rpc_result()
    t.real = _real(t)
    t.real["after_hang"] = "RPC ran for more than set timeout (60000 ms) and will now be marked " \
                           "with an error"
    v = judge(t, replay(t))
    outcome = v.check("outcome")
    assert outcome is not None and outcome.status == "agrees"
    assert (v.outcome, v.status, v.exit_code) == ("hang", "agrees", EXIT_HANG)
    assert v.text.endswith("; after the hang PyTorch raised: RPC ran for more than set timeout "
                           "(60000 ms) and will now be marked with an error (a consequence of "
                           "the hang, not a different outcome)")


def test_with_several_interop_threads_the_rules_decide_not_the_order() -> None:
    t = F.design_note()
    t.real = _real(t, interop=2)
    v = judge(t, replay(t))
    order, legality = v.check("order"), v.check("legality")
    assert order is not None and order.status == "not compared"
    assert legality is not None and legality.status == "agrees"
    assert v.text.endswith("; with 2 inter-op threads each worker's observed order is one that "
                           "FAST mode's rules allow")
    nodes = [e["node"] for e in t.real["events"]]
    acc = nodes.index("worker0/AccumulateGrad(t4)")
    recv = nodes.index("worker0/RecvRpcBackward#0")
    events = t.real["events"]   # a ready AccumulateGrad always runs first: no schedule has this
    events[acc]["node"], events[recv]["node"] = events[recv]["node"], events[acc]["node"]
    v = judge(t, replay(t))
    assert "legality" in v.differences and v.exit_code == EXIT_DISAGREE


def test_an_error_of_the_programs_own_code_is_not_a_disagreement() -> None:
    t = _traced(F.design_note())
    t.real = _real(t, outcome="error")
    v = judge(t, replay(t))
    outcome = v.check("outcome")
    assert outcome is not None and outcome.status == "not compared"
    assert v.text.startswith("the error comes from the program's own code")
    assert v.status == "agrees"


def test_a_skipped_backward_says_why_and_exits_as_the_predicted_hang() -> None:
    t = F.unused_rpc_result()
    t.real = {"outcome": "skipped", "reason": "the replay predicts a FAST-mode hang",
              "error": None, "events": [], "gradients": {}}
    v = judge(t, replay(t))
    assert v.text == "the real backward did not run: the replay predicts a FAST-mode hang"
    assert (v.status, v.exit_code) == ("not compared", EXIT_HANG)


def test_a_predicted_hang_whose_process_ended_first_stays_a_predicted_hang() -> None:
    # --on-hang continue in a test that expects the hang: the test stops waiting and its
    # processes end before the hang timeout fires; the trace has no real section
    t = _traced(F.unused_rpc_result())
    t.real = None
    v = judge(t, replay(t))
    assert (v.outcome, v.status, v.exit_code) == ("hang", "not compared", EXIT_HANG)
    assert v.text == ("the replay predicts a hang, and PyTorch's backward had not returned "
                      "when the process ended")
    row = report.row(t, replay(t), "t.json", 1, 1, {})
    assert (row.outcome, row.predicted) == ("hang", "hang")


# -- one trace through every command --------------------------------------------------------------

def _cases(tmp: Path) -> list[Path]:
    """Recorded traces, and hand-built ones for what recordings here do not show."""
    made = {"zero_by_value": _zero_by_value()}
    g1 = F.g1()
    g1.real = _real(g1, interop=2)
    made["interop2"] = g1
    hang = F.unused_rpc_result()
    hang.real = _real(hang)
    hang.real["after_hang"] = "RPC timed out"
    made["hang"] = hang
    tie = F.stack_tie(6)
    tie.real = _real(tie)
    ev = tie.real["events"]
    ev[2]["node"], ev[3]["node"] = ev[3]["node"], ev[2]["node"]
    made["swapped"] = tie
    for name, t in made.items():
        t.save(tmp / f"{name}.json")
    return sorted(TRACES.glob("*.json")) + [tmp / f"{n}.json" for n in made]


def _every_command(path: Path, tmp: Path) -> dict[str, tuple[str, int]]:
    """``(sentence, exit code)`` of ``path`` from each command that judges a trace."""
    runner = CliRunner()
    got: dict[str, tuple[str, int]] = {}
    res = runner.invoke(app, ["replay", str(path), "--json"])
    out = json.loads(res.stdout)
    assert out["agreement"]["text"] == out["verdict"]["text"]
    assert out["verdict"]["exit_code"] == res.exit_code
    got["replay --json"] = (out["agreement"]["text"], res.exit_code)
    res = runner.invoke(app, ["replay", str(path)])
    line = next(x for x in res.stdout.splitlines() if x.startswith("agreement with the real run"))
    got["replay"] = (line.removeprefix("agreement with the real run: "), res.exit_code)
    trace = load(path)
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = show_run(Recording.single(trace), "fast", tmp / "run.json", View(
            as_json=True, step=False, log=None, worker=None, start=None, end=None, pictures={}))
    got["run --json"] = (json.loads(buffer.getvalue())["agreement"]["text"], code)
    rp = replay(trace)
    row = report.row(trace, rp, str(path), 1, 1, {})
    entries = [run_summary.Entry(row=row, change="first recorded")]
    index = run_summary.index_json(entries, ["prog"], run_summary.contexts_code(entries), [])
    got["trace"] = (index["contexts"][0]["agreement_text"], index["exit_code"])
    recording = Recording(contexts=[trace], iterations=[None], workers=list(trace.workers))
    reports = context_reports(recording, "fast")
    text = reports[0].agreement.text if reports[0].agreement else ""
    got["training"] = (text, recording_exit_code(recording, reports))
    got["fuzz"] = (judge_trace(trace, rp).text, got["replay"][1])
    return got


def test_one_trace_gets_the_same_sentence_and_exit_code_from_every_command(
        tmp_path: Path) -> None:
    for path in _cases(tmp_path):
        got = _every_command(path, tmp_path)
        expected = judge(load(path), replay(load(path)))
        assert set(got.values()) == {(expected.text, expected.exit_code)}, (path.name, got)
