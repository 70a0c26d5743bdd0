"""A backward called from TorchScript, watched with its deadline (torch side).

A scripted ``dist_autograd.backward`` is PyTorch's op ``aten::dist_backward``, run in C++:
nothing of it passes Python, so distviz cannot record its graph, replay it or say whether it
hangs (``distviz.tracing.hooks.jit`` counts it when its context ends). What can be seen from
Python is the call of the scripted function that runs it: ``install`` wraps
``torch.jit.ScriptFunction.__call__``, and a call of a function whose graph (with the scripted
functions it calls, inlined) holds ``aten::dist_backward`` is watched: one watchdog thread per
process says, live and in the summary, when such a call has not returned after
``--hang-timeout`` seconds (a call of another scripted function costs one dictionary look-up),
and again when it returns later. Calls that do not pass Python (a scripted function that
another one calls, a scripted module's method, a scripted function sent over RPC) are not
seen.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from distviz.frames import own_frames, site_text
from distviz.tracing.hooks.jit import DIST_BACKWARD
from distviz.tracing.shared import journal, live, process

_CALLS: dict[str, bool] = {}    # qualified name -> its graph runs aten::dist_backward


@dataclass
class ScriptedCall:
    """One call of a scripted function that runs a backward, in flight."""

    name: str
    site: str | None
    since: float
    deadline: float
    said: bool = False


class ScriptedWatchdog:
    """The thread that wakes at the earliest deadline of the calls in flight (every deadline
    is the same time-out after its start, so the oldest call's is the earliest)."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.calls: dict[int, ScriptedCall] = {}    # in the order they started
        self.thread: threading.Thread | None = None
        self.tokens = 0

    def enter(self, call: ScriptedCall) -> int:
        with self.lock:
            self.tokens += 1
            self.calls[self.tokens] = call
            if self.thread is None:
                self.thread = threading.Thread(target=self._loop, name="distviz-scripted",
                                               daemon=True)
                self.thread.start()
            elif len(self.calls) == 1:
                self.lock.notify()
            return self.tokens

    def leave(self, token: int) -> ScriptedCall:
        with self.lock:
            return self.calls.pop(token)

    def _loop(self) -> None:
        while True:
            with self.lock:
                waiting = next((c for c in self.calls.values() if not c.said), None)
                if waiting is None:
                    self.lock.wait()
                    continue
                delay = waiting.deadline - time.monotonic()
                if delay > 0:
                    self.lock.wait(delay)
                    continue
                waiting.said = True
            try:
                _late(waiting)
            except Exception:  # noqa: BLE001 - the watch must never stop the program
                pass


_WATCHDOG: list[ScriptedWatchdog] = []


def _watchdog() -> ScriptedWatchdog:
    """This process's watchdog (a forked child makes its own)."""
    if not _WATCHDOG or _WATCHDOG[0].thread is not None and not _WATCHDOG[0].thread.is_alive():
        _WATCHDOG[:] = [ScriptedWatchdog()]
    return _WATCHDOG[0]


def runs_backward(fn: Any) -> bool:
    """Whether scripted function ``fn`` (or one it calls) runs ``aten::dist_backward``."""
    name = str(getattr(fn, "qualified_name", ""))
    known = _CALLS.get(name)
    if known is None:
        try:
            known = DIST_BACKWARD in str(fn.inlined_graph)
        except Exception:  # noqa: BLE001 - no graph to read: not watched
            known = False
        _CALLS[name] = known
    return known


def _late(call: ScriptedCall) -> None:
    """A watched call passed its deadline: say so, live and in the summary."""
    proc = process.PROCESS
    if proc is None:
        return
    me = proc.worker or f"pid {os.getpid()}"
    text = late_text(call.name, call.site, proc.config.hang_timeout)
    live.say(f"{me}: {text}")
    journal.append(proc.config.session_dir, journal.Event(
        kind=journal.EventKind.NOT_RECORDED, pid=os.getpid(), worker=proc.worker, message=text))


def late_text(name: str, site: str | None, timeout: float) -> str:
    """What is said when a scripted function that runs a backward passes its deadline."""
    where = f" called at {site}" if site else ""
    return (f"the scripted function {name}{where}, which runs dist_autograd.backward in "
            f"TorchScript, has not returned after {timeout:g} s; distviz cannot record a "
            "backward called from TorchScript (it runs PyTorch's op, never Python), so it "
            "cannot tell a hang from a slow backward: call dist_autograd.backward from Python "
            "to have it recorded and explained")


def _watched(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        proc = process.PROCESS
        if proc is None or not runs_backward(self):
            return original(self, *args, **kwargs)
        now = time.monotonic()
        site = site_text(own_frames(sys._getframe(1)))
        dog = _watchdog()
        token = dog.enter(ScriptedCall(str(self.qualified_name), site, now,
                               now + proc.config.hang_timeout))
        try:
            return original(self, *args, **kwargs)
        finally:
            call = dog.leave(token)
            if call.said:
                live.say(f"{proc.worker or f'pid {os.getpid()}'}: the scripted function "
                         f"{call.name} returned after {time.monotonic() - call.since:.1f} s")
    __call__._distviz = True    # type: ignore[attr-defined]
    return __call__


def install() -> None:
    """Watch the calls of scripted functions that run a backward (once per process)."""
    cls = getattr(torch.jit, "ScriptFunction", None)
    if cls is None or getattr(cls.__call__, "_distviz", False):
        return
    setattr(cls, "__call__", _watched(cls.__call__))  # noqa: B010 - a method of a C++ class
