"""distviz's pytest plugin (``distviz/tracing/pytest_plugin.py``).

The pure tests check how a test's contexts are named, counted and reported. The ``rpc`` tests
run a small suite of real RPC tests (``tests/programs/pytest_suite/suite_rpc.py``: one that
agrees, one that expects FAST mode's hang, one with bad arguments, one that fails on purpose)
three ways: plain, with ``pytest --distviz=DIR`` and under ``distviz trace -- pytest``, and
compare what pytest says per test, its exit status and its junit XML.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from guards import HANG_GUARD_S

from distviz.tracing.config import TEST_ENV
from distviz.tracing.launcher import run_summary
from distviz.tracing.pytest_plugin import (
    CATEGORIES,
    Findings,
    category,
    counted,
    section,
    summary_lines,
)
from distviz.tracing.shared import journal
from distviz.tracing.shared.journal import ContextRow, Event

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "tests" / "programs" / "pytest_suite"
HANG_TEST = "suite_rpc.py::test_backward_unused_send_function"
AGREE_TEST = "suite_rpc.py::test_gradient_through_a_remote_call"
INVALID_TEST = "suite_rpc.py::test_backward_invalid_args"
FAILING_TEST = "suite_rpc.py::test_wrong_expectation_fails"


def _row(file: str, test: str | None, outcome: str = "completed", predicted: str = "completed",
         real: str = "completed", agreement: str = "agrees", text: str = "replay agrees",
         explanation: str | None = None, category: str | None = None) -> ContextRow:
    """A row as the verdict would fill it (``category``: the verdict's; by default the
    agreement word, which names the category of a context that neither hangs nor raises)."""
    return ContextRow(file=file, initiator="worker0", index=1, context_id=1, pid=1,
                      workers=["worker0", "worker1"], nodes=4, messages=1, outcome=outcome,
                      predicted=predicted, real=real, agreement=agreement, agreement_text=text,
                      explanation=explanation, test=test, category=category or agreement)


# -- pure ---------------------------------------------------------------------------------------

def _judged_rows() -> dict[str, ContextRow]:
    """A row per category, each made from a trace by the one verdict (``report.row``)."""
    import replay_fixtures as F
    from builders.verdicts import _real, _traced

    from distviz.replay import replay
    from distviz.tracing.recording import report

    agrees = F.design_note()
    agrees.real = _real(agrees)
    seen = F.unused_rpc_result()
    seen.real = _real(seen)
    predicted = F.unused_rpc_result()
    predicted.real = {"outcome": "skipped", "reason": "the replay predicts a FAST-mode hang"}
    error = _traced(F.design_note())
    error.real = _real(error, outcome="error")
    differs = F.stack_tie(6)
    differs.real = _real(differs)
    ev = differs.real["events"]
    ev[2]["node"], ev[3]["node"] = ev[3]["node"], ev[2]["node"]
    traces = {"agrees": agrees, "hang predicted and seen": seen, "hang predicted": predicted,
              "error": error, "unfinished": _traced(F.design_note()),
              "not compared": F.design_note(), "differs": differs}
    return {name: report.row(t, replay(t), f"{k}.json", 1, 1, {})
            for k, (name, t) in enumerate(traces.items())}


def test_each_context_falls_in_the_category_its_verdict_gives() -> None:
    rows = _judged_rows()
    assert {name: category(r) for name, r in rows.items()} == {name: name for name in rows}
    assert set(rows) == set(CATEGORIES)
    assert counted(Counter({"agrees": 2, "error": 1})) == "2 agree, 1 error"
    assert counted(Counter()) == "nothing recorded"


def test_the_last_row_of_a_trace_file_wins_and_rows_are_grouped_by_test() -> None:
    events = [
        Event("context", 1, row=_row("h.json", "t::hang", "hang", "hang", "skipped",
                                     "not compared", "did not run", "worker1 waits")),
        Event("context", 1, row=_row("a.json", "t::ok")),
        Event("context", 1, row=_row("h.json", "t::hang", "hang", "hang", "hang",
                                     explanation="worker1 waits",
                                     category="hang predicted and seen")),
        Event("not_recorded", 2, "backward(5, ...) was not recorded: bad roots", "worker0",
              test="t::bad"),
        Event("context", 3, row=_row("x.json", None)),
    ]
    f = Findings.of(events)
    assert [category(r) for r in f.rows["t::hang"]] == ["hang predicted and seen"]
    assert f.tests() == ["(outside any test)", "t::bad", "t::hang", "t::ok"]
    assert section(f, "t::ok").splitlines() == [
        "1 context recorded: 1 agrees",
        "worker0 context 1 (2 workers, 4 nodes, 1 message): agrees: replay agrees",
        "  trace: a.json"]
    assert section(f, "t::bad") == ("0 contexts recorded: nothing recorded\nnote: worker0: "
                                    "backward(5, ...) was not recorded: bad roots")
    assert section(f, "t::none") == ""
    lines = summary_lines(f, "out/")
    assert lines[0] == "3 contexts recorded in 3 tests; traces and index.json in out/"
    assert "  worker0 context 1: hang predicted and seen: worker1 waits" in lines
    assert lines[-1] == "contexts: 2 agrees, 1 hang predicted and seen, 0 differs"


def test_events_logged_during_a_test_carry_its_node_id(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TEST_ENV, "tests/test_x.py::test_y[1]")
    journal.append(str(tmp_path), Event("context", 1, row=_row("a.json", None)))
    journal.append(str(tmp_path), Event("not_recorded", 1, "why"))
    monkeypatch.delenv(TEST_ENV)
    journal.append(str(tmp_path), Event("context", 1, row=_row("b.json", None)))
    got = journal.read(str(tmp_path))
    assert [(e.test, e.row.test if e.row else None) for e in got] == [
        ("tests/test_x.py::test_y[1]", "tests/test_x.py::test_y[1]"),
        ("tests/test_x.py::test_y[1]", None), (None, None)]
    index = run_summary.index_json(run_summary.entries(got), ["pytest"], 0, [])
    assert [c["test"] for c in index["contexts"]] == ["tests/test_x.py::test_y[1]", None]


def test_a_trace_file_is_named_after_its_test(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    assert journal.trace_stem("worker0", 2) == "worker0.ctx2"
    assert journal.trace_stem("worker0", 2, "tests/test_x.py::T::test_y[a b]") == \
        "tests_test_x.py_T_test_y_a_b.worker0.ctx2"
    monkeypatch.setenv(TEST_ENV, "t.py::test_z")
    session = tmp_path / "s"
    session.mkdir()
    first = journal.claim(str(tmp_path / "out"), str(session), "worker0", 1)
    again = journal.claim(str(tmp_path / "out"), str(session), "worker0", 1)
    assert (first.name, again.name) == ("t.py_test_z.worker0.ctx1.trace.json",
                                        "t.py_test_z.worker0.ctx1-1.trace.json")


def test_a_folder_given_as_a_separate_word_is_refused(tmp_path: Path) -> None:
    """``pytest --distviz tests/`` would take the test folder for the trace folder."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "--distviz", "tests_here", "-q"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "--distviz tests_here: the folder must be given as --distviz=tests_here" in \
        proc.stderr
    assert "Traceback" not in proc.stderr


