"""What the fuzz keeps of one run's verdict (pure).

The judgement itself is the product's one judge (``distviz.judge.verdict.judge``); ``of``
keeps what the fuzz counts of its ``Verdict``: the outcomes and each check as
``True``/``False``/``None``. Every check the verdict makes is here, ``legality`` included: a
broken FAST-mode rule is a finding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from distviz.outcome import Outcome

if TYPE_CHECKING:  # pragma: no cover
    from distviz.judge.verdict import Verdict

__all__ = ["CHECKS", "Judged", "of"]

#: what is compared, in the order a disagreement is named (the verdict's checks)
CHECKS = ("outcome", "order", "legality", "executed", "leaves", "gradients", "zeros")


@dataclass(frozen=True)
class Judged:
    """How one run's replay agrees with PyTorch, as the fuzz counts it. ``predicted`` and
    ``real`` are outcomes (``completed``, ``hang``, ``error``); each check is
    ``True``/``False``, or ``None`` when there was nothing to compare (no gradients after a
    hang, for example; no ``legality`` with one inter-op thread). ``order`` is per worker
    order with the observed arrival order; ``fifo_order`` the replay's FIFO guess alone.
    """

    predicted: Outcome
    real: str
    outcome: bool
    order: bool | None
    fifo_order: bool | None
    executed: bool | None
    leaves: bool | None
    gradients: bool | None
    text: str
    zeros: bool | None = None
    legality: bool | None = None

    @property
    def disagreements(self) -> tuple[str, ...]:
        return tuple(k for k in CHECKS if getattr(self, k) is False)

    @property
    def agrees(self) -> bool:
        return not self.disagreements


def of(v: Verdict, predicted: Outcome, real: str) -> Judged:
    """The fuzz's record of the verdict ``v`` on a run whose replay ended ``predicted`` and
    whose real backward ended ``real``."""
    return Judged(predicted=predicted, real=real, outcome=v.holds("outcome") is not False,
                  order=v.holds("order"), legality=v.holds("legality"),
                  fifo_order=v.agreement.fifo_order, executed=v.holds("executed"),
                  leaves=v.holds("leaves"), gradients=v.holds("gradients"),
                  zeros=v.holds("zeros"), text=v.text)
