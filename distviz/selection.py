"""Which contexts to record: ``--contexts`` parsed (pure, torch-free, a leaf module).

``ContextSelection.parse("first")`` (``all``, ``none``, ``1,3``, ``every:K``) says which
of a trainer's dist autograd contexts are recorded in full. ``distviz trace``'s parent checks the
option with it before the program starts, and every traced process reads it: it imports nothing
of the trace model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from distviz.errors import UsageError

__all__ = ["ContextSelection"]


#: the forms of ``--contexts`` (``ContextSelection.kind``)
SelectionKind = Literal["all", "first", "none", "every", "list"]
_WORDS: dict[str, SelectionKind] = {"first": "first", "all": "all", "none": "none"}


@dataclass(frozen=True)
class ContextSelection:
    """Which contexts of each trainer are recorded: ``all``, ``first``, ``N,M``, ``every:K``
    or ``none`` (contexts count from 1 per trainer, in the order they open; ``none``:
    ``distviz trace`` records none in full and watches every backward)."""

    kind: SelectionKind = "all"
    numbers: tuple[int, ...] = ()
    every: int = 0

    @classmethod
    def parse(cls, text: str) -> ContextSelection:
        """Parse ``--contexts``; raises ``UsageError`` naming the accepted forms."""
        t = text.strip().lower()
        word = _WORDS.get(t)
        if word is not None:
            return cls(kind=word)
        if t.startswith("every:"):
            k = t.split(":", 1)[1]
            if not k.isdigit() or int(k) < 1:
                raise UsageError(f"--contexts {text}: every:K needs a whole number K >= 1")
            return cls(kind="every", every=int(k))
        parts = [p.strip() for p in t.split(",")]
        if not all(p.isdigit() and int(p) >= 1 for p in parts):
            raise UsageError(f"--contexts {text}: expected all, first, none, a list of "
                             "context numbers such as 1,3 (from 1, per trainer) or every:K")
        return cls(kind="list", numbers=tuple(sorted({int(p) for p in parts})))

    def selects(self, k: int) -> bool:
        """Whether a trainer's ``k``-th context (from 1) is recorded."""
        if self.kind == "all":
            return True
        if self.kind == "none":
            return False
        if self.kind == "first":
            return k == 1
        if self.kind == "every":
            return (k - 1) % self.every == 0
        return k in self.numbers

    def selects_after(self, k: int) -> bool:
        """Whether a trainer may record a context after its ``k``-th."""
        if self.kind in ("first", "none"):
            return False
        if self.kind == "list":
            return any(n > k for n in self.numbers)
        return True

    def text(self) -> str:
        """The selection as written on the command line."""
        if self.kind == "every":
            return f"every:{self.every}"
        if self.kind == "list":
            return ",".join(str(n) for n in self.numbers)
        return self.kind
