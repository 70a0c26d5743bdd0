"""A fuzz verdict: how one run's replay agrees with PyTorch (pure).

The judgement itself is the product's one verdict (``distviz.replay.verdict``); ``of`` keeps
what the fuzz counts from it: the outcomes and each check as ``True``/``False``/``None``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from distviz.replay import verdict as one

__all__ = ["CHECKS", "Verdict", "of"]

#: what is compared, in the order a disagreement is named
CHECKS = ("outcome", "order", "executed", "leaves", "gradients", "zeros")


@dataclass(frozen=True)
class Verdict:
    """How one run's replay agrees with PyTorch. ``predicted`` and ``real`` are outcomes
    (``completed``, ``hang``, ``error``); each check is ``True``/``False``, or ``None`` when
    there was nothing to compare (no gradients after a hang, for example). ``order`` is per
    worker order with the observed arrival order; ``fifo_order`` the replay's FIFO guess alone.
    """

    predicted: str
    real: str
    outcome: bool
    order: bool | None
    fifo_order: bool | None
    executed: bool | None
    leaves: bool | None
    gradients: bool | None
    text: str
    zeros: bool | None = None

    @property
    def disagreements(self) -> tuple[str, ...]:
        return tuple(k for k in CHECKS if getattr(self, k) is False)

    @property
    def agrees(self) -> bool:
        return not self.disagreements


def of(v: one.Verdict, predicted: str, real: str) -> Verdict:
    """The fuzz's record of the verdict ``v`` on a run whose replay ended ``predicted`` and
    whose real backward ended ``real``."""
    return Verdict(predicted=predicted, real=real, outcome=v.holds("outcome") is not False,
                   order=v.holds("order"), fifo_order=v.agreement.fifo_order,
                   executed=v.holds("executed"), leaves=v.holds("leaves"),
                   gradients=v.holds("gradients"), zeros=v.holds("zeros"), text=v.text)
