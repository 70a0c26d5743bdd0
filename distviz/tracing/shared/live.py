"""Saying things live (torch-free): lines a traced program's processes print as they happen.

``say(text)`` prints each line of ``text`` as ``distviz: ...`` on the process's real standard
error (``sys.__stderr__``: a program that swaps ``sys.stderr`` still lets them through), at
once, in one ``write``. Python's standard error is unbuffered below its text layer (each
``write`` is a system call), so ``print`` writes a line and its newline in two: two workers that
spoke at the same moment came out as ``distviz: Adistviz: B`` and two empty lines. One write of
a pipe's atomic size or less (``PIPE_BUF``, 4,096 bytes on Linux) is never cut by another
process's. The summary at the end is ``distviz.tracing.launcher.run_summary``'s.
"""

from __future__ import annotations

import sys


def say(text: str) -> None:
    """Print each line of ``text`` as ``distviz: <line>`` on standard error, flushed, in one
    write (see the module docstring)."""
    stream = sys.__stderr__ or sys.stderr
    lines = "".join(f"distviz: {line}\n" for line in text.splitlines())
    if lines:
        stream.write(lines)
        stream.flush()
