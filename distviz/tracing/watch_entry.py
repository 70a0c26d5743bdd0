"""One watched backward in the table of backwards in flight, and what the watchdog wrote
about it (torch-free: the trace's types are named for type checking only).

``distviz.tracing.watch`` makes one per watched ``dist_autograd.backward``;
``distviz.tracing.watch_late`` fills ``late`` when the deadline passes.
"""

from __future__ import annotations

import threading
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from distviz.tracing import inflight

if TYPE_CHECKING:  # pragma: no cover
    from distviz.replay.watched import WatchedState
    from distviz.trace import Trace
    from distviz.tracing.journal import ContextRow


@dataclass(eq=False, slots=True)
class Watched(inflight.InFlight):
    """One watched backward in the table of backwards in flight: the program's frame
    (variable names for a recording) and its deadline. ``fired``: the watchdog took it;
    ``lock`` is held while the watchdog records it."""

    frame: types.FrameType | None
    deadline: float
    fired: bool = False
    returned: bool = False      # PyTorch's backward returned or raised
    lock: threading.Lock = field(default_factory=threading.Lock)
    late: Late | None = None
    watched: ClassVar[bool] = True


@dataclass
class Late:
    """What the watchdog wrote about a backward past its deadline."""

    trace: Trace
    replay: Any
    path: Path
    row: ContextRow
    state: WatchedState | None = None     # what the last row said: a hang, before it raised
