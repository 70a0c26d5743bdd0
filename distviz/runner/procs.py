"""Starting processes from the fork server (pure: the parent imports it)."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from distviz import limits

__all__ = ["no_main_import", "redirect_stderr", "watch_lifeline"]


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


def watch_lifeline(lifeline: Any) -> None:
    def watch() -> None:
        try:
            lifeline.recv_bytes()
            why = "lifeline: unexpected data"
        except (EOFError, OSError) as exc:
            why = f"lifeline closed: {exc!r}"
        print(f"distviz worker {os.getpid()}: {why}; the parent is gone, exiting", file=sys.stderr,
              flush=True)
        os._exit(limits.PARENT_GONE_EXIT)
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
