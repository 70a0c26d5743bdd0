"""What ``distviz trace`` tells every process of the traced program (torch-free).

The parent puts one JSON object in the environment variable ``DISTVIZ_TRACE``; the injected
bootstrap (``distviz/tracing/boot/sitecustomize.py``) reads it in each Python process the command
starts. ``--contexts`` is parsed by ``distviz.selection.ContextSelection`` (the same forms as
``distviz run``, and ``none``): here contexts count from 1 per initiator, in the order they
reach ``dist_autograd.backward``. Every backward of a context not selected is watched
(``distviz.tracing.watch.watcher``); ``none`` records no context in full and watches them all.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass

from distviz.errors import UsageError
from distviz.limits import TRACE_HANG_TIMEOUT
from distviz.selection import ContextSelection

ENV = "DISTVIZ_TRACE"
ON_HANG = ("stop", "continue")
# the node id of the test running now, set by the pytest plugin (``distviz.tracing.pytest_plugin``)
# in the pytest process before each test; the processes a test starts inherit it
TEST_ENV = "DISTVIZ_TEST"


def current_test() -> str | None:
    """The node id of the pytest test running in (or that started) this process, if any."""
    return os.environ.get(TEST_ENV) or None


@dataclass(frozen=True, slots=True)
class TraceConfig:
    """The settings every traced process reads from ``DISTVIZ_TRACE``.

    ``session_dir`` is the parent's private folder (claims, the event log); ``parent_pid`` the
    ``distviz trace`` process to signal when the program must stop. Both are ``None`` for the
    Python API (``distviz.backward``), which has no parent.
    """

    out_dir: str
    contexts: str = "first"
    max_contexts: int | None = None
    on_hang: str = "stop"
    hang_timeout: float = TRACE_HANG_TIMEOUT
    interop_threads: int | None = None
    strict: bool = False    # --strict: a gradient that went wrong fails the run (or the test)
    session_dir: str | None = None
    parent_pid: int | None = None

    @property
    def spec(self) -> ContextSelection:
        return ContextSelection.parse(self.contexts)

    def to_env(self) -> str:
        """The JSON text for ``DISTVIZ_TRACE``."""
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_env(cls, text: str | None = None) -> TraceConfig | None:
        """Read ``DISTVIZ_TRACE`` (or ``text``); ``None`` when unset or unreadable."""
        raw = os.environ.get(ENV) if text is None else text
        if not raw:
            return None
        try:
            obj = json.loads(raw)
            return cls(**{k: obj[k] for k in obj if k in cls.__dataclass_fields__})
        except (ValueError, TypeError):
            return None


def check_options(contexts: str, max_contexts: int | None, on_hang: str, hang_timeout: float,
                  interop_threads: int | None) -> ContextSelection:
    """Validate ``distviz trace`` options; returns the parsed ``--contexts``.

    Raises ``UsageError`` naming the bad option.
    """
    spec = ContextSelection.parse(contexts)
    if max_contexts is not None and max_contexts < 1:
        raise UsageError(f"--max-contexts {max_contexts}: expected 1 or more")
    if on_hang not in ON_HANG:
        raise UsageError(f"--on-hang {on_hang}: expected stop or continue")
    if not math.isfinite(hang_timeout) or hang_timeout <= 0:
        raise UsageError(f"--hang-timeout {hang_timeout:g}: expected a positive number of seconds")
    if interop_threads is not None and interop_threads < 1:
        raise UsageError(f"--interop-threads {interop_threads}: expected 1 or more")
    return spec
