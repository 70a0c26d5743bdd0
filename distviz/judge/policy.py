"""Run a scenario and judge it: the library's one "run and judge" (torch-free in this process).

``run_and_judge(scenario, options, mode)`` runs the scenario on real RPC workers
(``distviz.runner.supervisor.run_scenario``), under the one policy on whether to run PyTorch's real
backward (``backward_policy``: not when the FAST replay predicts a hang, unless
``options.confirm_hang``), makes the run's recording even when the run failed
(``recording_of``: for a plain scenario that failed before its graph was recorded, a trace of
what is known) and judges every context with the one judge (``distviz.judge.verdict``). It
returns a ``JudgedRun``: the run's result, the recording, each context's replay and verdict, and
the exit code they imply. ``distviz run``, the fuzz (plain and training programs) and scripts
call it; the CLI only shows and saves what it returns.

The FAST replay that decided whether to run the real backward is the judged one when the mode
is ``fast``: the graph is replayed once.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from distviz.errors import DistvizError
from distviz.limits import ExitCode
from distviz.outcome import Mode, hang_not_run
from distviz.trace import Trace
from distviz.trace.contexts_file import Recording
from distviz.trace.sections import Meta, Real

if TYPE_CHECKING:  # pragma: no cover
    from distviz.judge.verdict import ContextVerdict
    from distviz.outcome import Stop
    from distviz.replay.result import Replay
    from distviz.runner.supervisor.run import RunOptions, RunResult
    from distviz.scenario import Scenario

__all__ = ["Decided", "JudgedRun", "backward_policy", "judge_recording", "recording_of",
           "run_and_judge", "run_meta"]


@dataclass
class Decided:
    """The FAST replay of the recorded graph that decided whether to run the real backward,
    kept for the run's verdict, so the graph is replayed once."""

    replay: Replay | None = None


def backward_policy(confirm_hang: bool, decided: Decided
                    ) -> Callable[[Trace], tuple[bool, str | None]]:
    """The runner's ``decide_backward``: run the real backward unless the FAST replay predicts
    a hang (and ``confirm_hang`` is not set); the replay is kept in ``decided``."""
    def decide(trace: Trace) -> tuple[bool, str | None]:
        from distviz.replay.result import replay
        decided.replay = replay(trace, Mode.FAST)
        why = hang_not_run(decided.replay.outcome, confirm_hang)
        return why is None, why
    return decide


def run_meta(timings: dict[str, float], mode: Mode) -> Meta:
    """The ``meta`` section a run writes: versions, phase times, the replay mode."""
    from distviz import __version__
    return Meta(distviz_version=__version__, python=sys.version.split()[0],
                timings_s={k: round(v, 4) for k, v in sorted(timings.items())}, mode=mode,
                order=("distviz_version", "python", "timings_s", "mode"))


def recording_of(sc: Scenario, result: RunResult, mode: Mode) -> Recording:
    """What the run recorded, with its ``meta`` (``run_meta``). When the run failed: what was
    recorded before; for a plain scenario that recorded nothing, a trace of what is known (the
    scenario, the workers); a plain scenario's one trace whose real backward did not run gets
    the failure as its ``real`` error. Raises ``RuntimeError`` when the run returned neither a
    recording nor an error (a bug)."""
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
    if failure is not None and trace is not None and (
            trace.real is None or trace.real.outcome == "skipped"):
        text = failure.one_line() if isinstance(failure, DistvizError) else str(failure)
        trace.real = Real(outcome="error", error=text,
                          order=("outcome", "error", "events", "gradients"))
    return recording


def _unrecorded(sc: Scenario) -> Trace:
    """The trace of a plain scenario's run that failed before its graph was recorded."""
    from distviz.runner.supervisor.collate import scenario_info
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


def judge_recording(recording: Recording, mode: Mode, stopped: Stop | None = None,
                    made: Replay | None = None) -> tuple[list[ContextVerdict], ExitCode]:
    """Every context's replay (in ``mode``) and verdict, and the exit code they imply
    (``recording_exit_code``). ``made``: a replay of the one trace of ``recording``, used when
    it is one in ``mode``."""
    from distviz.judge.analysis import replay_for
    from distviz.judge.verdict import (
        ContextVerdict,
        context_verdicts,
        judge,
        recording_exit_code,
    )
    trace = recording.single_trace
    if trace is None:
        verdicts = context_verdicts(recording, mode)
    else:
        rp = replay_for(trace, mode, made)
        verdicts = [ContextVerdict(rp, judge(trace, rp))]
    return verdicts, recording_exit_code(recording, verdicts, stopped)


@dataclass
class JudgedRun:
    """A judged run: the runner's ``result``, the ``recording`` (``recording_of``), each
    context's replay and verdict and the ``exit_code`` they imply; a failed run (``error``)
    is not judged (no verdicts, the failure's exit code)."""

    result: RunResult
    recording: Recording
    verdicts: list[ContextVerdict] = field(default_factory=list)
    exit_code: ExitCode = ExitCode.OK

    @property
    def error(self) -> BaseException | None:
        return self.result.error


def run_and_judge(sc: Scenario, options: RunOptions, mode: Mode = Mode.FAST,
                  say: Callable[[str], None] | None = None) -> JudgedRun:
    """Run ``sc`` on real workers and judge it (see the module docstring). ``say`` hears the
    run's phases. Raises nothing for a failed run: its error is ``JudgedRun.error``."""
    from distviz.runner.supervisor.run import run_scenario
    decided = Decided()
    result = run_scenario(sc, options, backward_policy(options.confirm_hang, decided), say)
    recording = recording_of(sc, result, mode)
    if result.error is not None:
        return JudgedRun(result, recording, exit_code=result.error.exit_code)
    if not recording.contexts:
        return JudgedRun(result, recording)
    verdicts, code = judge_recording(recording, mode, result.stopped, decided.replay)
    return JudgedRun(result, recording, verdicts, code)
