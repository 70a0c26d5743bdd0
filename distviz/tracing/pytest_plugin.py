"""distviz as a pytest plugin: check a test suite's distributed backward, test by test
(torch-free at import).

Registered through the ``pytest11`` entry point, so pytest loads it in every run, where it does
nothing until it is enabled:

* ``pytest --distviz[=DIR]`` traces the run itself: it puts distviz's bootstrap on
  ``PYTHONPATH`` and the settings in ``DISTVIZ_TRACE`` (``distviz.tracing.config``), so every
  process a test starts (PyTorch's ``MultiProcessTestCase`` spawns its workers) loads the
  hooks, and arms them in the pytest process too. Traces and ``index.json`` go to ``DIR``
  (default ``distviz-traces``).
* ``distviz trace -- pytest ...`` already traces every process; the plugin sees
  ``DISTVIZ_TRACE`` and keeps ``distviz trace``'s folder and options.

Either way a test run is never stopped: a hang the replay predicts, or one the watch sees in a
context not recorded in full (``distviz.tracing.watch.watcher``), is reported against its test and
PyTorch's backward runs anyway (``--on-hang continue``), so a test that expects the hang
does what it does; pytest's exit status and junit XML are pytest's own (``distviz trace``
exits with pytest's status). Before each test the plugin sets ``DISTVIZ_TEST`` to the test's
node id; the processes the test starts inherit it, and every context they record is named by
it: the trace file (``tests_test_x.py_test_y.worker0.ctx1.trace.json``), the trace's
``meta.traced.test`` and ``index.json``'s ``test``. What each test's contexts did is in the
test's report whatever the capture mode: a ``distviz`` section (shown with a failure, or with
``-rP``), a ``distviz`` property in junit XML, and a summary at the end of the run.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Generator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from distviz.errors import UsageError
from distviz.limits import TRACE_HANG_TIMEOUT
from distviz.outcome import Category
from distviz.tracing.config import ENV, TEST_ENV, TraceConfig, check_options
from distviz.tracing.shared import job_files, journal, writer
from distviz.tracing.shared.fold import STOP, fold
from distviz.tracing.shared.journal import ContextRow, Event, EventKind
from distviz.words import plural

DEFAULT_DIR = "distviz-traces"
ON_HANG = "continue"    # a test may expect the hang: it is reported, never stopped
OUTSIDE = "(outside any test)"
# the options pytest gets from the plugin (the docs name them; tests/pure/project/test_docs.py checks)
OPTIONS = ("--distviz", "--distviz-contexts", "--distviz-hang-timeout", "--distviz-strict")
# what a context did, in the order the summary counts them
CATEGORIES: tuple[Category, ...] = tuple(Category)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("distviz", "distviz: record and check the distributed backward")
    group.addoption(OPTIONS[0], nargs="?", const=DEFAULT_DIR, default=None, metavar="DIR",
                    help="record each test's dist_autograd contexts, replay and check them; "
                         f"traces and index.json in DIR (default {DEFAULT_DIR}); write "
                         "--distviz=DIR")
    group.addoption(OPTIONS[1], default="first", metavar="WHICH",
                    help="contexts to record per initiator process: first, all, N,M, every:K or none "
                         "(default first)")
    group.addoption(OPTIONS[2], type=float, default=TRACE_HANG_TIMEOUT,
                    metavar="SECONDS",
                    help="declare a real backward hung after this long (default "
                         f"{TRACE_HANG_TIMEOUT:g}); the test goes on")
    group.addoption(OPTIONS[3], action="store_true", default=False,
                    help="fail a test that passed when a parameter of its run got no gradient, "
                         "an all-zero one, one left in .grad, or one a local optimizer never "
                         "applied (distviz trace --strict passes it on too)")


# -- what each test's contexts did (pure) ------------------------------------------------------

def category(row: ContextRow) -> str:
    """What one context did, as the summary counts it (one of ``CATEGORIES``): the verdict's
    (``distviz.judge.verdict.Verdict.category``), carried by the row."""
    return row.category


@dataclass
class Findings:
    """The session's events, by test: the last row of each trace file, and the notes."""

    rows: dict[str, list[ContextRow]] = field(default_factory=dict)
    notes: dict[str, list[str]] = field(default_factory=dict)
    #: the notes that fail a test under ``--distviz-strict`` (``journal.fails_strict``)
    failing: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, events: list[Event]) -> Findings:
        folded = fold(events)
        out = cls()
        for note in folded.notes:
            if note.kind != STOP:     # a pytest run is never stopped for a hang
                out.notes.setdefault(note.test or OUTSIDE, []).append(note.text)
            if journal.fails_strict(note.kind):
                out.failing.setdefault(note.test or OUTSIDE, []).append(note.text)
        for r in folded.rows:
            out.rows.setdefault(r.test or OUTSIDE, []).append(r)
        return out

    def tests(self) -> list[str]:
        return sorted(set(self.rows) | set(self.notes))

    def counts(self, test: str | None = None) -> Counter[str]:
        rows = self.rows.get(test, []) if test is not None else \
            [r for rs in self.rows.values() for r in rs]
        return Counter(category(r) for r in rows)


