"""How a backward ends, as types every side shares (pure, torch-free).

``Outcome`` is how one backward pass ends, in the replay and in PyTorch's real run;
``RealOutcome`` adds ``skipped`` (the real backward was not run, ``real.reason`` says why);
``ContextOutcome`` is a context's, as the verdict reports it: ``unfinished`` when the traced
process ended during the real backward. The trace's JSON holds these words as they are
(``docs/trace-format.md``); mypy checks every comparison with them (``strict_equality``).

``Mode`` is how the distributed backward picks the sends that take part: PyTorch's FAST mode,
or the SMART mode RFC #23110 proposed (replayed, never implemented by PyTorch).

``Stop`` is why distviz stopped a training early: its ``kind`` (a predicted hang, a backward
that hung, a backward that raised) decides; its ``words`` are only shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final, Literal, get_args

__all__ = ["CONTEXT_OUTCOMES", "HANG_NOT_RUN", "OUTCOMES", "Category", "ContextOutcome", "Mode",
           "Outcome", "RealOutcome", "Stop", "StopKind", "hang_not_run"]

Outcome = Literal["completed", "hang", "error"]
RealOutcome = Literal["completed", "hang", "error", "skipped"]
ContextOutcome = Literal["completed", "hang", "error", "unfinished"]

OUTCOMES: Final[tuple[Outcome, ...]] = get_args(Outcome)
CONTEXT_OUTCOMES: Final[tuple[ContextOutcome, ...]] = get_args(ContextOutcome)


class Mode(StrEnum):
    """How a distributed backward picks the sends that take part (``--mode``; the trace's
    ``meta.mode`` holds the word)."""

    FAST = "fast"      # PyTorch's algorithm: every send of the context
    SMART = "smart"    # RFC #23110's proposal: only the sends in the roots' lineage


class StopKind(StrEnum):
    """What stopped a trainer's main (its value is the word on the runner's pipe)."""

    PREDICTED_HANG = "predicted hang"   # the replay predicts a hang; the real one was not run
    HUNG = "hung"                       # the real backward did not return within the time-out
    RAISED = "raised"                   # the real backward raised

    @property
    def outcome(self) -> Outcome:
        """The backward's outcome this stop stands for: ``hang`` or ``error``."""
        return "error" if self is StopKind.RAISED else "hang"


@dataclass(frozen=True)
class Stop:
    """Why distviz stopped a training early: ``kind`` decides, ``words`` are shown."""

    kind: StopKind
    words: str

    def __str__(self) -> str:
        return self.words


#: why the real backward is not run when the replay predicts a hang
HANG_NOT_RUN: Final = "the replay predicts a FAST-mode hang (use --confirm-hang to run it anyway)"


def hang_not_run(predicted: Outcome, confirm_hang: bool) -> str | None:
    """The one rule for skipping PyTorch's real backward: why it is not run (``HANG_NOT_RUN``)
    when the FAST replay's ``predicted`` outcome is a hang and ``confirm_hang`` is not set;
    ``None`` when it runs. A plain run's policy (``distviz.judge.policy.backward_policy``) and a
    training's worker (``TrainingSession.predict``) both read it."""
    return HANG_NOT_RUN if predicted == "hang" and not confirm_hang else None


class Category(StrEnum):
    """What a context did, as the pytest plugin counts it, in the order its summary counts them
    (``distviz.judge.verdict.pytest_category`` picks one; the journal's JSON holds the word)."""

    AGREES = "agrees"
    HANG_SEEN = "hang predicted and seen"
    HANG_PREDICTED = "hang predicted"
    ERROR = "error"
    UNFINISHED = "unfinished"
    NOT_COMPARED = "not compared"
    DIFFERS = "differs"
