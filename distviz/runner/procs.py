"""Starting processes from the fork server (pure: the parent imports it)."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from distviz import limits

__all__ = ["ctrl_c_held", "no_main_import", "redirect_stderr", "sigint_blocked",
           "watch_lifeline"]


@contextmanager
def no_main_import() -> Iterator[None]:
    """Start processes without re-importing the caller's ``__main__`` in them.

    multiprocessing normally re-runs the parent's main script in each child (``__mp_main__``);
    workers need nothing from it, and for a REPL, a notebook or ``python -`` it does not exist.
    """
    from multiprocessing import spawn
    orig = spawn.get_preparation_data

    def prep(name: str) -> dict[str, Any]:
        data = dict(orig(name))
        data.pop("init_main_from_path", None)
        data.pop("init_main_from_name", None)
        return data
    spawn.get_preparation_data = prep
    try:
        yield
    finally:
        spawn.get_preparation_data = orig


@contextmanager
def ctrl_c_held(then: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold Ctrl-C back for the block: a SIGINT that comes meanwhile calls ``then()`` at once
    (to cut short a wait in the block), and raises ``KeyboardInterrupt`` (through the handler
    there was before) only when the block ends. In the main thread only: elsewhere Python
    raises it in the main thread anyway.

    For the steps that make something the parent must later remove: a ``KeyboardInterrupt``
    in the middle of them loses what was half made. In ``Process.start()``, multiprocessing
    creates its temporary folder (``pymp-*``, for the fork server's socket) and registers its
    removal only after ``mkdir`` returned; it learns the fork server's pid from a
    ``fork``/``exec``; a worker exists before its ``Process`` is in the run's list.
    """
    held: list[int] = []
    old: Any = None

    def hold(signum: int, _frame: Any) -> None:
        held.append(signum)
        if then is not None and len(held) == 1:
            then()
    if threading.current_thread() is threading.main_thread():
        old = signal.getsignal(signal.SIGINT)
        if callable(old):
            signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        if callable(old):
            signal.signal(signal.SIGINT, old)
            if held:
                old(signal.SIGINT, None)


@contextmanager
def sigint_blocked() -> Iterator[None]:
    """Block SIGINT in this thread for the block, so that a process started in it (and every
    process that one forks) starts with SIGINT blocked: Ctrl-C in a terminal, sent to the whole
    process group, neither kills it half started nor prints a traceback from the middle of
    ``import torch``; the parent stops it. A SIGINT that came meanwhile is delivered when the
    block ends (use it inside ``ctrl_c_held``)."""
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        if signal.SIGINT not in blocked:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def watch_lifeline(lifeline: Any) -> None:
    def watch() -> None:
        try:
            lifeline.recv_bytes()
            why = "lifeline: unexpected data"
        except (EOFError, OSError) as exc:
            why = f"lifeline closed: {exc!r}"
        print(f"distviz worker {os.getpid()}: {why}; the parent is gone, exiting", file=sys.stderr,
              flush=True)
        os._exit(limits.WorkerStatus.PARENT_GONE)
    threading.Thread(target=watch, name="distviz-lifeline", daemon=True).start()


def redirect_stderr(worker: str) -> None:
    """Send this process's stderr to ``$DISTVIZ_WORKER_LOG.<worker>.log``, or discard it:
    PyTorch's C++ warnings (TensorPipe EOFs after a crash) stay out of the UI."""
    log = os.environ.get("DISTVIZ_WORKER_LOG")  # a path prefix: <prefix>.<worker>.log
    target = f"{log}.{worker}.log" if log else os.devnull
    try:
        if log:
            os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError:
        fd = os.open(os.devnull, os.O_WRONLY)
    os.dup2(fd, 2)
    os.close(fd)
    if log:
        import faulthandler
        faulthandler.register(signal.SIGUSR1, all_threads=True)  # stacks on demand