# -- real RPC tests, three ways ----------------------------------------------------------------

@dataclass
class SuiteRun:
    """One run of the suite: pytest's status, output, outcomes per test (from junit XML),
    and distviz's index.json (None for the plain run)."""

    code: int
    output: str
    outcomes: dict[str, str]
    junit: ET.Element
    index: dict[str, Any] | None
    out: Path


def _outcomes(root: ET.Element) -> dict[str, str]:
    out = {}
    for case in root.iter("testcase"):
        kinds = [c.tag for c in case if c.tag in ("failure", "error", "skipped")]
        out[f"{case.get('classname')}::{case.get('name')}"] = kinds[0] if kinds else "passed"
    return out


def _run_suite(tmp: Path, how: str) -> SuiteRun:
    out = tmp / how
    junit = tmp / f"{how}.xml"
    pytest_args = [sys.executable, "-m", "pytest", "suite_rpc.py", "-p", "no:cacheprovider",
                   f"--junitxml={junit}", "-rA"]
    if how == "plain":
        argv = pytest_args
    elif how == "plugin":
        argv = [*pytest_args, f"--distviz={out}", "--distviz-hang-timeout=2"]
    else:
        argv = [sys.executable, "-m", "distviz", "trace", "-o", str(out), "--hang-timeout", "2",
                "--", *pytest_args]
    path = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = dict(os.environ, TP_SOCKET_IFNAME="lo", GLOO_SOCKET_IFNAME="lo", NO_COLOR="1",
               COLUMNS="160", PYTHONPATH=os.pathsep.join(path))
    proc = subprocess.run(argv, cwd=SUITE, env=env, capture_output=True, text=True, timeout=600)
    index_file = out / "index.json"
    index = json.loads(index_file.read_text()) if index_file.exists() else None
    root = ET.parse(junit).getroot()
    return SuiteRun(proc.returncode, proc.stdout + proc.stderr, _outcomes(root), root, index,
                    out)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SuiteRun]:
    tmp = tmp_path_factory.mktemp("suite")
    # three independent runs (own junit file, output folder and rendezvous): side by side
    hows = ("plain", "plugin", "trace")
    with ThreadPoolExecutor(max_workers=len(hows)) as pool:
        started = {how: pool.submit(_run_suite, tmp, how) for how in hows}
        return {how: run.result() for how, run in started.items()}


