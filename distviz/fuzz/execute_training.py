"""Run a generated training program on real workers and judge it as ``distviz run`` does.

The judgement is the product's one verdict: ``distviz.judge.verdict.context_verdicts``
replays and judges every recorded context, and ``recording_exit_code`` is the code ``distviz
run`` would exit with (a final parameter that differs from the reference training counts as a
disagreement). ``judge_training_run`` folds them into one ``Judged``: a check holds when it
holds in every context, and ``gradients`` also needs the final parameters to equal the
reference. Never imports torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from distviz.fuzz.judged import CHECKS, Judged
from distviz.limits import EXIT_DISAGREE
from distviz.outcome import Mode, Outcome, RealOutcome, Stop

OutcomeT = TypeVar("OutcomeT", bound=str)

if TYPE_CHECKING:
    from distviz.fuzz.settings import FuzzOptions
    from distviz.fuzz.training_program import TrainingProgram
    from distviz.judge.verdict import ContextVerdict, Verdict
    from distviz.trace.contexts_file import Recording

__all__ = ["judge_training_run", "run_training_program"]

_CHECKS = (*CHECKS, "fifo_order")


def _every(values: list[bool | None]) -> bool | None:
    known = [v for v in values if v is not None]
    return all(known) if known else None


def _holds(v: Verdict, name: str) -> bool | None:
    return v.agreement.fifo_order if name == "fifo_order" else v.holds(name)


def _outcome(outcomes: list[OutcomeT], completed: OutcomeT) -> OutcomeT:
    """A run's outcome from its contexts': the first that did not complete, else completed."""
    return next((o for o in outcomes if o != "completed"), completed)


def judge_training_run(recording: Recording, stopped: Stop | None,
                       reports: list[ContextVerdict] | None = None) -> Judged:
    """What the fuzz counts of a training run: the agreement of every recorded context (as
    ``distviz run`` judges it; ``reports``: the contexts' replays and verdicts already made)
    and the final parameters against the reference."""
    from distviz.judge.verdict import context_verdicts, recording_exit_code, recording_text
    if reports is None:
        reports = context_verdicts(recording, Mode.FAST)
    code = recording_exit_code(recording, reports, stopped)
    verdicts = [cv.verdict for cv in reports if cv.verdict is not None]
    checks: dict[str, Any] = {k: _every([_holds(v, k) for v in verdicts]) for k in _CHECKS}
    summary = recording.training
    final_ok = summary.ok if summary is not None else None
    if final_ok is False or (code == EXIT_DISAGREE and not any(
            checks[k] is False for k in _CHECKS if k != "fifo_order")):
        checks["gradients"] = False
    predicted: Outcome = _outcome([rp.outcome for rp, _ag in reports if rp is not None],
                                  "completed")
    real: RealOutcome = _outcome([t.real.outcome for t in recording.contexts
                                  if t.real is not None], "completed")
    if stopped is not None and real not in ("hang", "error"):
        # stopped before PyTorch ran that backward (a predicted hang not confirmed): the stop
        # says what it was; a confirmed hang or a raised error is in the context's own outcome
        real = stopped.kind.outcome
    # the outcome is the verdicts'; a stopped training is the one fact they do not hold
    outcome = checks["outcome"] is not False and (stopped is None or real == predicted)
    return Judged(predicted=predicted, real=real, outcome=outcome,
                  order=checks["order"], legality=checks["legality"],
                  fifo_order=checks["fifo_order"], executed=checks["executed"],
                  leaves=checks["leaves"], gradients=checks["gradients"],
                  zeros=checks["zeros"], text=recording_text(recording, reports))


def run_training_program(program: TrainingProgram, options: FuzzOptions
                         ) -> tuple[Judged | None, str | None]:
    """Run ``program`` on real workers and judge it: ``(verdict, None)``, or ``(None,
    error)`` when the scenario does not load, the run fails or nothing was recorded.
    Raises ``Interrupted`` on Ctrl-C, after every worker is gone."""
    from distviz.fuzz.execute import run_text

    judged, error = run_text(program.text, f"{program.name}.yaml", options)
    if judged is None or error is not None:
        return None, error
    if not judged.recording.contexts:
        return None, "no context was recorded"
    return judge_training_run(judged.recording, judged.result.stopped, judged.verdicts), None
