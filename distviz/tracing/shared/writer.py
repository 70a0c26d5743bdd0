"""The writer thread of a traced process (torch-free, light): a recorded context's trace and row
are written there, off the program's thread (``distviz.tracing.recording.observe``: the graph
while the backward runs, the verdict after it returned while the program's next step runs).

``settle()`` waits until it has written what it was given: before RPC shuts down
(``distviz.tracing.hooks.patches``), before the pytest plugin reads the session's rows, and at
exit: the interpreter's own exit waits for the thread, and a forked child, which leaves through
``os._exit`` without it, settles in ``multiprocessing``'s exit function (``submit`` registers
that once per process).
"""

from __future__ import annotations

import multiprocessing.util
import os
from collections.abc import Callable
from typing import Any

from distviz import limits
from distviz.recorder.side_thread import SideThread

#: The thread (one per process, made at its first write).
WRITER = SideThread("distviz-write")
_SETTLED_AT_EXIT: set[int] = set()


def submit(fn: Callable[[], Any]) -> None:
    """Queue ``fn()`` on the writer thread."""
    if os.getpid() not in _SETTLED_AT_EXIT:
        _SETTLED_AT_EXIT.add(os.getpid())
        multiprocessing.util.Finalize(None, settle, exitpriority=100)
    WRITER.submit(fn)


def settle() -> None:
    """Wait (at most ``limits.WRITE_SETTLE_TIMEOUT`` seconds) until every write queued so far
    is done; no-op in a process that never wrote."""
    WRITER.settle(limits.WRITE_SETTLE_TIMEOUT)
