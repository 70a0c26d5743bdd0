"""Run generated programs on real RPC workers and judge the replay against PyTorch.

``fuzz(options)`` generates ``options.count`` programs (``distviz.fuzz.generate``), runs each
one as ``distviz run --confirm-hang`` would (the real backward runs even when the replay
predicts a hang, and counts as hung after ``hang_timeout`` seconds), replays the trace and
judges the agreement. A program that disagrees is run again (does it reproduce?) and shrunk
(``distviz.fuzz.shrink``) while it still disagrees on the same checks; the result carries the
minimal program as scenario text. A training program (``distviz.fuzz.training_program``, written as
text) is shrunk as text instead (``distviz.fuzz.shrink_text``). One fork server (which imports
torch once) serves every run.

The judge is a parameter: ``judge(trace, replay) -> Judged``. ``judge_trace`` is the product's
rule (``distviz.judge.verdict``); tests pass a double with a planted wrong rule to
check that the shrinker finds the smallest program that shows it.

This module never imports torch (the runner's parent side does not either) and writes no
files: the workers get each scenario as a value, and saving findings is the caller's business.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Generic, NamedTuple, TypeVar

from distviz.fuzz.generate import generate
from distviz.fuzz.judged import CHECKS, Judged
from distviz.fuzz.program_tree import FEATURES, FuzzProgram, features, size, to_yaml
from distviz.fuzz.settings import FuzzOptions
from distviz.fuzz.shrink import shrink
from distviz.fuzz.training_program import (
    TRAINING_FEATURES,
    TrainingProgram,
    generate_training,
    is_training,
)
from distviz.limits import EXIT_DISAGREE, EXIT_OK, EXIT_RUN_FAILED, ExitCode
from distviz.replay.result import Replay
from distviz.trace import Trace
from distviz.words import plural

__all__ = ["CHECKS", "Finding", "FuzzOptions", "FuzzReport", "Judge", "ProgramResult",
           "Progress", "fuzz", "judge_trace", "reproduce_command", "run_program",
           "summary_lines"]

Judge = Callable[[Trace, Replay], Judged]
P = TypeVar("P")


def judge_trace(trace: Trace, replay: Replay) -> Judged:
    """The product's judgement: the one judge (``distviz.judge.verdict.judge``) on
    ``replay`` against the real run in ``trace``, as the fuzz counts it."""
    from distviz.fuzz.judged import of
    from distviz.judge.verdict import judge
    real = trace.real.outcome if trace.real is not None else "None"
    return of(judge(trace, replay), replay.outcome, real)


@dataclass(frozen=True)
class Finding:
    """A program that disagreed (or whose run failed), kept as scenario text: ``minimal`` is
    the shrunk program, ``original`` the generated one; ``reproduced`` says whether a second
    run of the original showed the same disagreement."""

    minimal: str
    original: str
    minimal_judged: Judged | None
    error: str | None
    reproduced: bool
    shrink_tries: int
    original_size: int
    minimal_size: int
    trace: Trace | None = None


@dataclass(frozen=True)
class ProgramResult:
    """One generated program and what happened to it."""

    index: int
    name: str
    features: tuple[str, ...]
    judged: Judged | None
    error: str | None
    seconds: float
    finding: Finding | None = None

    @property
    def agrees(self) -> bool:
        return self.error is None and self.judged is not None and self.judged.agrees

    def to_json(self) -> dict[str, Any]:
        v = self.judged
        out: dict[str, Any] = {"index": self.index, "name": self.name,
                               "features": list(self.features), "agrees": self.agrees,
                               "seconds": round(self.seconds, 3), "error": self.error}
        if v is not None:
            out.update(predicted=v.predicted, real=v.real, disagreements=list(v.disagreements),
                       checks={k: getattr(v, k) for k in (*CHECKS, "fifo_order")},
                       text=v.text)
        if self.finding is not None:
            out["reproduced"] = self.finding.reproduced
            out["shrink_tries"] = self.finding.shrink_tries
        return out


class Progress(NamedTuple):
    """A progress report: ``done`` of ``total`` programs, the result just finished (or
    ``None`` while a program is being re-run or shrunk), and a short text."""

    done: int
    total: int
    result: ProgramResult | None
    text: str


@dataclass
class FuzzReport:
    """Every program's result, and the numbers over them (``summary``)."""

    options: FuzzOptions
    results: list[ProgramResult] = field(default_factory=list)
    wall_s: float = 0.0

    def summary(self) -> dict[str, Any]:
        """The numbers: counts, per-check agreement in percent of the programs where the
        check applied, outcomes predicted and real, and how often each feature came up."""
        judged = [r.judged for r in self.results if r.judged is not None]

        def pct(check: str) -> float | None:
            vals = [getattr(v, check) for v in judged if getattr(v, check) is not None]
            return round(100.0 * sum(map(bool, vals)) / len(vals), 2) if vals else None

        feats: Counter[str] = Counter(f for r in self.results for f in r.features)
        shown = FEATURES + (TRAINING_FEATURES if self.options.training > 0 else ())
        return {
            "count": len(self.results), "seed": self.options.seed,
            "workers": [self.options.min_workers, self.options.max_workers],
            "agree": sum(r.agrees for r in self.results),
            "disagree": sum(1 for r in self.results if r.judged and not r.judged.agrees),
            "failed": sum(1 for r in self.results if r.error is not None),
            "outcome_agreement_pct": pct("outcome"), "order_agreement_pct": pct("order"),
            "fifo_exact_pct": pct("fifo_order"), "executed_pct": pct("executed"),
            "leaves_pct": pct("leaves"), "gradients_equal_pct": pct("gradients"),
            "gradients_compared": sum(1 for v in judged if v.gradients is not None),
            "predicted": dict(Counter(v.predicted for v in judged)),
            "real": dict(Counter(v.real for v in judged)),
            "training": feats["training"],
            "features": {f: feats[f] for f in shown},
            "wall_s": round(self.wall_s, 2),
        }

    def to_json(self) -> dict[str, Any]:
        return {"summary": self.summary(), "programs": [r.to_json() for r in self.results]}

    @property
    def exit_code(self) -> ExitCode:
        """``EXIT_DISAGREE`` when a program disagrees, else ``EXIT_RUN_FAILED`` when one failed
        to run, else ``EXIT_OK``."""
        if any(r.judged is not None and not r.judged.agrees for r in self.results):
            return EXIT_DISAGREE
        return EXIT_RUN_FAILED if any(r.error is not None for r in self.results) else EXIT_OK


