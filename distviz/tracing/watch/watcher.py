"""Every backward distviz does not record in full, watched at almost no cost (torch side).

Under ``distviz trace`` (and the pytest plugin) ``traced_backward`` hands each
``dist_autograd.backward`` that ``--contexts`` does not select to ``Watch.watched``. The call
only notes a deadline (``--hang-timeout``) in the process's table of backwards in flight
(``inflight.TABLE``, which ``distviz snapshot`` reads too) and
runs PyTorch's backward in the program's thread: a backward that returns in time costs a
dictionary entry and a count (``BackwardStats``), no RPC, no file, no thread. One watchdog
thread per process sleeps until the earliest deadline (entries are kept in the order they
start, and every deadline is the same time-out after its start, so the first entry's is the
earliest).

When a deadline passes, the watchdog (``distviz.tracing.watch.late``, imported only then: a
process whose backwards all return in time never loads the replay) records the context's graph
as it is now on every worker of the context (``recorder.gather`` over the program's RPC agent with
``assemble.piece_here``: no hooks are put on a graph whose backward runs, no saved tensor is
read), fetches the gradients accumulated so far (``observe_real.fetch_piece``, which also drops
the node references), replays it and explains at once, with the call sites and variable names
of a recorded context (``callsites`` notes every context's RPCs when watching):

* the replay hangs: the hang, as a recorded context's; ``--on-hang stop`` stops the program;
* the replay completes: a slow backward, not a hang (never stopped; said again when it
  returns).

A backward that raises is re-raised unchanged; when its context's graph is still there and no
worker is gone, it is recorded and replayed (best effort). Only what happened writes a trace
(``meta.traced.watched``) and a row; ``distviz.tracing.watch.watch_report`` words them. Each process
hands its ``BackwardStats`` to the session once (``hand_over``: at ``rpc.shutdown``, at exit,
or before a hang stops the program).
"""

from __future__ import annotations

import atexit
import os
import threading
import time
import types
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from distviz.recorder.contexts import BACKWARD
from distviz.tracing import callsites
from distviz.tracing.config import TraceConfig
from distviz.tracing.shared import inflight, journal, live
from distviz.tracing.shared.backward_stats import BackwardStats
from distviz.tracing.watch import hook as watch_hook
from distviz.tracing.watch.entry import Budget, WatchEntry
from distviz.words import first_line

if TYPE_CHECKING:  # pragma: no cover
    from distviz.tracing.shared.process import Process

_monotonic, _thread = time.monotonic, threading.get_ident


class Watchdog:
    """The one thread that wakes at the earliest deadline of the watched backwards in
    ``inflight.TABLE`` (started at the first, daemon: it never keeps a process alive)."""

    def __init__(self, fire: Any) -> None:
        self.fire = fire
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.idle = True        # it waits with no watched backward in flight
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        with self.lock:
            if self.thread is None:
                self.thread = threading.Thread(target=self._loop, name="distviz-watchdog",
                                               daemon=True)
                self.thread.start()

    def _next(self) -> WatchEntry | None:
        table = inflight.TABLE
        with table.lock:
            entry = next((e for e in table.entries.values()
                          if isinstance(e, WatchEntry) and not e.fired), None)
            self.idle = entry is None
            return entry

    def _loop(self) -> None:
        while True:
            self.wake.clear()
            entry = self._next()
            if entry is None:
                self.wake.wait()
                continue
            delay = entry.deadline - time.monotonic()
            if delay > 0:
                self.wake.wait(delay)
                continue
            with inflight.TABLE.lock:
                entry.fired = True
            try:
                self.fire(entry)
            except Exception as exc:  # noqa: BLE001 - the watch must never stop the program
                live.say(f"the watch of context {entry.step} failed: "
                             f"{type(exc).__name__}: {first_line(exc)}")


