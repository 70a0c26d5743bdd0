"""Wording shared by every module that writes sentences (pure: imports nothing of distviz).

``plural(n, "message")`` is the one way to write a count with its noun (``1 message``,
``2 messages``); ``word_for(n, ...)`` gives a word alone in the form that agrees with ``n``
(``outputs``, ``waits``/``wait``).
"""

from __future__ import annotations

__all__ = ["plural", "word_for"]


def word_for(n: int, one: str, many: str | None = None) -> str:
    """Return ``one`` when ``n`` is 1, else ``many`` (default: ``one + "s"``):
    ``word_for(2, "output")`` is ``"outputs"``, ``word_for(1, "waits", "wait")`` is
    ``"waits"``."""
    return one if n == 1 else (many if many is not None else one + "s")


def plural(n: int, one: str, many: str | None = None, *, grouped: bool = False) -> str:
    """Return ``n`` and its noun in the right number: ``plural(1, "message")`` is
    ``"1 message"``, ``plural(2, "message")`` is ``"2 messages"``; ``many`` gives an irregular
    plural (``plural(3, "pass", "passes")``); ``grouped`` writes ``12,000``."""
    count = f"{n:,}" if grouped else str(n)
    return f"{count} {word_for(n, one, many)}"
