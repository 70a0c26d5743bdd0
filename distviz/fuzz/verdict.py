"""A fuzz verdict: how one run's replay agrees with PyTorch (pure)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CHECKS", "Verdict"]

#: what is compared, in the order a disagreement is named
CHECKS = ("outcome", "order", "executed", "leaves", "gradients")


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

    @property
    def disagreements(self) -> tuple[str, ...]:
        return tuple(k for k in CHECKS if getattr(self, k) is False)

    @property
    def agrees(self) -> bool:
        return not self.disagreements
