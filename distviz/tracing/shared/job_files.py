"""The files through which ``distviz snapshot`` finds a running traced job, and its processes
find each other's listeners (``distviz.tracing.shared.local_calls``) (torch-free, light: every
traced process imports it when its RPC starts; ``distviz.tracing.snapshot.client`` holds the
rest). See ``distviz.tracing.snapshot.client`` for how the pieces find each other.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

JOB_FILE = "running.json"
LISTENERS = "listeners"
SNAPSHOTS = "snapshots"
#: The longest AF_UNIX socket path Linux takes (``sun_path`` is 108 bytes, ending in NUL).
SOCKET_PATH_MAX = 107


@dataclass(frozen=True, slots=True)
class Listener:
    """One traced process's entry in the session: where its snapshot listener waits."""

    pid: int
    worker: str | None
    socket: str

    def label(self) -> str:
        return f"{self.worker} (pid {self.pid})" if self.worker else f"pid {self.pid}"

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Listener:
        worker = obj.get("worker")
        return cls(pid=int(obj["pid"]), worker=str(worker) if worker else None,
                   socket=str(obj["socket"]))


def announce(out_dir: str, session_dir: str, pid: int | None = None) -> None:
    """Say in ``out_dir`` that a job runs there (its session folder, the runner's pid)."""
    data = {"session": os.path.abspath(session_dir), "pid": pid or os.getpid()}
    path = Path(out_dir) / JOB_FILE
    tmp = path.with_name(f".{JOB_FILE}.{os.getpid()}")
    tmp.write_text(json.dumps(data) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def withdraw(out_dir: str) -> None:
    """The job in ``out_dir`` has ended: remove its ``JOB_FILE``."""
    try:
        os.unlink(Path(out_dir) / JOB_FILE)
    except OSError:
        pass


def socket_path(session_dir: str, pid: int) -> tuple[str, str | None]:
    """Where process ``pid`` listens: ``(socket path, private folder made for it or None)``.
    The session's ``listeners`` folder when the path fits AF_UNIX, else a new private
    temporary folder (``/tmp`` first: ``TMPDIR`` may be the long one)."""
    path = os.path.join(session_dir, LISTENERS, f"{pid}.sock")
    if len(os.fsencode(path)) <= SOCKET_PATH_MAX:
        return path, None
    for base in ("/tmp", None):
        try:
            private = tempfile.mkdtemp(prefix="dvz-", dir=base)
        except OSError:
            continue
        short = os.path.join(private, "s")
        if len(os.fsencode(short)) <= SOCKET_PATH_MAX:
            return short, private
        os.rmdir(private)
    raise OSError(f"no folder short enough for an AF_UNIX socket (session {session_dir})")


def register(session_dir: str, entry: Listener) -> str:
    """Write ``entry`` in the session (atomically); returns the file's path."""
    folder = os.path.join(session_dir, LISTENERS)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    path = os.path.join(folder, f"{entry.pid}.json")
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(asdict(entry), f)
    os.replace(tmp, path)
    return path


def live_listeners(session_dir: str | os.PathLike[str]) -> list[Listener]:
    """The listeners of the session's live processes, in the order of their files: each one's
    file read, its pid alive and its socket there (a process killed without its exit handlers
    leaves its file)."""
    found: list[Listener] = []
    for path in sorted(Path(session_dir, LISTENERS).glob("*.json")):
        try:
            entry = Listener.from_json(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if alive(entry.pid) and os.path.exists(entry.socket):
            found.append(entry)
    return found


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists (one of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
