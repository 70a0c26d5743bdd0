"""``distviz snapshot DIR``: what every process of a running traced job is doing now
(torch-free: the client, and the files and values both sides share).

How the pieces find each other:

* ``DIR/running.json`` (``JOB_FILE``): written by ``distviz trace -o DIR`` (and by
  ``pytest --distviz=DIR``) when the job starts and removed when it ends; it names the session
  folder and the pid of the ``distviz`` (or pytest) process that runs the job.
* ``<session>/listeners/<pid>.json``: one per traced process, written when the process's RPC
  starts (``distviz.tracing.snapshot.listener``), with its pid, worker name and the path of
  the AF_UNIX socket its listener thread waits on; removed when the process exits. A process
  killed without its exit handlers leaves its file: the pid is gone, or nothing accepts on
  the socket, and the file is skipped.
* The socket is ``<session>/listeners/<pid>.sock``, or, where that path is longer than AF_UNIX
  allows (``SOCKET_PATH_MAX``), a short name in a private temporary folder (``socket_path``).

``take(DIR)`` connects to every live process at once and sends one JSON line, the folder
for the files (``DIR/snapshots/<time>/``); each process writes its stacks and the graph of
each of its live contexts there and answers with one JSON object (``ProcessSnapshot``). A
process that has not answered within ``limits.SNAPSHOT_TIMEOUT`` is named in ``silent``.
"""

from __future__ import annotations

import functools
import json
import socket
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from distviz import limits
from distviz.errors import UsageError
from distviz.recorder.side_thread import in_threads
from distviz.tracing.shared.job_files import (
    JOB_FILE,
    SNAPSHOTS,
    Listener,
    alive,
    live_listeners,
)
from distviz.words import context_label, plural


class NoJob(UsageError):
    """``distviz snapshot DIR``: DIR holds no running traced job (exit 2)."""


# -- the values both sides exchange ------------------------------------------------------------

@dataclass(slots=True)
class ContextState:
    """One live dist autograd context of a process: ``state`` is ``forward`` (entered with
    ``dist_autograd.context()``, no backward running) or ``backward`` (its
    ``dist_autograd.backward`` has not returned), for ``seconds``, or ``serving`` (entered on
    another worker, whose RPC this process serves and waits in an RPC of its own); ``trace``
    the graph so far (``None`` when it could not be recorded: ``outcome`` says why);
    ``outcome`` the replay's
    one line; ``detail`` a predicted hang's explanation (``tracing.report.hang_text``);
    ``waiting`` the RPCs of the context a thread of the process is inside now, with no answer
    yet (``rpc_sync(wait_forever) to worker1 at main.py:43 in run_worker``)."""

    number: int
    context_id: int
    state: Literal["forward", "backward", "serving"]
    seconds: float
    thread: str
    trace: str | None = None
    nodes: int = 0
    workers: list[str] = field(default_factory=list)
    outcome: str = ""
    detail: str | None = None
    waiting: list[str] = field(default_factory=list)


@dataclass(slots=True)
class ThreadStack:
    """One thread's Python stack: its name and a few frames, innermost first (the innermost
    frame, then the program's own)."""

    name: str
    frames: list[str]


@dataclass(slots=True)
class ProcessSnapshot:
    """What one process answers (and wrote under the snapshot folder)."""

    pid: int
    worker: str | None
    argv: list[str]
    contexts: list[ContextState]
    threads: list[ThreadStack]
    stacks_file: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> ProcessSnapshot:
        return cls(pid=int(obj["pid"]), worker=obj.get("worker"),
                   argv=[str(a) for a in obj.get("argv") or []],
                   contexts=[ContextState(**c) for c in obj.get("contexts") or []],
                   threads=[ThreadStack(**t) for t in obj.get("threads") or []],
                   stacks_file=str(obj.get("stacks_file") or ""))


@dataclass(slots=True)
class Silent:
    """A process that did not answer, and what happened instead."""

    listener: Listener
    why: str


@dataclass(slots=True)
class Snapshot:
    """A whole job's snapshot: its folder, the processes that answered and those that did not."""

    job_pid: int
    folder: Path
    processes: list[ProcessSnapshot]
    silent: list[Silent]


def find_job(out_dir: Path) -> tuple[int, list[Listener]]:
    """The running job in ``out_dir``: ``(runner's pid, its live processes' listeners)``.
    Raises ``NoJob`` naming the folder when there is none."""
    if not out_dir.is_dir():
        what = "is not a folder" if out_dir.exists() else "no such folder"
        raise NoJob(f"{out_dir}: {what}; give the -o folder of a running `distviz trace`")
    try:
        job = json.loads((out_dir / JOB_FILE).read_text(encoding="utf-8"))
        pid, session = int(job["pid"]), Path(str(job["session"]))
    except (OSError, ValueError, KeyError, TypeError):
        raise NoJob(f"{out_dir}: no running job here (no {JOB_FILE}: `distviz trace -o "
                    f"{out_dir} -- COMMAND` writes it while the command runs)") from None
    if not alive(pid) or not session.is_dir():
        raise NoJob(f"{out_dir}: no running job here (the job that wrote {JOB_FILE}, "
                    f"pid {pid}, has ended)")
    return pid, live_listeners(session)


