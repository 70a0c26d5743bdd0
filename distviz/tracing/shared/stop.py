"""Stopping a traced program (torch-free) on a hang.

Under ``distviz trace`` a process that finds a hang logs a ``stop`` event, signals the parent
(``SIGUSR1``), which stops every process of the program, and waits for it; when the parent is
gone the process leaves at once with ``limits.EXIT_HANG``. Without a parent (the Python API)
there is nothing to stop: ``HangPredicted`` is raised instead.
"""

from __future__ import annotations

import os
import signal
import time

from distviz import limits
from distviz.tracing.config import TraceConfig
from distviz.tracing.shared import journal, writer


class HangPredicted(RuntimeError):
    """The replay predicts that this FAST-mode backward hangs (raised by the Python API
    instead of running the real backward); the message says why."""


def stop_program(config: TraceConfig, reason: str, explanation: str | None = None) -> None:
    """Ask ``distviz trace`` to stop the whole program, and wait for it; without a parent
    (the Python API) raise ``HangPredicted`` with the explanation. Never returns under
    ``distviz trace``: the parent stops this process, or it leaves with ``EXIT_HANG``."""
    if config.parent_pid is None or config.session_dir is None:
        raise HangPredicted(explanation or reason)
    writer.settle()     # the rows of the contexts before this one are in the log first
    journal.append(config.session_dir, journal.Event(kind=journal.EventKind.STOP, pid=os.getpid(),
                                                     message=reason))
    try:
        os.kill(config.parent_pid, signal.SIGUSR1)
    except OSError:
        os._exit(limits.EXIT_HANG)
    while True:   # the parent stops every process of the program; leave if it is gone
        time.sleep(0.5)
        try:
            os.kill(config.parent_pid, 0)
        except OSError:
            os._exit(limits.EXIT_HANG)
