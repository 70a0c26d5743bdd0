"""Saying things live (torch-free): lines a traced program's processes print as they happen.

``say(text)`` prints each line of ``text`` as ``distviz: ...`` on the process's real standard
error (``sys.__stderr__``: a program that swaps ``sys.stderr`` still lets them through), at
once. The summary at the end is ``distviz.tracing.parent.summary``'s.
"""

from __future__ import annotations

import sys


def say(text: str) -> None:
    """Print each line of ``text`` as ``distviz: <line>`` on standard error, flushed."""
    stream = sys.__stderr__ or sys.stderr
    for line in text.splitlines():
        print(f"distviz: {line}", file=stream, flush=True)
