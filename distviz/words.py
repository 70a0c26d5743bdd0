"""Wording shared by every module that writes sentences (pure: imports nothing of distviz)."""

from __future__ import annotations

__all__ = ["plural"]


def plural(n: int, noun: str, many: str | None = None) -> str:
    """Return ``n`` and ``noun`` in the right number: ``plural(1, "message")`` is
    ``"1 message"``, ``plural(2, "message")`` is ``"2 messages"``; ``many`` gives an irregular
    plural (``plural(3, "pass", "passes")``)."""
    return f"{n} {noun if n == 1 else (many or noun + 's')}"