class _Runs:
    """Runs programs one after the other with one kept fork server; remembers the last trace."""

    def __init__(self, options: FuzzOptions, judge: Judge) -> None:
        self.options = options
        self.judge = judge
        self.last_trace: Trace | None = None

    def close(self) -> None:
        from distviz.runner.supervisor.run import stop_server
        stop_server()

    def run(self, program: FuzzProgram) -> tuple[Judged | None, str | None]:
        judged, error, trace = run_program(program, self.options, self.judge)
        self.last_trace = trace
        return judged, error


def run_program(program: FuzzProgram, options: FuzzOptions, judge: Judge = judge_trace
                ) -> tuple[Judged | None, str | None, Trace | None]:
    """Run ``program`` on real workers and judge the replay.

    Returns ``(judged, None, trace)``, or ``(None, error, trace or None)`` when the scenario
    does not load or the run fails (a generator or runner problem, not a disagreement).
    Raises ``Interrupted`` on Ctrl-C, after every worker is gone.
    """
    from distviz.fuzz.execute import run_text

    judged, error = run_text(to_yaml(program), f"{program.name}.yaml", options)
    trace = judged.result.trace if judged is not None else None
    if error is not None or judged is None or trace is None or not judged.verdicts:
        return None, error or "no trace", trace
    rp = judged.verdicts[0].replay
    assert rp is not None    # a plain scenario's one context has its recorded pass
    return judge(trace, rp), None, trace


def _same_problem(checks: set[str], error: str | None
                  ) -> Callable[[Judged | None, str | None], bool]:
    """Whether a later run ``(judged, error)`` shows the first run's problem: a failed run
    again when the first failed, else a disagreement on one of the same ``checks``."""
    def same(v: Judged | None, e: str | None) -> bool:
        return e is not None if error is not None else (
            v is not None and bool(checks & set(v.disagreements)))
    return same


