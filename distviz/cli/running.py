"""``distviz run`` from start to report: the run with its progress, the recording (saved even
when the run failed), the replay and the report. A plain scenario's run is a recording of one
context, reported as a trace; a training scenario's is reported as its table of contexts
(``distviz.cli.recording``); both end in one function, ``finish_run``."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from distviz.cli.app import stderr_console, unbounded_console
from distviz.cli.options import View
from distviz.cli.output import (
    analysis_of,
    real_lines,
    replay_of,
    report,
    show,
    show_short,
    write_pictures,
)
from distviz.errors import DistvizError, RunError
from distviz.trace import Trace
from distviz.trace.recording import Recording
from distviz.trace.sections import Meta, Real
from distviz.words import plural

if TYPE_CHECKING:  # pragma: no cover
    from distviz.replay.analysis import Analysis
    from distviz.replay.result import Replay
    from distviz.runner.parent.run import RunOptions, RunResult
    from distviz.scenario import Scenario


@dataclass
class Decided:
    """The FAST replay of the recorded graph that decided whether to run the real backward,
    kept for the run's analysis (``show_run``), so the graph is replayed once."""

    replay: Replay | None = None


def decider(confirm_hang: bool, decided: Decided
            ) -> Callable[[Trace], tuple[bool, str | None]]:
    """The runner's ``decide_backward``: run the real backward unless the FAST replay predicts
    a hang (and ``--confirm-hang`` was not given); the replay is kept in ``decided``."""
    def decide(trace: Trace) -> tuple[bool, str | None]:
        decided.replay = replay_of(trace, "fast")
        if decided.replay.outcome == "hang" and not confirm_hang:
            return False, ("the replay predicts a FAST-mode hang "
                           "(use --confirm-hang to run it anyway)")
        return True, None
    return decide


def run_with_progress(sc: Scenario, opts: RunOptions, *, quiet: bool, verbose: bool,
                      decided: Decided | None = None) -> RunResult:
    """Run the scenario with its phases on stderr: one line each (``--verbose``), a spinner
    on a terminal, or nothing. Returns the ``RunResult``; ``decided`` keeps the replay that
    decided whether to run the real backward."""
    from distviz.runner.parent.run import run_scenario
    decide = decider(opts.confirm_hang, decided if decided is not None else Decided())
    err = stderr_console()
    if verbose:
        def say(msg: str) -> None:
            print(f"distviz: {msg}", file=sys.stderr, flush=True)
        return run_scenario(sc, opts, decide, say)
    if err.is_terminal and not quiet:
        with program_output_above() as console, console.status("starting workers") as status:
            return run_scenario(sc, opts, decide, lambda m: status.update(m))
    return run_scenario(sc, opts, decide, None)


@contextlib.contextmanager
def program_output_above() -> Iterator[Console]:
    """A console on the terminal's standard error for a spinner, while everything else
    written to standard error (the workers print there: a scenario's ``print``) goes through a
    pipe and is printed above the spinner, whole lines at a time, never into its line.

    The workers are forked by a fork server that inherits descriptor 2, so descriptor 2 itself
    is the pipe until the run ends; Python's ``sys.stderr`` of this process goes there too."""
    from multiprocessing import resource_tracker
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


def run_meta(timings: dict[str, float], mode: str) -> Meta:
    """The ``meta`` section ``distviz run`` writes: versions, phase times, the replay mode."""
    from distviz import __version__
    return Meta(distviz_version=__version__, python=sys.version.split()[0],
                timings_s={k: round(v, 4) for k, v in sorted(timings.items())}, mode=mode,
                order=("distviz_version", "python", "timings_s", "mode"))


def save_run(sc: Scenario, result: RunResult, mode: str, out_path: Path) -> Recording:
    """What the run recorded, with its ``meta``, saved to ``out_path`` (``Recording.save``: one
    context without training as a version 1 trace). When the run failed, saves what was
    recorded before (for a plain scenario, when nothing was: the scenario, the workers and the
    error), names the file in the error and raises it."""
    failure = result.error
    recording = result.recording
    if recording is None and not sc.training:
        if failure is None:
            raise RuntimeError("the run returned neither a recording nor an error")
        recording = Recording.single(_unrecorded(sc))   # keep what is known
    if recording is None:
        recording = Recording(contexts=[], iterations=[], workers=list(sc.workers))
    _stamp(recording, run_meta(result.timings, mode))
    trace = recording.single_trace
    if failure is not None:
        if trace is not None and (trace.real is None or trace.real.outcome == "skipped"):
            text = failure.one_line() if isinstance(failure, DistvizError) else str(failure)
            trace.real = Real(outcome="error", error=text,
                              order=("outcome", "error", "events", "gradients"))
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
                       "dist_autograd.backward in a chosen context", path=sc.path)
    recording.save(out_path)
    return recording


def _unrecorded(sc: Scenario) -> Trace:
    """The trace of a plain scenario's run that failed before its graph was recorded."""
    from distviz.runner.parent.collate import scenario_info
    return Trace(workers=list(sc.workers), initiator=sc.initiator, context_id=-1, nodes=[],
                 passes=[], scenario=scenario_info(sc))


def _stamp(recording: Recording, meta: Meta) -> None:
    """Give ``recording`` the run's ``meta`` (keeping the mark of a partial recording); a
    version 1 file keeps it in its one trace."""
    partial = recording.meta.get("partial")
    if partial is not None:
        meta["partial"] = partial
    recording.meta = meta
    trace = recording.single_trace
    if trace is not None:
        trace.meta = meta


def finish_run(sc: Scenario, result: RunResult, mode: str, out_path: Path, view: View,
               context: int | None = None, made: Replay | None = None) -> int:
    """The end of ``distviz run``: save the recording (``save_run``: the run's failure is
    raised after saving what was recorded), then show it (``show_run``); return the exit code.
    """
    recording = save_run(sc, result, mode, out_path)
    return show_run(recording, mode, out_path, view, context, result.stopped, made)


def show_run(recording: Recording, mode: str, out_path: Path, view: View,
             context: int | None = None, stopped: str | None = None,
             made: Replay | None = None) -> int:
    """Replay and judge each context once, write the pictures and print the report: one
    context without training as a trace (its summary and step log), several as the table of
    contexts (``distviz.cli.recording``). Returns the exit code, the most severe of the
    contexts' verdicts (``distviz.replay.verdict.recording_exit_code``). ``made``: the replay
    that decided whether to run the real backward, used when it is one in ``mode``."""
    from distviz.cli.recording import finish_recording
    from distviz.replay.verdict import ContextVerdict, recording_exit_code
    recording.pick(context)
    trace = recording.single_trace
    if trace is None:
        reports = finish_recording(recording, mode, out_path, context, stopped, view)
    else:
        found = analysis_of(trace, mode, made)   # the replay, verdict and timing, made once
        _report_trace(found, out_path, view)
        reports = [ContextVerdict(found.replay, found.verdict)]
    return recording_exit_code(recording, reports, stopped)


def _report_trace(found: Analysis, out_path: Path, view: View) -> None:
    """Write the pictures of a run's one trace and print its report: the summary, the step
    log, what PyTorch did, the time report, the files written."""
    from distviz.render import terminal
    from distviz.replay.whatif import time_report

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
        out.print(terminal.render_summary(trace))
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
