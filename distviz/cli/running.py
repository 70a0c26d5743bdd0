"""``distviz run`` from start to report: the run and its verdicts with progress
(``distviz.judge.policy.run_and_judge``), the recording saved (even when the run failed), and the
report. A plain scenario's run is a recording of one
context, reported as a trace; a training scenario's is reported as its table of contexts
(``distviz.cli.contexts_report``); both end in one function, ``finish_run``."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from distviz.cli.app import stderr_console, unbounded_console
from distviz.cli.options import View
from distviz.cli.output import (
    real_lines,
    report,
    show,
    show_short,
    write_pictures,
)
from distviz.errors import DistvizError, RunError
from distviz.limits import ExitCode
from distviz.outcome import Mode
from distviz.words import plural

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console

    from distviz.judge.analysis import Analysis
    from distviz.judge.policy import JudgedRun
    from distviz.judge.verdict import ContextVerdict
    from distviz.outcome import Stop
    from distviz.replay.result import Replay
    from distviz.runner.supervisor.run import RunOptions
    from distviz.scenario import Scenario
    from distviz.trace.contexts_file import Recording


def run_with_progress(sc: Scenario, opts: RunOptions, mode: Mode, *, quiet: bool,
                      verbose: bool) -> JudgedRun:
    """Run and judge the scenario (``distviz.judge.policy.run_and_judge``) with its phases on
    stderr: one line each (``--verbose``), a spinner on a terminal, or nothing."""
    from distviz.judge.policy import run_and_judge
    err = stderr_console()
    if verbose:
        def say(msg: str) -> None:
            print(f"distviz: {msg}", file=sys.stderr, flush=True)
        return run_and_judge(sc, opts, mode, say)
    if err.is_terminal and not quiet:
        with program_output_above() as console, console.status("starting workers") as status:
            return run_and_judge(sc, opts, mode, lambda m: status.update(m))
    return run_and_judge(sc, opts, mode)


@contextlib.contextmanager
def program_output_above() -> Iterator[Console]:
    """A console on the terminal's standard error for a spinner, while everything else
    written to standard error (the workers print there: a scenario's ``print``) goes through a
    pipe and is printed above the spinner, whole lines at a time, never into its line.

    The workers are forked by a fork server that inherits descriptor 2, so descriptor 2 itself
    is the pipe until the run ends; Python's ``sys.stderr`` of this process goes there too."""
    from multiprocessing import resource_tracker

    from rich.console import Console
    resource_tracker.ensure_running()     # a helper that outlives the run keeps the terminal
    sys.stderr.flush()
    saved = os.dup(2)
    terminal = os.fdopen(saved, "w", buffering=1, encoding="utf-8", errors="replace")
    console = Console(file=terminal, highlight=False, markup=False)
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)
    relay = threading.Thread(target=_relay, args=(read_end, console), daemon=True,
                             name="distviz-output")
    relay.start()
    try:
        yield console
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)       # the pipe ends when the workers and the fork server are gone
        relay.join(timeout=2.0)
        terminal.flush()


def _relay(fd: int, console: Console) -> None:
    """Print what arrives on ``fd`` line by line through ``console`` until the pipe ends."""
    pending = b""
    with os.fdopen(fd, "rb", buffering=0) as pipe:
        while True:
            chunk = pipe.read(65536)
            if not chunk:
                break
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                console.print(line.decode("utf-8", "replace"), markup=False, highlight=False,
                              crop=False, overflow="ignore")
    if pending:
        console.print(pending.decode("utf-8", "replace"), markup=False, highlight=False)


def save_recording(recording: Recording, failure: BaseException | None, out_path: Path,
                   scenario_path: str | None) -> Recording:
    """Save ``recording`` to ``out_path`` (``Recording.save``: one context without training as
    a version 1 trace). When the run failed (``failure``), saves what was recorded, names the
    file in the error and raises it; raises ``RunError`` when no context was recorded."""
    trace = recording.single_trace
    if failure is not None:
        if recording.contexts:
            recording.save(out_path)
            if isinstance(failure, DistvizError):
                failure.message += (
                    f" (partial trace saved to {out_path})" if trace is not None else
                    f" (the {plural(len(recording.contexts), 'context')} recorded before were "
                    f"saved to {out_path})")
        raise failure
    if not recording.contexts:
        raise RunError("no context was recorded: the program never called "
                       "dist_autograd.backward in a chosen context", path=scenario_path)
    recording.save(out_path)
    return recording


def finish_run(sc: Scenario, judged: JudgedRun, mode: Mode, out_path: Path, view: View,
               context: int | None = None) -> ExitCode:
    """The end of ``distviz run``: save the recording (``save_recording``: the run's failure
    is raised after saving what was recorded), then show it with its verdicts (``show_run``);
    return the exit code the verdicts imply."""
    recording = save_recording(judged.recording, judged.error, out_path, sc.path)
    return show_run(recording, mode, out_path, view, context, judged.result.stopped,
                    judged=(judged.verdicts, judged.exit_code))


def show_run(recording: Recording, mode: Mode, out_path: Path, view: View,
             context: int | None = None, stopped: Stop | None = None,
             made: Replay | None = None,
             judged: tuple[list[ContextVerdict], ExitCode] | None = None) -> ExitCode:
    """Write the pictures and print the report of each context's replay and verdict
    (``judged``: the verdicts and the exit code they imply, else judged here,
    ``distviz.judge.policy.judge_recording``, with ``made``: the replay that decided whether to run
    the real backward): one context without training as a trace (its summary and step log),
    several as the table of contexts (``distviz.cli.contexts_report``). Returns that exit code."""
    from distviz.cli.contexts_report import finish_recording
    from distviz.judge.analysis import analysis_from
    from distviz.judge.policy import judge_recording
    recording.pick(context)
    verdicts, code = judged if judged is not None else judge_recording(recording, mode, stopped,
                                                                       made)
    trace = recording.single_trace
    if trace is None:
        finish_recording(recording, verdicts, out_path, context, stopped, view)
    else:
        cv = verdicts[0]
        assert cv.replay is not None and cv.verdict is not None
        _report_trace(analysis_from(trace, cv.replay, cv.verdict), out_path, view)
    return code


def _report_trace(found: Analysis, out_path: Path, view: View) -> None:
    """Write the pictures of a run's one trace and print its report: the summary, the step
    log, what PyTorch did, the time report, the files written."""
    from distviz.analyses.whatif import time_report
    from distviz.render import tree

    trace, rp, verdict, agreement = found.trace, found.replay, found.verdict, found.agreement
    written = write_pictures(found, view.pictures)
    for line in written.warnings:
        stderr_console().print(f"warning: {line}", markup=False, crop=False, overflow="ignore")
    time_lines, timing = time_report(trace, timing=found.timing)
    if view.as_json:
        print(json.dumps(report(trace, rp, verdict, str(out_path), timing), indent=1))
        return
    with contextlib.redirect_stdout(sys.stderr if view.report_to_stderr else sys.stdout):
        out = unbounded_console()
        out.print(tree.render_summary(trace))
        show_log = view.log if view.log is not None else len(rp.events) <= 400
        show(trace, rp, agreement, step=view.step, worker=view.worker, start=view.start,
             end=view.end, log=show_log or view.step)
        if not show_log and not view.step:
            show_short(rp, agreement, f"{plural(len(rp.events), 'replay step')}; see them "
                       f"with: distviz replay {out_path}")
        for line in real_lines(trace) + time_lines:
            out.print(line, markup=False)
        out.print(f"trace written to {out_path}", markup=False)
        for line in written.lines:
            out.print(line, markup=False, crop=False, overflow="ignore")