def counted(counts: Counter[str]) -> str:
    """``3 agree, 1 hang predicted and seen`` (the categories present, in summary order)."""
    parts = [f"{counts[c]} {'agree' if c == Category.AGREES and counts[c] > 1 else c}"
             for c in CATEGORIES if counts[c]]
    return ", ".join(parts) or "nothing recorded"


def row_lines(row: ContextRow) -> list[str]:
    """One context for a test's section: what it did, why, and its trace file."""
    size = (f"{plural(len(row.workers), 'worker')}, {plural(row.nodes, 'node')}, "
            f"{plural(row.messages, 'message')}")
    head = f"{row.initiator} context {row.index} ({size}): {category(row)}"
    why = row.explanation or row.agreement_text
    lines = [head + (f": {why}" if why else "")]
    if row.file:
        lines.append(f"  trace: {row.file}")
    return lines


def section(findings: Findings, test: str) -> str:
    """The ``distviz`` section of one test's report ('' when it recorded nothing)."""
    rows, notes = findings.rows.get(test, []), findings.notes.get(test, [])
    if not rows and not notes:
        return ""
    lines = [f"{plural(len(rows), 'context')} recorded: {counted(findings.counts(test))}"]
    for r in rows:
        lines.extend(row_lines(r))
    lines.extend(f"note: {n}" for n in notes)
    return "\n".join(lines)


def summary_lines(findings: Findings, out_dir: str) -> list[str]:
    """The end-of-run summary: per test what its contexts did, the hangs, errors and
    differences explained, then the totals (``not compared`` by reason)."""
    rows = [r for rs in findings.rows.values() for r in rs]
    tests = [t for t in findings.tests() if t in findings.rows]
    lines = [f"{plural(len(rows), 'context')} recorded in {plural(len(tests), 'test')}; "
             f"traces and index.json in {out_dir}"]
    for test in findings.tests():
        got = findings.rows.get(test, [])
        lines.append(f"{test}: {plural(len(got), 'context')}: {counted(findings.counts(test))}")
        for r in got:
            if category(r) not in (Category.AGREES, Category.NOT_COMPARED):
                lines.append(f"  {r.initiator} context {r.index}: {category(r)}: "
                             f"{r.explanation or r.agreement_text}")
        lines.extend(f"  note: {n}" for n in findings.notes.get(test, []))
    total = findings.counts()
    lines.append("contexts: " + ", ".join(f"{total[c]} {c}" for c in CATEGORIES
                                          if total[c] or c in (Category.AGREES, Category.DIFFERS)))
    reasons = Counter(r.agreement_text for r in rows if category(r) == Category.NOT_COMPARED)
    lines.extend(f"  not compared, {n}x: {why}" for why, n in sorted(reasons.items()))
    return lines


def strict_failure(report: pytest.TestReport, failing: list[str]) -> None:
    """Under ``--distviz-strict``: a test that passed fails when its run logged a note that
    ``journal.fails_strict`` counts (a failed or skipped test keeps its own outcome)."""
    if not failing or not report.passed:
        return
    report.outcome = "failed"
    report.longrepr = ("distviz --distviz-strict: " + plural(len(failing), "gradient note")
                       + " in this test's run:\n" + "\n".join(f"  {n}" for n in failing))


# -- the plugin --------------------------------------------------------------------------------

