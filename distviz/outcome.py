"""How a backward ends, as types every side shares (pure, torch-free).

``Outcome`` is how one backward pass ends, in the replay and in PyTorch's real run;
``RealOutcome`` adds ``skipped`` (the real backward was not run, ``real.reason`` says why);
``ContextOutcome`` is a context's, as the verdict reports it: ``unfinished`` when the traced
process ended during the real backward. The trace's JSON holds these words as they are
(``docs/trace-format.md``); mypy checks every comparison with them (``strict_equality``).
"""

from __future__ import annotations

from typing import Final, Literal, get_args

__all__ = ["CONTEXT_OUTCOMES", "OUTCOMES", "ContextOutcome", "Outcome", "RealOutcome"]

Outcome = Literal["completed", "hang", "error"]
RealOutcome = Literal["completed", "hang", "error", "skipped"]
ContextOutcome = Literal["completed", "hang", "error", "unfinished"]

OUTCOMES: Final[tuple[Outcome, ...]] = get_args(Outcome)
CONTEXT_OUTCOMES: Final[tuple[ContextOutcome, ...]] = get_args(ContextOutcome)
