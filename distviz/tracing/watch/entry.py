"""One watched backward in the table of backwards in flight, what the watchdog wrote about
it, and how many more such traces a process may write (torch-free: the trace's types are named
for type checking only).

``distviz.tracing.watch.watcher`` makes one per watched ``dist_autograd.backward``;
``distviz.tracing.watch.late`` fills ``late`` when the deadline passes, and asks the process's
``Budget`` before it writes a slow or raised one.
"""

from __future__ import annotations

import threading
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal

from distviz import limits
from distviz.tracing.shared import inflight

if TYPE_CHECKING:  # pragma: no cover
    from distviz.judge.watched import WatchedState
    from distviz.replay.result import Replay
    from distviz.trace import Trace
    from distviz.tracing.shared.journal import ContextRow


@dataclass(eq=False, slots=True)
class WatchEntry(inflight.InFlight):
    """One watched backward in the table of backwards in flight: the program's frame
    (variable names for a recording) and its deadline. ``fired``: the watchdog took it;
    ``lock`` is held while the watchdog records it."""

    frame: types.FrameType | None
    deadline: float
    fired: bool = False
    returned: bool = False      # PyTorch's backward returned or raised
    lock: threading.Lock = field(default_factory=threading.Lock)
    late: Late | None = None
    unrecorded: bool = False    # the recording at the deadline failed
    silent: str | None = None   # the worker that did not answer it
    watched: ClassVar[bool] = True


@dataclass
class Late:
    """What the watchdog wrote about a backward past its deadline."""

    trace: Trace
    replay: Replay
    path: Path
    row: ContextRow
    state: WatchedState | None = None     # what the last row said: a hang, before it raised


#: What ``Budget.take`` answers: write the trace; or not, and say so now (the first time), or
#: not again (said already, or this context's raise is written already).
Take = Literal["write", "say", "quiet"]


@dataclass
class Budget:
    """The traces this process may still write for watched backwards that were slow or raised
    (``limits.TRACE_WATCHED_WRITES``; under the pytest plugin each test starts afresh), and the
    contexts whose raise is written already."""

    scope: str | None = None        # the pytest test it counts for
    written: int = 0
    said: bool = False
    raised_in: set[int] = field(default_factory=set)    # at most TRACE_WATCHED_WRITES ids
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, scope: str | None, raised_in: int | None = None) -> Take:
        """May a trace be written, in test ``scope``, for a slow backward or one that raised
        in context ``raised_in``?"""
        with self.lock:
            if scope != self.scope:
                self.scope, self.written, self.said = scope, 0, False
                self.raised_in.clear()
            if raised_in is not None and raised_in in self.raised_in:
                return "quiet"
            if self.written < limits.TRACE_WATCHED_WRITES:
                self.written += 1
                if raised_in is not None:
                    self.raised_in.add(raised_in)
                return "write"
            if self.said:
                return "quiet"
            self.said = True
            return "say"
