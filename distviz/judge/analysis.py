"""One run's analysis, computed once and handed to every renderer (pure).

``analysis(trace, mode)`` replays the trace, judges the replay against PyTorch (the one verdict,
``distviz.judge.verdict``) and analyses where the real backward spent its time
(``distviz.analyses.timing``). The terminal report, the JSON report, the pictures, the HTML
viewer and the Perfetto export all read this one value, so nothing is replayed or analysed
twice for one command.
"""

from __future__ import annotations

from dataclasses import dataclass

from distviz.analyses.timing import Timing, analyze
from distviz.judge.findings import Agreement
from distviz.judge.verdict import Verdict, judge
from distviz.outcome import Mode
from distviz.replay.result import Replay
from distviz.replay.result import replay as run_replay
from distviz.trace import Trace

__all__ = ["Analysis", "analysis", "analysis_from", "replay_for"]


@dataclass(frozen=True)
class Analysis:
    """A trace, its replay, the verdict on the replay and the real backward's timing
    (``None`` without a real run's events)."""

    trace: Trace
    replay: Replay
    verdict: Verdict
    timing: Timing | None

    @property
    def agreement(self) -> Agreement:
        """The agreement renderers show (the verdict's)."""
        return self.verdict.agreement


def analysis(trace: Trace, mode: Mode = Mode.FAST, made: Replay | None = None) -> Analysis:
    """Replay ``trace`` in ``mode`` (``fast`` or ``smart``), judge it and time the real run.

    ``made``: a replay of this very trace already made (``distviz run`` replays the recorded
    graph in FAST mode before the real backward, to decide whether to run it); it is used when
    it is one of ``trace`` in ``mode`` in FIFO order, else ``trace`` is replayed here."""
    rp = replay_for(trace, mode, made)
    return Analysis(trace=trace, replay=rp, verdict=judge(trace, rp), timing=analyze(trace))


def replay_for(trace: Trace, mode: Mode, made: Replay | None = None) -> Replay:
    """``made`` when it is a replay of this very ``trace`` in ``mode`` in FIFO order, else a
    new replay of ``trace`` in ``mode``."""
    if made is not None and made.trace is trace and made.mode == mode and not made.arrival:
        return made
    return run_replay(trace, mode)


def analysis_from(trace: Trace, rp: Replay, judged: Verdict) -> Analysis:
    """The analysis of ``trace`` from its replay and verdict already made (a recording's
    contexts, ``distviz.judge.verdict.context_verdicts``): only the timing is made here."""
    return Analysis(trace=trace, replay=rp, verdict=judged, timing=analyze(trace))