def _folder(out_dir: Path) -> Path:
    """A new ``DIR/snapshots/<UTC time>`` folder (``-2``, ``-3`` ... when taken)."""
    base = out_dir / SNAPSHOTS / time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    base.parent.mkdir(parents=True, exist_ok=True)
    n = 1
    while True:
        folder = base if n == 1 else base.with_name(f"{base.name}-{n}")
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            n += 1


def ask(entry: Listener, folder: Path, timeout: float) -> ProcessSnapshot | str:
    """Ask one process for its snapshot; returns it, or why there is none (a refused
    connection is a process that ended since it was found: ``""``)."""
    deadline = time.monotonic() + timeout
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(entry.socket)
            s.sendall((json.dumps({"folder": str(folder.resolve())}) + "\n").encode())
            chunks: list[bytes] = []
            while True:
                s.settimeout(max(0.01, deadline - time.monotonic()))
                chunk = s.recv(1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
    except (ConnectionRefusedError, FileNotFoundError):
        return ""
    except TimeoutError:
        return f"did not answer within {timeout:g} s"
    except OSError as exc:
        return f"could not be asked: {exc.strerror or exc}"
    try:
        reply = json.loads(b"".join(chunks))
        if "error" in reply:
            return f"could not take its snapshot: {reply['error']}"
        return ProcessSnapshot.from_json(reply)
    except (ValueError, KeyError, TypeError):
        return "ended before it answered" if not chunks else "answered something unreadable"


def take(out_dir: Path, timeout: float = limits.SNAPSHOT_TIMEOUT) -> Snapshot:
    """Snapshot every live process of the job running in ``out_dir`` (see the module
    docstring). Raises ``NoJob`` when none runs there, or none of its processes listens."""
    job_pid, entries = find_job(out_dir)
    if not entries:
        raise NoJob(f"{out_dir}: the job (pid {job_pid}) runs, but none of its processes has "
                    "started RPC yet: nothing to snapshot")
    folder = _folder(out_dir)
    asked = in_threads([functools.partial(ask, e, folder, timeout) for e in entries],
                       timeout + 1.0, "distviz-snapshot-ask")
    processes: list[ProcessSnapshot] = []
    silent: list[Silent] = []
    for e, ran in zip(entries, asked, strict=True):
        got = ran.value if ran.done and ran.value is not None else \
            f"did not answer within {timeout:g} s"
        if isinstance(got, ProcessSnapshot):
            processes.append(got)
        elif got:
            silent.append(Silent(e, got))
    if not processes and not silent:
        folder.rmdir()
        raise NoJob(f"{out_dir}: no running job here (its processes have ended)")
    return Snapshot(job_pid=job_pid, folder=folder, processes=processes, silent=silent)


# -- what ``distviz snapshot`` prints (pure) ---------------------------------------------------

def _context_lines(c: ContextState) -> list[str]:
    doing = {"backward": f"backward in flight for {c.seconds:g} s",
             "forward": f"forward open for {c.seconds:g} s (no backward yet)",
             "serving": "serving an RPC of the context"}[c.state]
    name = context_label(c.number, c.context_id) if c.number else f"context id {c.context_id}"
    lines = [f"  {name}: {doing}, in {c.thread}"]
    lines.extend(f"    waiting for {call} (no answer yet)" for call in c.waiting)
    if c.trace:
        lines.append(f"    graph: {c.trace} ({plural(c.nodes, 'node')} on "
                     f"{', '.join(c.workers) or 'no worker'})")
    lines.append(f"    {'replay: ' if c.trace else ''}{c.outcome}")
    if c.detail:
        lines.extend(f"      {line}" for line in c.detail.splitlines())
    return lines


def report_lines(snap: Snapshot, out_dir: Path) -> list[str]:
    """The text of a snapshot: per process its contexts, files and a few frames of each
    thread's stack (the innermost and the program's own), then the processes that did not
    answer."""
    n = len(snap.processes) + len(snap.silent)
    lines = [f"distviz snapshot of the job in {out_dir} (pid {snap.job_pid}): "
             f"{plural(n, 'process', 'processes')}; files in {snap.folder}/"]
    for p in sorted(snap.processes, key=lambda p: (p.worker is None, p.worker or "", p.pid)):
        who = Listener(p.pid, p.worker, "").label()
        lines.append(f"{who}: {' '.join(p.argv)}")
        if not p.contexts:
            lines.append("  no live dist autograd context entered here")
        for c in p.contexts:
            lines.extend(_context_lines(c))
        lines.append(f"  stacks of {plural(len(p.threads), 'thread')} (in full: "
                     f"{p.stacks_file}):")
        for t in p.threads:
            lines.append(f"    {t.name}: {' <- '.join(t.frames) or '(no frame)'}")
    for s in snap.silent:
        lines.append(f"{s.listener.label()} {s.why}")
    return lines