@dataclass(frozen=True)
class _Subject(Generic[P]):
    """One kind of program as the examination of a finding sees it: a plain ``FuzzProgram`` (shrunk
    as a value) or a training program's text (shrunk as text). ``run`` runs a version and
    judges it; ``shrink(start, still_fails, max_tries, on_try)`` returns the smallest that
    still fails and the tries spent; ``size`` and ``sized`` measure a version and say it
    (``size 5``, ``12 lines``); ``span(a, b)`` says a shrink (``5 -> 3``, ``12 -> 8 lines``);
    ``write(version, note)`` is the finding's text."""

    name: str
    program: P
    run: Callable[[P], tuple[Judged | None, str | None, Trace | None]]
    shrink: Callable[[P, Callable[[P], bool], int, Callable[[P, bool], None]], tuple[P, int]]
    size: Callable[[P], int]
    sized: Callable[[int], str]
    span: Callable[[int, int], str]
    write: Callable[[P, str], str]
    original: str


def _examine(subject: _Subject[P], first: Judged | None, first_trace: Trace | None,
             error: str | None, options: FuzzOptions, say: Callable[[str], None]) -> Finding:
    """Run a disagreeing (or failing) program again, and shrink it while it still shows the
    same problem (a failed run, or a disagreement on one of the same checks)."""
    checks = set(first.disagreements) if first is not None else set()
    same = _same_problem(checks, error)
    name, program = subject.name, subject.program
    best: tuple[Judged | None, Trace | None] = (first, first_trace)
    say(f"{name}: running it again")
    again, again_error, again_trace = subject.run(program)
    reproduced = same(again, again_error)
    minimal, tries = program, 0
    if reproduced:
        best = (again, again_trace)
    if reproduced and options.shrink:
        def still_fails(candidate: P) -> bool:
            nonlocal best
            v, e, t = subject.run(candidate)
            if same(v, e):
                best = (v, t)
            return same(v, e)

        def on_try(candidate: P, failed: bool) -> None:
            say(f"{name}: shrinking, {subject.sized(subject.size(candidate))} "
                f"{'still disagrees' if failed else 'agrees'}")

        minimal, tries = subject.shrink(program, still_fails, options.max_shrink_tries, on_try)
    what = (f"the run fails: {error}" if error is not None
            else f"disagrees on: {', '.join(c for c in CHECKS if c in checks)}")
    if not reproduced:
        note = f"{name} as generated; {what} (not again on a second run)"
    else:
        note = (f"minimal program shrunk from {name} "
                f"({subject.span(subject.size(program), subject.size(minimal))}); {what}")
    return Finding(minimal=subject.write(minimal, note), original=subject.original,
                   minimal_judged=best[0], error=error, reproduced=reproduced,
                   shrink_tries=tries, original_size=subject.size(program),
                   minimal_size=subject.size(minimal), trace=best[1])


def _plain_subject(runs: _Runs, program: FuzzProgram) -> _Subject[FuzzProgram]:
    def run(candidate: FuzzProgram) -> tuple[Judged | None, str | None, Trace | None]:
        v, e = runs.run(candidate)
        return v, e, runs.last_trace

    def shrunk(start: FuzzProgram, still_fails: Callable[[FuzzProgram], bool], tries: int,
               on_try: Callable[[FuzzProgram, bool], None]) -> tuple[FuzzProgram, int]:
        res = shrink(start, still_fails, tries, on_try)
        return res.program, res.tries

    return _Subject(name=program.name, program=program, run=run, shrink=shrunk, size=size,
                    sized=lambda n: f"size {n}", span=lambda a, b: f"{a} -> {b}",
                    write=lambda p, note: to_yaml(replace(p, description=note)),
                    original=to_yaml(program))


def _training_subject(program: TrainingProgram, options: FuzzOptions) -> _Subject[str]:
    from distviz.fuzz.execute_training import run_training_program
    from distviz.fuzz.shrink_text import lines_of, scenario_loads, shrink_text

    def run(text: str) -> tuple[Judged | None, str | None, Trace | None]:
        v, e = run_training_program(replace(program, text=text), options)
        return v, e, None

    def shrunk(start: str, still_fails: Callable[[str], bool], tries: int,
               on_try: Callable[[str, bool], None]) -> tuple[str, int]:
        res = shrink_text(start, still_fails, scenario_loads, tries, on_try)
        return res.text, res.tries

    return _Subject(name=program.name, program=program.text, run=run, shrink=shrunk,
                    size=lines_of, sized=lambda n: f"{n} lines",
                    span=lambda a, b: f"{a} -> {b} lines",
                    write=lambda text, note: f"# {note}\n{text}", original=program.text)