@dataclass
class Watch:
    """This process's watch: settings, statistics, watchdog."""

    config: TraceConfig
    stats: BackwardStats = field(default_factory=BackwardStats)
    budget: Budget = field(default_factory=Budget)
    handed: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)
    watchdog: Watchdog = field(init=False)

    def __post_init__(self) -> None:
        self.watchdog = Watchdog(self._deadline)

    def count(self, step: int, seconds: float, error: str | None) -> None:
        with self.lock:
            self.stats.add(step, seconds, error)

    def watched(self, proc: Process, context_id: int, roots: list[Any],
                retain_graph: bool, step: int, frame: types.FrameType | None) -> None:
        """PyTorch's backward, watched (see the module docstring); returns or raises what
        PyTorch does."""
        table = inflight.TABLE
        if self.stats.worker is None:
            self.stats.worker = proc.me()
            table.slot = inflight.open_slot(self.config.session_dir, self.stats.worker)
            self.watchdog.start()
        now = _monotonic()
        entry = WatchEntry(context_id, step, roots, retain_graph, now, _thread(), frame,
                           now + self.config.hang_timeout)
        token = table.enter(entry)
        if self.watchdog.idle:
            self.watchdog.wake.set()
        try:
            BACKWARD(context_id, roots, retain_graph)
        except BaseException as exc:
            entry.returned = True
            table.leave(token)
            seconds = _monotonic() - now
            self.count(step, seconds, first_line(exc))
            entry.frame = None
            callsites.quiet(context_id)
            self._raised(proc, entry, exc, seconds)
            raise
        entry.returned = True
        table.leave(token)
        seconds = _monotonic() - now
        self.count(step, seconds, None)
        entry.frame = None
        callsites.quiet(context_id)
        if entry.fired:
            self._returned(entry, seconds)

    # -- past the deadline, and after it (``distviz.tracing.watch.late``, loaded then) ------

    def _deadline(self, entry: WatchEntry) -> None:
        from distviz.tracing.watch import late as watch_late

        watch_late.deadline(self, entry)

    def _returned(self, entry: WatchEntry, seconds: float) -> None:
        from distviz.tracing.watch import late as watch_late

        watch_late.returned(self, entry, seconds)

    def _raised(self, proc: Process, entry: WatchEntry, exc: BaseException,
                seconds: float) -> None:
        from distviz.tracing.watch import late as watch_late

        watch_late.raised(self, proc, entry, exc, seconds)

    def hand_over(self) -> None:
        """Log this process's statistics for the session, once."""
        with self.lock:
            if self.handed or not self.stats.calls:
                return
            self.handed = True
            stats = self.stats.to_json()
        # a process whose backwards were all recorded in full (none watched) named no worker
        stats["worker"] = stats["worker"] or _worker_name()
        journal.append(self.config.session_dir, journal.Event(
            kind=journal.EventKind.BACKWARDS, pid=os.getpid(), worker=stats["worker"],
            stats=stats))


def _worker_name() -> str | None:
    """This process's worker name (noted at ``rpc.init_rpc``, else asked of the agent while
    it runs); ``None`` when neither knows it."""
    from distviz.tracing.shared import process

    if process.PROCESS is not None and process.PROCESS.worker is not None:
        return process.PROCESS.worker
    try:
        import torch.distributed.rpc as rpc

        return str(rpc.get_worker_info().name)
    except Exception:  # noqa: BLE001 - no agent: the summary names the process by its pid
        return None


_WATCHES: dict[int, Watch] = {}


def here() -> Watch | None:
    """This process's watch (a forked child gets its own at ``start``)."""
    return _WATCHES.get(os.getpid())


def start(config: TraceConfig) -> Watch:
    """Watch this process's backwards (``patches.install``, and after a fork)."""
    watch = _WATCHES[os.getpid()] = Watch(config=config)
    watch_hook.WATCH = watch
    atexit.register(_at_exit, os.getpid())
    return watch


def _at_exit(pid: int) -> None:
    watch = _WATCHES.get(pid)
    if watch is not None and pid == os.getpid():
        watch.hand_over()


def hand_over() -> None:
    """Hand this process's statistics to the session (``rpc.shutdown``)."""
    watch = here()
    if watch is not None:
        watch.hand_over()
