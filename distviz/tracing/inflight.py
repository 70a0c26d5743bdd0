"""Which backward each traced process has in flight, readable after the process died
(torch-free).

A process killed during a backward (SIGKILL, or the SIGTERM ``torch.multiprocessing.spawn``
sends the others when one worker dies) runs no exit handler, so it cannot say which context it
was in. Instead each process that calls ``dist_autograd.backward`` maps one small file of the
session (``<session>/inflight/<pid>``) and writes into the mapping, at each backward's start
and end, the step (context number) and context id of its oldest backward in flight, or zero:
a memory write, no system call. ``distviz trace`` reads the files when the program has ended
(``read``): a non-zero step there is a backward that never returned.
"""

from __future__ import annotations

import mmap
import os
import struct
import time
from dataclasses import dataclass
from pathlib import Path

FOLDER = "inflight"
_FORMAT = struct.Struct("<qqd64s")     # step (0: none), context id, wall start, worker


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
    """This process's mapping (made at its first backward; ``None`` without a session)."""

    def __init__(self, session_dir: str) -> None:
        folder = Path(session_dir) / FOLDER
        folder.mkdir(exist_ok=True)
        fd = os.open(folder / str(os.getpid()), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.ftruncate(fd, _FORMAT.size)
            self.map = mmap.mmap(fd, _FORMAT.size)
        finally:
            os.close(fd)

    def set(self, worker: str, step: int, context_id: int, started: float) -> None:
        _FORMAT.pack_into(self.map, 0, step, context_id, started,
                          worker.encode("utf-8")[:64])

    def clear(self) -> None:
        _FORMAT.pack_into(self.map, 0, 0, 0, 0.0, b"")


def open_slot(session_dir: str | None) -> Slot | None:
    """This process's slot, or ``None`` (no session, or the folder is gone)."""
    if not session_dir:
        return None
    try:
        return Slot(session_dir)
    except OSError:
        return None


def wall_start(monotonic_start: float) -> float:
    """``time.time()`` of a moment given on ``time.monotonic``'s clock."""
    return time.time() - (time.monotonic() - monotonic_start)


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
