"""The backwards each traced process has in flight: one table in memory that the watch's
watchdog and ``distviz snapshot`` read, and the oldest watched one in a file readable after the
process died (torch-free).

``TABLE`` holds every ``dist_autograd.backward`` that has not returned, in the order they
started: ``watch_hook.counted`` adds a recorded context's, ``Watch.watched`` a watched one's
(a ``WatchEntry``, with its deadline): one dictionary insert and delete per backward. A
forked child starts with an empty table.

A process killed during a backward (SIGKILL, or the SIGTERM ``torch.multiprocessing.spawn``
sends the others when one worker dies) runs no exit handler, so it cannot say which context it
was in. Instead each process that calls ``dist_autograd.backward`` maps one small file of the
session (``<session>/inflight/<pid>``) and writes into the mapping, at each backward's start
and end, the step (context number) and context id of its oldest backward in flight, or zero:
a memory write, no system call. ``distviz trace`` reads the files when the program has ended
(``read``): a non-zero step there is a backward that never returned.
"""

from __future__ import annotations

import itertools
import mmap
import os
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

FOLDER = "inflight"
_FORMAT = struct.Struct("<qqd64s")     # step (0: none), context id, wall start, worker
_HEAD = struct.Struct("<qqd")          # the part written at every backward


@dataclass(frozen=True, slots=True)
class Stuck:
    """A backward in flight when its process ended."""

    pid: int
    worker: str
    step: int
    context_id: int
    started: float     # time.time() at its start

    def text(self) -> str:
        return (f"{self.worker or f'process {self.pid}'} context {self.step} (id "
                f"{self.context_id}) was in flight when its process ended: its backward never "
                "returned")


class Slot:
    """This process's mapping (made at its first backward, with its worker's name; ``None``
    without a session)."""

    def __init__(self, session_dir: str, worker: str) -> None:
        folder = Path(session_dir) / FOLDER
        folder.mkdir(exist_ok=True)
        fd = os.open(folder / str(os.getpid()), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.ftruncate(fd, _FORMAT.size)
            self.map = mmap.mmap(fd, _FORMAT.size)
        finally:
            os.close(fd)
        _FORMAT.pack_into(self.map, 0, 0, 0, 0.0, worker.encode("utf-8")[:64])
        #: ``time.time()`` minus ``time.monotonic()``, read once: a start in wall time costs
        #: an addition at every backward
        self.offset = time.time() - time.monotonic()

    def set(self, step: int, context_id: int, since: float) -> None:
        """The oldest watched backward: ``step``, ``context_id``, since ``since``
        (``time.monotonic``)."""
        _HEAD.pack_into(self.map, 0, step, context_id, since + self.offset)

    def clear(self) -> None:
        _HEAD.pack_into(self.map, 0, 0, 0, 0.0)


@dataclass(eq=False, slots=True)
class InFlight:
    """A ``dist_autograd.backward`` that has not returned: its context, step (the context's
    number here), roots, since when (``time.monotonic``) and in which thread."""

    context_id: int
    step: int
    roots: Any
    retain_graph: bool
    since: float
    thread: int
    #: Whether the watch waits on it (``distviz.tracing.watch.entry.WatchEntry``).
    watched: ClassVar[bool] = False


class Table:
    """This process's backwards in flight, by token in the order they started; ``slot``
    (opened by the watch) holds the oldest watched one."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Empty (and, in a forked child, forget the parent's backwards: they run in threads
        the child does not have)."""
        self.lock = threading.Lock()
        self.entries: dict[int, InFlight] = {}
        self.tokens = itertools.count()
        self.slot: Slot | None = None
        self.oldest: int | None = None      # the token of the watched entry in the slot

    def enter(self, entry: InFlight) -> int:
        """Add ``entry``; its token, for ``leave``."""
        with self.lock:
            token = next(self.tokens)
            self.entries[token] = entry
            if self.oldest is None and self.slot is not None and entry.watched:
                self.oldest = token
                self.slot.set(entry.step, entry.context_id, entry.since)
        return token

    def leave(self, token: int) -> None:
        """The backward of ``token`` returned or raised."""
        with self.lock:
            self.entries.pop(token, None)
            if token == self.oldest and self.slot is not None:
                self.oldest, first = next(((t, e) for t, e in self.entries.items()
                                           if e.watched), (None, None))
                if first is None:
                    self.slot.clear()
                else:
                    self.slot.set(first.step, first.context_id, first.since)

    def by_context(self) -> dict[int, InFlight]:
        """The backwards in flight by context id (the latest one of a context)."""
        with self.lock:
            return {e.context_id: e for e in self.entries.values()}


TABLE = Table()
os.register_at_fork(after_in_child=TABLE.reset)


def open_slot(session_dir: str | None, worker: str) -> Slot | None:
    """This process's slot, or ``None`` (no session, or the folder is gone)."""
    if not session_dir:
        return None
    try:
        return Slot(session_dir, worker)
    except OSError:
        return None


def read(session_dir: str) -> list[Stuck]:
    """The backwards still in flight in the session's files, by worker then step."""
    out: list[Stuck] = []
    folder = Path(session_dir) / FOLDER
    try:
        files = sorted(folder.iterdir())
    except OSError:
        return []
    for path in files:
        try:
            data = path.read_bytes()
            step, cid, started, name = _FORMAT.unpack(data[:_FORMAT.size])
        except (OSError, struct.error):
            continue
        if step > 0:
            out.append(Stuck(pid=int(path.name) if path.name.isdigit() else 0,
                             worker=name.rstrip(b"\0").decode("utf-8", "replace"), step=step,
                             context_id=cid, started=started))
    return sorted(out, key=lambda s: (s.worker, s.step))
