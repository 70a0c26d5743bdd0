"""The hook through which ``traced_backward`` hands a backward to the watch (torch-free).

``distviz.tracing.observe`` does not import ``distviz.tracing.watch`` (the watch names
observe's ``Process``, and an import each way would be a cycle), so the watch puts itself here
(``WATCH``) when ``patches.install`` starts it; without it every backward not recorded in full
goes straight to PyTorch.
"""

from __future__ import annotations

import time
import types
from collections.abc import Callable
from typing import Any, Protocol


class Watcher(Protocol):
    """What the watch gives ``traced_backward``: the backward of a context not recorded in
    full, and the count of one that is."""

    def watched(self, proc: Any, context_id: int, roots: list[Any], retain_graph: bool,
                step: int, frame: types.FrameType | None) -> None: ...

    def count(self, step: int, seconds: float, error: str | None) -> None: ...


#: The watch of every backward not recorded in full; ``None``: they go straight to PyTorch.
WATCH: Watcher | None = None


def counted(step: int, fn: Callable[..., Any], *args: Any) -> None:
    """``fn(*args)`` (a recorded backward), counted by the watch with its wall time."""
    watch = WATCH
    if watch is None:
        fn(*args)
        return
    t0 = time.monotonic()
    try:
        fn(*args)
    except BaseException as exc:
        text = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()),
                    type(exc).__name__)
        watch.count(step, time.monotonic() - t0, text)
        raise
    watch.count(step, time.monotonic() - t0, None)