def fuzz(options: FuzzOptions, progress: Callable[[Progress], None] | None = None,
         judge: Judge | None = None) -> FuzzReport:
    """Generate, run and judge ``options.count`` programs; see the module docstring.

    ``judge`` defaults to ``judge_trace``. ``progress`` is called while programs are re-run or
    shrunk and once per finished program.
    Raises ``Interrupted`` on Ctrl-C (every worker is gone by then) and ``ValueError`` for a
    bad worker range.
    """
    report = FuzzReport(options)
    tell = progress or (lambda _p: None)
    runs = _Runs(options, judge or judge_trace)
    t0 = time.monotonic()
    try:
        for index in range(options.count):
            if is_training(options.seed, index, options.training):
                result = _training_result(runs, index, tell)
                report.results.append(result)
                report.wall_s = time.monotonic() - t0
                tell(Progress(index + 1, options.count, result, result.name))
                continue
            program = generate(options.seed, index, options.min_workers, options.max_workers)
            start = time.monotonic()
            first, error = runs.run(program)
            finding = None
            if error is not None or (first is not None and not first.agrees):
                def say(text: str, done: int = index) -> None:
                    tell(Progress(done, options.count, None, text))
                finding = _examine(_plain_subject(runs, program), first, runs.last_trace,
                                   error, options, say)
            result = ProgramResult(index, program.name, tuple(sorted(features(program))),
                                   first, error, time.monotonic() - start, finding)
            report.results.append(result)
            report.wall_s = time.monotonic() - t0
            tell(Progress(index + 1, options.count, result, program.name))
    finally:
        runs.close()
        report.wall_s = time.monotonic() - t0
    return report


def _training_result(runs: _Runs, index: int, tell: Callable[[Progress], None]
                     ) -> ProgramResult:
    """Run and judge the ``index``-th program as a training program; a disagreement (or a
    failed run) is run again and, when it shows again, shrunk as text
    (``distviz.fuzz.shrink_text``)."""
    from distviz.fuzz.execute_training import run_training_program
    options = runs.options
    program = generate_training(options.seed, index)
    start = time.monotonic()
    first, error = run_training_program(program, options)
    finding = None
    if error is not None or (first is not None and not first.agrees):
        def say(text: str) -> None:
            tell(Progress(index, options.count, None, text))
        finding = _training_finding(program, first, error, options, say)
    return ProgramResult(index, program.name, program.features, first, error,
                         time.monotonic() - start, finding)


def _training_finding(program: TrainingProgram, first: Judged | None, error: str | None,
                      options: FuzzOptions, say: Callable[[str], None]) -> Finding:
    """Run a disagreeing (or failing) training program again and shrink its text while it
    shows the same problem (``_examine``)."""
    return _examine(_training_subject(program, options), first, None, error, options, say)


def reproduce_command(path: str | os.PathLike[str], options: FuzzOptions) -> str:
    """The command that runs a saved program as ``distviz fuzz`` did."""
    return f"distviz run {os.fspath(path)} --confirm-hang --hang-timeout {options.hang_timeout:g}"


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """The summary as a few sentences for a person (``FuzzReport.summary()``)."""
    def pct(key: str) -> str:
        v = summary.get(key)
        return "n/a" if v is None else f"{v:.2f}%"

    outcomes = ", ".join(f"{k} {summary['predicted'].get(k, 0)}"
                         for k in ("completed", "hang", "error"))
    return [
        f"{plural(summary['count'], 'program')} (seed {summary['seed']}, {summary['workers'][0]}-"
        f"{summary['workers'][1]} workers) in {summary['wall_s']:.1f} s: {summary['agree']} "
        f"agree, {summary['disagree']} disagree, {summary['failed']} failed to run",
        f"outcome: the replay predicts PyTorch's outcome in {pct('outcome_agreement_pct')} "
        f"(predicted {outcomes})",
        f"order: each worker's order is exact in {pct('order_agreement_pct')} with the observed "
        f"arrival order; the FIFO guess alone is exact in {pct('fifo_exact_pct')}",
        f"executed: the same nodes run in {pct('executed_pct')}; the same leaves get gradients "
        f"in {pct('leaves_pct')}",
        f"gradients: equal the single-process reference in {pct('gradients_equal_pct')} of "
        f"{plural(summary['gradients_compared'], 'completed run')}",
    ] + ([f"training: {plural(summary['training'], 'program')} trained 2-3 iterations; the "
          "checks cover every recorded context, and gradients also their final parameters "
          "against the reference training"] if summary.get("training") else [])