def _by_test(index: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for c in index["contexts"]:
        out.setdefault(c["test"], []).append(c)
    return out


@pytest.mark.rpc
def test_the_suite_gives_the_same_results_plain_and_traced(runs: dict[str, SuiteRun]) -> None:
    plain = runs["plain"]
    assert plain.code == 1, plain.output
    assert plain.outcomes == {
        "suite_rpc::test_gradient_through_a_remote_call": "passed",
        "suite_rpc::test_backward_unused_send_function": "passed",
        "suite_rpc::test_backward_invalid_args": "passed",
        "suite_rpc::test_wrong_expectation_fails": "failure"}, plain.output
    for how in ("plugin", "trace"):
        run = runs[how]
        assert (run.code, run.outcomes) == (plain.code, plain.outcomes), run.output
        assert run.index is not None, run.output
        assert "distviz stopped the program" not in run.output


@pytest.mark.rpc
@pytest.mark.parametrize("how", ["plugin", "trace"])
def test_every_context_is_named_by_its_test(runs: dict[str, SuiteRun], how: str) -> None:
    run = runs[how]
    assert run.index is not None, run.output
    tests = _by_test(run.index)
    assert set(tests) == {AGREE_TEST, HANG_TEST, FAILING_TEST}, run.output
    for test, contexts in tests.items():
        for c in contexts:
            trace = json.loads(Path(c["file"]).read_text())
            assert trace["meta"]["traced"]["test"] == test
            assert Path(c["file"]).name.startswith(test.replace("::", "_") + ".worker0.ctx")
    assert [c["agreement"] for c in tests[AGREE_TEST]] == ["agrees"]
    assert [c["agreement"] for c in tests[FAILING_TEST]] == ["agrees"]
    hang = tests[HANG_TEST]
    # seen too when the watchdog (2 s) fires before the test stops waiting (6 s): not on a
    # loaded machine, where recording alone can take that long
    assert [(c["predicted"], c["outcome"]) for c in hang] == [("hang", "hang")]
    assert hang[0]["real"] in ("hang", "skipped")


@pytest.mark.rpc
@pytest.mark.parametrize("how", ["plugin", "trace"])
def test_findings_reach_the_report_under_default_capture(runs: dict[str, SuiteRun],
                                                         how: str) -> None:
    run = runs[how]
    out = run.output
    # the failed test's report and, with -rA, the passed ones' carry a distviz section
    assert out.count("- distviz -") >= 4, out
    assert "worker0 context 1 (2 workers" in out
    assert "= distviz =" in out
    assert f"{HANG_TEST}: 1 context: 1 hang predicted and seen" in out
    assert f"{AGREE_TEST}: 1 context: 1 agrees" in out
    assert f"{INVALID_TEST}: 0 contexts: nothing recorded" in out
    props = {case.get("name"): [p.get("name") for p in case.iter("property")]
             for case in run.junit.iter("testcase")}
    assert props["test_backward_unused_send_function"] == ["distviz"]
    assert props["test_backward_invalid_args"] == ["distviz"]
