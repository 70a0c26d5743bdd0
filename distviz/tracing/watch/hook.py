"""The hook through which ``traced_backward`` hands a backward to the watch (torch-free).

``distviz.tracing.recording.observe`` does not import ``distviz.tracing.watch.watcher`` (the watch names
observe's ``Process``, and an import each way would be a cycle), so the watch puts itself here
(``WATCH``) when ``patches.install`` starts it; without it every backward not recorded in full
goes straight to PyTorch. ``counted`` puts a recorded backward in the table of backwards in
flight (``inflight.TABLE``; a watched one is put there by the watch).
"""

from __future__ import annotations

import time
import types
from collections.abc import Callable
from typing import Any, Protocol

from distviz.tracing.shared import inflight
from distviz.tracing.shared.inflight import InFlight
from distviz.words import first_line


class Watcher(Protocol):
    """What the watch gives ``traced_backward``: the backward of a context not recorded in
    full, and the count of one that is."""

    def watched(self, proc: Any, context_id: int, roots: list[Any], retain_graph: bool,
                step: int, frame: types.FrameType | None) -> None: ...

    def count(self, step: int, seconds: float, error: str | None) -> None: ...


#: The watch of every backward not recorded in full; ``None``: they go straight to PyTorch.
WATCH: Watcher | None = None


def counted(entry: InFlight, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """``fn(*args, **kwargs)`` (a backward not watched: a recorded one), in the table of
    backwards in flight as ``entry`` while it runs, and counted by the watch with its wall
    time."""
    watch, table = WATCH, inflight.TABLE
    token = table.enter(entry)
    try:
        fn(*args, **kwargs)
    except BaseException as exc:
        if watch is not None:
            watch.count(entry.step, time.monotonic() - entry.since, first_line(exc))
        raise
    finally:
        table.leave(token)
    if watch is not None:
        watch.count(entry.step, time.monotonic() - entry.since, None)
