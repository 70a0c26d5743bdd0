"""What the judge says of a replay against the real run (pure values): ``Agreement``, check by
check (``distviz.judge.agreement.compare``), the one ``Status`` word for a check and a verdict,
the JSON words for it, a worker's order that differs (``OrderMismatch``) and SMART mode against
FAST mode and the reference (``SmartReport``). The engine never reads these; renderers do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from distviz.outcome import Outcome

__all__ = ["AGREEMENT_JSON_WORDS", "CHECK_JSON_WORDS", "Agreement", "OrderMismatch", "SmartLeaf",
           "SmartReport", "Status"]


@dataclass(frozen=True, slots=True)
class OrderMismatch:
    """One worker's order in one pass that differs from PyTorch's (a window around the place)."""

    worker: str
    pass_index: int
    expected: tuple[str, ...]       # the replay's order (window)
    observed: tuple[str, ...]       # PyTorch's order (window)
    first_difference_index: int
    window_start: int

    def at(self, k: int) -> tuple[str, str]:
        """Return ``(replay's node, PyTorch's node)`` at position ``k`` ("nothing" past the end)."""
        j = k - self.window_start
        exp = self.expected[j] if 0 <= j < len(self.expected) else "nothing"
        obs = self.observed[j] if 0 <= j < len(self.observed) else "nothing"
        return exp, obs

    def to_json(self) -> dict[str, Any]:
        return {"worker": self.worker, "pass": self.pass_index, "expected": list(self.expected),
                "observed": list(self.observed),
                "first_difference_index": self.first_difference_index,
                "window_start": self.window_start}


@dataclass(frozen=True, slots=True)
class SmartLeaf:
    """A leaf SMART mode gives a gradient, and what the single-process reference gives it."""

    worker: str
    zero: bool
    node: str
    would_receive: Mapping[str, Any] | None = None   # reference summary: shape, sum, norm, values

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"worker": self.worker, "zero": self.zero, "node": self.node}
        if self.would_receive is not None:
            out["would_receive"] = dict(self.would_receive)
        return out


@dataclass(frozen=True, slots=True)
class SmartReport:
    """SMART mode against FAST mode and the reference (``agreement.smart_report``)."""

    fast_outcome: Outcome
    smart_outcome: Outcome
    excluded: tuple[str, ...]
    leaves: Mapping[str, SmartLeaf]       # variable (or node id) -> leaf
    reference_leaves: tuple[str, ...] | None
    same_leaves: bool | None
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"fast_outcome": self.fast_outcome, "smart_outcome": self.smart_outcome,
                "excluded": list(self.excluded),
                "leaves": {k: v.to_json() for k, v in self.leaves.items()},
                "reference_leaves": (list(self.reference_leaves)
                                     if self.reference_leaves is not None else None),
                "same_leaves": self.same_leaves, "text": self.text}


#: the one word for how a replay agrees with PyTorch, for a check and for the whole verdict:
#: every compared check agrees, one differs (proven), or nothing was compared
Status = Literal["agrees", "differs", "not compared"]
#: the JSON formats' words for a ``Status`` (written at the boundary, never compared in code):
#: a check's ``status`` in ``verdict.checks``, and the ``agreement``'s ``status``
CHECK_JSON_WORDS: Final[dict[str, str]] = {"agrees": "agree", "differs": "differs",
                                      "not compared": "not_compared"}
AGREEMENT_JSON_WORDS: Final[dict[str, str]] = {"agrees": "match", "differs": "mismatch",
                                          "not compared": "skipped"}


@dataclass(frozen=True, slots=True)
class Agreement:
    """How a replay agrees with the real run, check by check (``agreement.compare``).

    Each check is ``True``/``False``, or ``None`` when there is nothing to compare. ``status``
    and ``text`` are the verdict's (``distviz.judge.verdict.judge`` sets them; ``compare``
    leaves them empty): nothing else decides them. ``smart`` is set for a SMART replay
    (compared with FAST and the reference instead; ``text`` is then its sentence).
    """

    outcome: bool | None
    order: bool | None
    executed: bool | None
    gradients: bool | None
    leaves: bool | None
    fifo_order: bool | None
    arrival_differs: tuple[str, ...]
    exact: bool
    mismatches: tuple[OrderMismatch, ...]
    status: Status = "not compared"
    text: str = ""
    smart: SmartReport | None = None
    nodes_compared: int = 0         # nodes whose order was compared (not in the JSON)

    CHECKS = ("outcome", "order", "executed", "gradients", "leaves", "fifo_order", "exact")

    def check(self, name: str) -> bool | None:
        """Return the check called ``name`` (one of ``CHECKS``)."""
        if name not in self.CHECKS:
            raise KeyError(name)
        value: bool | None = getattr(self, name)
        return value

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "outcome": self.outcome, "order": self.order, "executed": self.executed,
            "gradients": self.gradients, "leaves": self.leaves, "fifo_order": self.fifo_order,
            "arrival_differs": list(self.arrival_differs), "exact": self.exact,
            "mismatches": [m.to_json() for m in self.mismatches],
            "status": AGREEMENT_JSON_WORDS[self.status], "text": self.text}
        if self.smart is not None:
            out["smart"] = self.smart.to_json()
        return out
