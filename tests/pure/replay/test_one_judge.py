"""One judge: every reader of a trace reports the verdict of ``distviz.judge.verdict.judge``:
``replay`` (text and ``--json``), ``export`` (the HTML viewer's data), ``graph`` (no claim at
all), ``run``'s report, ``trace``'s summary row, ``index.json`` and exit code, the pytest
plugin's category, the training table, the fuzz (plain and training programs), and the
watch's rows of watched contexts. Pure:
recorded traces and hand-built ones, no workers."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest
import replay_fixtures as F
from builders.verdicts import _real, _traced
from rich.console import Console
from typer.testing import CliRunner

from distviz.cli import app
from distviz.cli.options import View
from distviz.cli.running import show_run
from distviz.fuzz.execute_training import judge_training_run
from distviz.fuzz.runner import judge_trace
from distviz.judge.findings import AGREEMENT_JSON_WORDS
from distviz.judge.verdict import Verdict, Watched, judge
from distviz.limits import EXIT_BACKWARD_ERROR, EXIT_HANG, EXIT_OK
from distviz.render.iterations import iteration_table
from distviz.replay import replay
from distviz.trace import Trace, load
from distviz.trace.contexts_file import Recording
from distviz.tracing.launcher import run_summary
from distviz.tracing.pytest_plugin import Findings, category, section
from distviz.tracing.recording import report
from distviz.tracing.shared.journal import Event
from distviz.tracing.watch import watch_report

TRACES = Path(__file__).parents[2] / "traces"


def _cases() -> dict[str, Trace]:
    """An agreeing trace, a hang, differences (the order, a gradient, a broken FAST-mode rule),
    and traces where nothing is compared (no real run, a skipped one, one that timed out where
    the replay completes, an unfinished one)."""
    hang = F.unused_rpc_result()
    hang.real = _real(hang)
    skipped = F.unused_rpc_result()
    skipped.real = {"outcome": "skipped", "reason": "the replay predicts a FAST-mode hang"}
    swapped = F.stack_tie(6)
    swapped.real = _real(swapped)
    ev = swapped.real["events"]
    ev[2]["node"], ev[3]["node"] = ev[3]["node"], ev[2]["node"]
    gradients = F.design_note()
    gradients.real = _real(gradients)
    gradients.reference = {"comparable": True, "ok": False}
    slow = F.design_note()     # PyTorch's backward timed out where the replay completes
    slow.real = _real(slow, outcome="hang")
    illegal = F.design_note()
    illegal.real = _real(illegal, interop=2)
    events = illegal.real["events"]
    nodes = [e["node"] for e in events]
    acc, recv = nodes.index("worker0/AccumulateGrad(t4)"), nodes.index("worker0/RecvRpcBackward#0")
    events[acc]["node"], events[recv]["node"] = events[recv]["node"], events[acc]["node"]
    return {"agrees": load(TRACES / "pipeline.json"), "hang": hang, "swapped": swapped,
            "gradients differ": gradients, "illegal order": illegal,
            "no real run": F.design_note(), "skipped": skipped, "timed out": slow,
            "unfinished": _traced(F.design_note())}


CASES = _cases()


def _report_line(stdout: str) -> str:
    """The agreement sentence at the end of ``distviz replay``'s log (not a terminal: one
    line)."""
    line = next(x for x in stdout.splitlines() if x.startswith("agreement with the real run: "))
    return line.removeprefix("agreement with the real run: ")


def _readers(path: Path, tmp: Path) -> dict[str, tuple[str, str, int | None]]:
    """``(status, sentence, exit code)`` of the trace in ``path`` from each reader (the JSON
    formats' status words read back into the verdict's; ``None``: the reader has no code)."""
    words = {v: k for k, v in AGREEMENT_JSON_WORDS.items()}
    runner = CliRunner()
    got: dict[str, tuple[str, str, int | None]] = {}
    res = runner.invoke(app, ["replay", str(path), "--json"])
    out = json.loads(res.stdout)
    v = out["verdict"]
    got["replay --json"] = (v["status"], v["text"], res.exit_code)
    got["replay --json agreement"] = (words[out["agreement"]["status"]],
                                      out["agreement"]["text"], v["exit_code"])
    res = runner.invoke(app, ["replay", str(path)])
    got["replay"] = (v["status"], _report_line(res.stdout), res.exit_code)
    html = tmp / "page.html"
    res = runner.invoke(app, ["export", str(path), "--format", "html", "-o", str(html)])
    assert res.exit_code == 0, res.stdout
    data = re.search(r'"agreement":(\{"text":.*?"status":"[a-z]+")',
                     html.read_text(encoding="utf-8"))
    assert data is not None
    shown = json.loads(data.group(1) + "}")
    got["export --format html"] = (words[shown["status"]], shown["text"], None)
    trace = load(path)
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = show_run(Recording.single(trace), "fast", tmp / "run.json", View(
            as_json=True, step=False, log=None, worker=None, start=None, end=None, pictures={}))
    ran = json.loads(buffer.getvalue())
    got["run --json"] = (ran["verdict"]["status"], ran["verdict"]["text"], code)
    rp = replay(trace)
    row = report.row(trace, rp, str(path), 1, 1, {})
    entries = [run_summary.Entry(row=row, change="first recorded")]
    index = run_summary.index_json(entries, ["prog"], run_summary.contexts_code(entries), [])
    first = index["contexts"][0]
    got["trace index.json"] = (first["agreement"], first["agreement_text"], index["exit_code"])
    got["trace row"] = (row.agreement, row.agreement_text, row.exit_code)
    return got


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_reader_reports_the_one_verdict(name: str, tmp_path: Path) -> None:
    path = tmp_path / f"{name.replace(' ', '_')}.json"
    CASES[name].save(path)
    expected: Verdict = judge(load(path), replay(load(path)))
    got = _readers(path, tmp_path)
    assert {(s, t) for s, t, _c in got.values()} == {(expected.status, expected.text)}, got
    assert {c for _s, _t, c in got.values() if c is not None} == {expected.exit_code}, got
    # graph shows the graph and claims nothing about PyTorch
    res = CliRunner().invoke(app, ["graph", str(path)])
    assert res.exit_code == 0 and expected.text not in res.stdout
    assert not re.search(r"\b(agrees|differs|matches PyTorch)\b", res.stdout)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_plugin_the_training_table_and_the_fuzz_read_the_verdict(name: str) -> None:
    trace = CASES[name]
    rp = replay(trace)
    expected = judge(trace, rp)
    row = report.row(trace, rp, "t.json", 1, 1, {})
    row.test = "t::x"
    assert category(row) == expected.category
    findings = Findings.of([Event("context", 1, row=row)])
    assert f"{expected.category}: " in section(findings, "t::x")
    # the fuzz: a disagreement exactly when the verdict differs, with the verdict's sentence
    plain = judge_trace(trace, rp)
    assert (not plain.agrees, plain.text) == (expected.status == "differs", expected.text)
    recording = Recording(contexts=[trace], iterations=[None], workers=list(trace.workers))
    training = judge_training_run(recording, None)
    assert (not training.agrees) == (expected.status == "differs")
    if expected.status == "differs":
        assert training.text == f"context 1: {expected.text}"
    # the training table's replay column: yes, NO, or - when nothing was compared
    console = Console(width=200, color_system=None, record=True)
    console.print(iteration_table(recording, [expected]))
    last = console.export_text().splitlines()[-1].split()
    assert last[-2] == {"agrees": "yes", "differs": "NO", "not compared": "-"}[expected.status]


def _watched_trace(t: Trace) -> Trace:
    """``t`` as the watch writes it: recorded late, no real run, the gradients so far."""
    t.meta = {"traced": {"pid": 1, "argv": ["prog.py"], "context": 3, "seconds": {},
                         "watched": {"gradients": {}}}}
    return t


#: Watched contexts: ``(trace, how PyTorch's backward ended, the status, exit code and
#: category the verdict must give)``.
WATCHED = {
    "hang": (F.unused_rpc_result, Watched("hang", 2.5, 2.0), "agrees", EXIT_HANG,
             "hang predicted and seen"),
    "slow": (F.design_note, Watched("hang", 2.5, 2.0), "not compared", EXIT_HANG,
             "not compared"),
    "returned": (F.design_note, Watched("returned", 3.25, 2.0), "not compared", EXIT_OK,
                 "not compared"),
    "raised": (F.design_note, Watched("raised", 1.5, 2.0, "RuntimeError: boom"),
               "not compared", EXIT_BACKWARD_ERROR, "error"),
    "hang, then PyTorch's time-out": (
        F.unused_rpc_result, Watched("raised", 9.0, 2.0, "RPCErr: timed out", hung=True),
        "agrees", EXIT_HANG, "hang predicted and seen"),
}


@pytest.mark.parametrize("name", sorted(WATCHED))
def test_a_watched_context_goes_through_the_one_judge(name: str) -> None:
    """The watch's row (``watch_report.watched_row``), the summary's ``index.json`` and the
    pytest plugin's category read the judge's verdict on a watched context; only its outcome
    is compared, so it never differs."""
    make, watched, status, code, counted = WATCHED[name]
    trace = _watched_trace(make())
    rp = replay(trace)
    v = judge(trace, rp, watched)
    assert (v.status, v.exit_code, v.category) == (status, code, counted)
    assert [c.name for c in v.checks] == ["outcome"] and v.differences == ()
    before = report.row(trace, rp, "t.json", 3, 1, {})
    row = watch_report.watched_row(before, trace, rp, watched)
    assert row.watched
    assert (row.agreement, row.agreement_text, row.exit_code, row.outcome, row.real) == \
        (v.status, v.text, v.exit_code, v.outcome, v.real)
    row.test = "t::x"
    assert category(row) == v.category
    entries = [run_summary.Entry(row=row, change="first recorded")]
    index = run_summary.index_json(entries, ["prog"], run_summary.contexts_code(entries), [])
    first = index["contexts"][0]
    assert (first["agreement"], first["agreement_text"], index["exit_code"]) == \
        (v.status, v.text, v.exit_code)


def test_only_the_judge_words_a_watched_context() -> None:
    """The agreement sentences of a watched context are written under ``distviz/judge/``
    alone (the judge and the pure texts it reads), nowhere else in the library."""
    fragments = ("(watched: no per-node order to compare)", "(watched: nothing",
                 "watched: PyTorch's backward raised; nothing else compared",
                 "hang in FAST mode (the replay of its graph, recorded then, completes)",
                 "although the replay", "s): slow, not a hang")
    package = Path(__file__).parents[3] / "distviz"
    found: dict[str, set[str]] = {f: set() for f in fragments}
    for path in package.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for f in fragments:
            if f in text:
                found[f].add(path.relative_to(package).parts[0])
    assert found == {f: {"judge"} for f in fragments}
