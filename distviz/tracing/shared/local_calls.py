"""distviz's own calls to the workers of this host, over their listener's socket (torch-free).

A recording round (``distviz.recorder.gather``) and a collecting round
(``distviz.tracing.shared.fanout.on_all``) ask every other worker of a context to run a function
of distviz's. Over RPC the request must leave from a side thread (an RPC of a Python function
joins the calling thread's dist autograd context: it adds a known worker), and it waits for
TensorPipe's threads on both sides. Every traced process of a session already listens on an
AF_UNIX socket (``distviz.tracing.snapshot.listener``); its listener thread runs the function
and answers. So the asking thread, the program's own, sends the request itself (a socket is no
RPC: the context sees nothing), does its own part, then reads the answer: no thread hand-off on
either side. ``start(session, worker, fn, args, timeout)`` returns ``None`` where the worker
has no one live socket in the session on this host (another host or network namespace, the
Python API with no session, a process that has not started RPC yet, two live processes of one
name): the caller asks over RPC as before.

The request is ``b"C"``, its length (8 bytes, big-endian) and the pickled ``(fn, args)``
(``fn`` a module-level function, pickled by name); the answer its length and the pickled
``("ok", value)`` or ``("raise", exception type name, message)``. The socket and its folder are
the user's only (``0600``, ``0700``), as RPC's pickles travel between the user's processes.
"""

from __future__ import annotations

import builtins
import os
import pickle
import socket
import struct
import time
from collections.abc import Callable
from typing import Any

from distviz.tracing.shared.job_files import live_listeners

#: The first byte of a call (a snapshot's request is a JSON line: ``{``).
CALL = b"C"
_LENGTH = struct.Struct(">Q")
#: The fewest seconds between two reads of the session's listeners for a worker not found.
RESCAN_S = 1.0


class NoLocalAnswer(TimeoutError):
    """The worker's listener did not answer within the time-out (or closed the socket)."""


class LocalCall:
    """A call sent to a worker's listener: ``wait()`` reads its answer (as ``torch.futures``'
    ``wait`` does: the value, or the exception the function raised)."""

    def __init__(self, sock: socket.socket, worker: str, timeout: float) -> None:
        self.sock, self.worker, self.timeout = sock, worker, timeout

    def wait(self) -> Any:
        try:
            self.sock.settimeout(self.timeout)
            size = _LENGTH.unpack(_read(self.sock, _LENGTH.size))[0]
            status, *rest = pickle.loads(_read(self.sock, size))
        except (OSError, EOFError) as exc:
            raise NoLocalAnswer(f"{self.worker} did not answer distviz's call within "
                                f"{self.timeout:g} s ({type(exc).__name__})") from exc
        finally:
            self.sock.close()
        if status == "ok":
            return rest[0]
        raise _rebuilt(str(rest[0]), str(rest[1]))


def direct() -> Callable[[str, Callable[..., Any], tuple[Any, ...], float], LocalCall | None]:
    """``start`` for this process's session (``recorder.gather``'s ``direct``)."""
    from distviz.tracing.shared import process

    proc = process.PROCESS
    session = proc.config.session_dir if proc is not None else None
    return lambda worker, fn, args, timeout: start(session, worker, fn, args, timeout)


def start(session: str | None, worker: str, fn: Callable[..., Any], args: tuple[Any, ...],
          timeout: float) -> LocalCall | None:
    """Send ``fn(*args)`` to the listener of ``worker`` in ``session`` on this host; ``None``
    when it has none (ask over RPC)."""
    path = _peer(session, worker)
    if path is None:
        return None
    payload = pickle.dumps((fn, args), protocol=pickle.HIGHEST_PROTOCOL)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(path)
        sock.sendall(CALL + _LENGTH.pack(len(payload)) + payload)
    except OSError:
        sock.close()
        _PEERS.pop((str(session), worker), None)    # gone: read the session again
        return None
    return LocalCall(sock, worker, timeout)


def serve(conn: socket.socket, data: bytes) -> None:
    """The listener's side (``data``: what it read so far, starting with ``CALL``): run the
    call and answer."""
    need = 1 + _LENGTH.size
    if len(data) < need:
        data += _read(conn, need - len(data))
    size = _LENGTH.unpack(data[1:need])[0]
    body = data[need:]
    if len(body) < size:
        body += _read(conn, size - len(body))
    try:
        fn, args = pickle.loads(body)
        reply: tuple[Any, ...] = ("ok", fn(*args))
        out = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # noqa: BLE001 - the caller gets it, as an RPC's caller does
        out = pickle.dumps(("raise", type(exc).__name__, str(exc)))
    conn.sendall(_LENGTH.pack(len(out)) + out)


def _rebuilt(name: str, message: str) -> Exception:
    """The exception a call raised, as its builtin type (``RuntimeError``: PyTorch's own
    errors are read by their text, ``distviz.torch_errors``), else a ``RuntimeError``."""
    kind = getattr(builtins, name, None)
    if isinstance(kind, type) and issubclass(kind, Exception):
        try:
            return kind(message)
        except Exception:  # noqa: BLE001 - a builtin that takes other arguments
            pass
    return RuntimeError(f"{name}: {message}")


def _read(sock: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise EOFError("the socket closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


_PEERS: dict[tuple[str, str], str] = {}     # (session, worker name) -> its listener's socket
_SCANNED: dict[str, float] = {}             # session -> when its listener files were read


def _peer(session: str | None, worker: str) -> str | None:
    """The socket of the one live process of ``session`` listening as ``worker`` (not this
    process), read from the session's listener files (again at most every ``RESCAN_S``)."""
    if not session:
        return None
    path = _PEERS.get((session, worker))
    if path is not None or time.monotonic() - _SCANNED.get(session, -RESCAN_S) < RESCAN_S:
        return path
    _SCANNED[session] = time.monotonic()
    for key in [k for k in _PEERS if k[0] == session]:
        del _PEERS[key]
    _PEERS.update({(session, w): sock for w, sock in _scan(session).items()})
    return _PEERS.get((session, worker))


def _scan(session: str) -> dict[str, str]:
    """``{worker: socket}`` of the session's live processes on this host (not this one); a
    name two live processes share is left out (which one is the context's is unknown)."""
    found: dict[str, list[str]] = {}
    here = _network(os.getpid())
    for entry in live_listeners(session):
        if entry.worker and entry.pid != os.getpid() and _network(entry.pid) == here:
            found.setdefault(entry.worker, []).append(entry.socket)
    return {w: socks[0] for w, socks in found.items() if len(socks) == 1}


def _network(pid: int) -> int | None:
    """The network namespace of process ``pid`` (its inode), ``None`` when unknown. A process
    in another one is on another host as far as the program's RPC goes (a container, a test's
    veth "host"): it is asked over RPC, as the program reaches it."""
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None
