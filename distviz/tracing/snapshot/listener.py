"""A traced process's side of ``distviz snapshot``: its live contexts, and the thread that
answers (torch-free at import; the snapshot itself is ``distviz.tracing.snapshot.take``).

Nothing runs while nobody asks:

* entering ``with dist_autograd.context()`` adds one entry to ``OPEN`` (context id -> when,
  in which thread), leaving it removes it (``distviz.tracing.hooks.patches`` calls ``entered`` and
  ``left``);
* the backwards in flight (since when, in which thread, their roots) are the process's one
  table of them, ``distviz.tracing.shared.inflight.TABLE``, which the watch keeps too;
* once the process's RPC has started (``start``, from the patched ``rpc.init_rpc``), one
  daemon thread waits in ``accept()`` on an AF_UNIX socket whose path is registered in the
  session (``distviz.tracing.snapshot.client``). The same thread runs the calls other traced
  processes of this host make to record or collect a context
  (``distviz.tracing.shared.local_calls``). ``accept()`` and everything after it run in that
  thread, so a snapshot is taken while the program's threads are blocked inside C++ (an
  ``rpc_sync`` future, the backward, ``rpc.shutdown``), where a Python signal handler would
  not run.

A forked child starts its own listener when it starts RPC (the parent's thread does not fork;
the child closes its copy of the parent's socket). The socket and its entry are removed when
the process exits.
"""

from __future__ import annotations

import atexit
import itertools
import json
import os
import shutil
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from distviz import limits
from distviz.tracing.shared import job_files, local_calls

if TYPE_CHECKING:  # pragma: no cover - the snapshot's values load at the first snapshot
    from distviz.tracing.snapshot.client import ProcessSnapshot

#: The largest request read (it names one folder).
MAX_REQUEST = 1 << 16


class Opened(NamedTuple):
    """A context the program entered here and has not left: its number in this process
    (counted as contexts are entered), since when (``time.monotonic``), in which thread."""

    number: int
    since: float
    thread: int


_now, _thread = time.monotonic, threading.get_ident
OPEN: dict[int, Opened] = {}
_NUMBER = itertools.count(1)


def entered(context_id: int) -> None:
    """The program entered ``with dist_autograd.context()`` (in this thread)."""
    OPEN[context_id] = Opened(next(_NUMBER), _now(), _thread())


def left(context_id: int) -> None:
    """The program left the context."""
    OPEN.pop(context_id, None)


# -- the listener ------------------------------------------------------------------------------

@dataclass
class _Listening:
    sock: socket.socket
    session: str
    path: str
    private: str | None     # a folder made for a socket path the session could not hold


_LISTENING: dict[int, _Listening] = {}     # by pid: a forked child finds its parent's here
_LOCK = threading.Lock()


Answer = Callable[[str], "ProcessSnapshot"]


def start(session_dir: str | None, worker: str | None, answer: Answer) -> None:
    """Listen for ``distviz snapshot`` in this process (once; a second call updates the
    worker name in the session); ``answer(folder)`` takes the snapshot
    (``snapshot_take.take``). Without a session (the Python API) there is nobody to ask."""
    if not session_dir:
        return
    pid = os.getpid()
    with _LOCK:
        have = _LISTENING.get(pid)
        if have is not None:
            job_files.register(have.session, job_files.Listener(pid, worker, have.path))
            return
        _after_fork()
        path, private = job_files.socket_path(session_dir, pid)
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        if os.path.exists(path):
            os.unlink(path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(path)
        os.chmod(path, 0o600)
        sock.listen(8)
        first = not _LISTENING
        _LISTENING[pid] = _Listening(sock, session_dir, path, private)
        job_files.register(session_dir, job_files.Listener(pid, worker, path))
    threading.Thread(target=_serve, args=(sock, answer), name="distviz-snapshot",
                     daemon=True).start()
    if first:
        atexit.register(close)


def close() -> None:
    """Stop listening and remove this process's socket and entry (at exit)."""
    with _LOCK:
        mine = _LISTENING.pop(os.getpid(), None)
    if mine is None:
        return
    try:
        mine.sock.shutdown(socket.SHUT_RDWR)   # wakes the thread in accept()
    except OSError:
        pass
    mine.sock.close()
    for path in (mine.path, os.path.join(mine.session, job_files.LISTENERS,
                                         f"{os.getpid()}.json")):
        try:
            os.unlink(path)
        except OSError:
            pass
    if mine.private:
        shutil.rmtree(mine.private, ignore_errors=True)


def _after_fork() -> None:
    """In a forked child: close the copies of the parent's sockets (their files stay: the
    parent still listens on them)."""
    for pid in [p for p in _LISTENING if p != os.getpid()]:
        _LISTENING.pop(pid).sock.close()


os.register_at_fork(after_in_child=_after_fork)


def _serve(sock: socket.socket, answer: Answer) -> None:
    """The listener thread: answer one request at a time until the socket closes."""
    while True:
        try:
            conn, _ = sock.accept()
        except OSError:
            return
        with conn:
            try:
                _answer(conn, answer)
            except Exception:  # noqa: BLE001 - the client left, or a snapshot failed: next one
                continue


def _answer(conn: socket.socket, answer: Answer) -> None:
    """Read the request (one JSON line naming the folder), take the snapshot, answer; or run
    one of distviz's own calls (``distviz.tracing.shared.local_calls``)."""
    conn.settimeout(limits.SNAPSHOT_TIMEOUT)
    data = conn.recv(4096)
    if data[:1] == local_calls.CALL:
        local_calls.serve(conn, data)
        return
    while b"\n" not in data and len(data) < MAX_REQUEST:
        chunk = conn.recv(4096)
        if not chunk:
            return
        data += chunk
    folder = str(json.loads(data.split(b"\n", 1)[0])["folder"])
    try:
        reply = answer(folder).to_json()
    except Exception as exc:  # noqa: BLE001 - said to the client (a folder it cannot write)
        reply = {"error": f"{type(exc).__name__}: {exc}"}
    conn.sendall(json.dumps(reply, separators=(",", ":")).encode("utf-8"))