def _standalone_config(config: pytest.Config) -> TraceConfig:
    """The settings of ``pytest --distviz[=DIR]``; raises ``pytest.UsageError``."""
    value = str(config.getoption("distviz"))
    args = [str(a) for a in config.invocation_params.args]
    if "--distviz" in args:
        at = args.index("--distviz")
        if at + 1 < len(args) and args[at + 1] == value:
            raise pytest.UsageError(f"--distviz {value}: the folder must be given as "
                                    f"--distviz={value} (or put --distviz last to use "
                                    f"{DEFAULT_DIR})")
    contexts = str(config.getoption("distviz_contexts"))
    timeout = float(config.getoption("distviz_hang_timeout"))
    try:
        check_options(contexts, None, ON_HANG, timeout, None)
    except UsageError as exc:
        raise pytest.UsageError(str(exc).replace("--contexts", "--distviz-contexts").replace(
            "--hang-timeout", "--distviz-hang-timeout")) from None
    out = Path(value)
    if not out.is_absolute():
        out = Path(config.invocation_params.dir) / out
    if out.exists() and not out.is_dir():
        raise pytest.UsageError(f"--distviz={value}: expected a folder for the traces, found "
                                "a file; name a folder")
    return TraceConfig(out_dir=str(out), contexts=contexts, on_hang=ON_HANG,
                       hang_timeout=timeout, strict=bool(config.getoption("distviz_strict")),
                       session_dir=tempfile.mkdtemp(prefix="distviz-pytest-"))


def pytest_configure(config: pytest.Config) -> None:
    """Enable the plugin under ``--distviz`` or ``distviz trace``; else do nothing."""
    inherited = TraceConfig.from_env()
    if inherited is not None and inherited.session_dir is not None:
        cfg, own = inherited, False             # distviz trace -- pytest ...
    elif config.getoption("distviz") is not None:
        cfg, own = _standalone_config(config), True
    else:
        return
    if getattr(config, "workerinput", None) is not None:    # a pytest-xdist worker
        return
    config.pluginmanager.register(DistvizSession(config, cfg, own), "distviz-session")


class DistvizSession:
    """The enabled plugin: arms the hooks, names each test's contexts, reports them."""

    def __init__(self, config: pytest.Config, cfg: TraceConfig, own: bool) -> None:
        from distviz.tracing.hooks import inject
        from distviz.tracing.launcher import launch

        self.config, self.own = config, own
        self.cfg = replace(cfg, on_hang=ON_HANG,
                           strict=cfg.strict or bool(config.getoption("distviz_strict")))
        assert self.cfg.session_dir is not None
        self.session: str = self.cfg.session_dir
        self.exitstatus = 0
        self.saved = {k: os.environ.get(k) for k in (ENV, TEST_ENV, "PYTHONPATH")}
        Path(self.cfg.out_dir).mkdir(parents=True, exist_ok=True)
        if own:
            os.environ["PYTHONPATH"] = launch.pythonpath()
            job_files.announce(self.cfg.out_dir, self.session)   # for ``distviz snapshot``
        os.environ[ENV] = self.cfg.to_env()
        if not inject.reconfigure(self.cfg):
            inject.install()
        journal.append(self.session, Event(kind=EventKind.TESTS, pid=os.getpid(), message="pytest"))

    def findings(self) -> Findings:
        writer.settle()     # the rows this process's writer thread has not written yet
        return Findings.of(journal.read(self.session))

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, None, None]:
        os.environ[TEST_ENV] = item.nodeid
        try:
            yield
        finally:
            os.environ.pop(TEST_ENV, None)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]
                                  ) -> Generator[None, Any, None]:
        findings = self.findings() if call.when != "setup" else None
        text = section(findings, item.nodeid) if findings is not None else ""
        if call.when == "teardown" and text:
            item.user_properties.append(("distviz", text))
        outcome = yield
        if call.when == "call" and text:
            outcome.get_result().sections.append(("distviz", text))
        if call.when == "call" and self.cfg.strict and findings is not None:
            strict_failure(outcome.get_result(), findings.failing.get(item.nodeid, []))

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.exitstatus = int(exitstatus)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        findings = self.findings()
        terminalreporter.section("distviz")
        out = self.cfg.out_dir + "/" + ("" if self.own else " (distviz trace's -o folder)")
        for line in summary_lines(findings, out):
            terminalreporter.line(line)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """Write ``index.json`` (``pytest --distviz``; ``distviz trace`` writes its own) and
        put the environment back."""
        if self.own:
            self._write_index()
            job_files.withdraw(self.cfg.out_dir)
            shutil.rmtree(self.session, ignore_errors=True)
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    def _write_index(self) -> None:
        import json

        from distviz.files import write_atomic
        from distviz.tracing.launcher import backward_counts, run_summary

        events = journal.read(self.session)
        found = run_summary.entries(events)
        notes = [n for ns in Findings.of(events).notes.values() for n in ns]
        command = [Path(sys.argv[0]).name, *map(str, self.config.invocation_params.args)]
        index = run_summary.index_json(found, command, self.exitstatus, notes)
        index["backwards"] = backward_counts.backwards_json(events)
        index["cuts"] = run_summary.run_cuts(events)
        write_atomic(Path(self.cfg.out_dir) / "index.json", json.dumps(index, indent=1) + "\n")
