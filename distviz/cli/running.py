"""``distviz run`` from start to report: the run with its progress, the trace (saved even when
the run failed), the replay and the report."""

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
from distviz.cli.output import analysis_of, real_lines, replay_of, report, show, write_pictures
from distviz.errors import DistvizError
from distviz.trace import Trace
from distviz.trace.sections import Meta, Real, ScenarioInfo
from distviz.words import plural

if TYPE_CHECKING:  # pragma: no cover
    from distviz.replay.result import Replay
    from distviz.runner.parent import RunOptions, RunResult
    from distviz.scenario import Scenario


@dataclass
class Decided:
    """The FAST replay of the recorded graph that decided whether to run the real backward,
    kept for the run's analysis (``finish_run``), so the graph is replayed once."""

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
    from distviz.runner.parent import run_scenario
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


def run_trace(sc: Scenario, result: RunResult, mode: str, out_path: Path) -> Trace:
    """The trace of a finished run with its ``meta``. When the run failed, saves what was
    recorded (or just the scenario and the error) to ``out_path`` and raises the failure."""
    trace = result.trace
    failure = result.error
    if trace is None:
        if failure is None:
            raise RuntimeError("the run returned neither a trace nor an error")
        # nothing was recorded yet: keep what is known (scenario, workers, the error)
        trace = Trace(workers=list(sc.workers), initiator=sc.initiator, context_id=-1, nodes=[],
                      passes=[], scenario=ScenarioInfo(
                          name=sc.name, description=sc.description, path=sc.path,
                          params=dict(sc.params), seed=sc.seed,
                          order=("name", "description", "path", "params", "seed")))
    trace.meta = run_meta(result.timings, mode)
    if failure is not None:
        text = failure.one_line() if isinstance(failure, DistvizError) else str(failure)
        if trace.real is None or trace.real.outcome == "skipped":
            trace.real = Real(outcome="error", error=text,
                              order=("outcome", "error", "events", "gradients"))
        trace.save(out_path)
        if isinstance(failure, DistvizError):
            failure.message += f" (partial trace saved to {out_path})"
        raise failure
    return trace


def finish_run(trace: Trace, mode: str, out_path: Path, view: View,
               made: Replay | None = None) -> int:
    """Save the trace, replay it (``made``: the replay that decided whether to run the real
    backward, used when it is one in ``mode``), write the pictures, print the report; return
    the exit code."""
    from distviz.render import terminal
    from distviz.replay.whatif import time_report

    trace.save(out_path)
    found = analysis_of(trace, mode, made)   # the replay, verdict and timing, made once
    rp, verdict, agreement = found.replay, found.verdict, found.agreement
    written = write_pictures(found, view.pictures)
    for line in written.warnings:
        stderr_console().print(f"warning: {line}", markup=False, crop=False, overflow="ignore")
    time_lines, timing = time_report(trace, timing=found.timing)
    if view.as_json:
        print(json.dumps(report(trace, rp, verdict, str(out_path), timing), indent=1))
        return verdict.exit_code
    with contextlib.redirect_stdout(sys.stderr if view.report_to_stderr else sys.stdout):
        out = unbounded_console()
        out.print(terminal.render_summary(trace))
        show_log = view.log if view.log is not None else len(rp.events) <= 400
        show(trace, rp, agreement, step=view.step, worker=view.worker, start=view.start,
              end=view.end, log=show_log or view.step)
        if not show_log and not view.step:
            out.print(f"{plural(len(rp.events), 'replay step')}; see them with: distviz replay "
                      f"{out_path}",
                      markup=False)
            out.print(rp.summary(), markup=False)
            out.print(agreement.text, markup=False)
        for line in real_lines(trace) + time_lines:
            out.print(line, markup=False)
        out.print(f"trace written to {out_path}", markup=False)
        for line in written.lines:
            out.print(line, markup=False, crop=False, overflow="ignore")
    return verdict.exit_code
