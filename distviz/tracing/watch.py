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

When a deadline passes, the watchdog records the context's graph as it is now on every
worker of the context (``recorder.gather`` over the program's RPC agent with
``assemble.piece_here``: no hooks are put on a graph whose backward runs, no saved tensor is
read), fetches the gradients accumulated so far (``observe_real.fetch_piece``, which also drops
the node references), replays it and explains at once, with the call sites and variable names
of a recorded context (``callsites`` notes every context's RPCs when watching):

* the replay hangs: the hang, as a recorded context's; ``--on-hang stop`` stops the program;
* the replay completes: a slow backward, not a hang (never stopped; said again when it
  returns).

A backward that raises is re-raised unchanged; when its context's graph is still there and no
worker is gone, it is recorded and replayed (best effort). Only what happened writes a trace
(``meta.traced.watched``) and a row; ``distviz.tracing.watch_report`` words them. Each process
hands its ``BackwardStats`` to the session once (``hand_over``: at ``rpc.shutdown``, at exit,
or before a hang stops the program).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import torch.distributed.rpc as rpc

from distviz.recorder import contexts
from distviz.replay.watched import Watched as Ended
from distviz.replay.watched import WatchedState
from distviz.runner import observe_real
from distviz.trace import Trace
from distviz.tracing import (
    assemble,
    callsites,
    fanout,
    inflight,
    journal,
    live,
    stop,
    watch_hook,
    watch_report,
)
from distviz.tracing.backward_stats import BackwardStats
from distviz.tracing.config import TraceConfig, current_test
from distviz.tracing.journal import ContextRow
from distviz.words import error_line, first_line

if TYPE_CHECKING:  # pragma: no cover
    from distviz.tracing.observe import Process


@dataclass(eq=False, slots=True, kw_only=True)
class Watched(inflight.InFlight):
    """One watched backward in the table of backwards in flight: the program's frame
    (variable names for a recording) and its deadline. ``fired``: the watchdog took it;
    ``lock`` is held while the watchdog records it."""

    frame: types.FrameType | None
    deadline: float
    fired: bool = False
    returned: bool = False      # PyTorch's backward returned or raised
    lock: threading.Lock = field(default_factory=threading.Lock)
    late: _Late | None = None
    watched: ClassVar[bool] = True


@dataclass
class _Late:
    """What the watchdog wrote about a backward past its deadline."""

    trace: Trace
    replay: Any
    path: Path
    row: ContextRow
    state: WatchedState | None = None     # what the last row said: a hang, before it raised


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

    def _next(self) -> Watched | None:
        table = inflight.TABLE
        with table.lock:
            entry = next((e for e in table.entries.values()
                          if isinstance(e, Watched) and not e.fired), None)
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
            self.stats.worker = table.worker = proc.me()
            table.slot = inflight.open_slot(self.config.session_dir)
            self.watchdog.start()
        now = time.monotonic()
        entry = Watched(context_id, step, roots, retain_graph, now, threading.get_ident(),
                        frame=frame, deadline=now + self.config.hang_timeout)
        token = table.enter(entry)
        if self.watchdog.idle:
            self.watchdog.wake.set()
        try:
            observe_real.BACKWARD(context_id, roots, retain_graph=retain_graph)
        except BaseException as exc:
            entry.returned = True
            table.leave(token)
            seconds = time.monotonic() - now
            self.count(step, seconds, first_line(exc))
            entry.frame = None
            self._raised(proc, entry, exc, seconds)
            callsites.drop(context_id)
            raise
        entry.returned = True
        table.leave(token)
        seconds = time.monotonic() - now
        self.count(step, seconds, None)
        entry.frame = None
        if entry.fired:
            self._returned(entry, seconds)
        callsites.drop(context_id)

    # -- past the deadline (the watchdog thread) -----------------------------------------------

    def _deadline(self, entry: Watched) -> None:
        with entry.lock:
            if entry.returned:      # it returned while the watchdog woke: nothing happened
                return
            me = self.stats.worker or rpc.get_worker_info().name
            timeout = self.config.hang_timeout
            try:
                late = self._record(entry, me, "hang", None)
            except Exception as exc:  # noqa: BLE001 - a worker gone, the context released
                live.say(watch_report.unrecorded_text(me, entry.step, timeout, exc))
                return
            entry.late = late
            for line in watch_report.deadline_lines(me, entry.step, timeout, late.trace,
                                                    late.replay):
                live.say(line)
            live.say(f"trace: {late.path}")
        if late.replay.outcome == "hang" and self.config.on_hang == "stop":
            self.hand_over()
            try:
                stop.stop_program(self.config, f"{me} context {entry.step} hangs",
                                     late.row.explanation)
            except stop.HangPredicted:   # no distviz trace to stop it (the Python API)
                pass

    def _record(self, entry: Watched, me: str, state: WatchedState, error: str | None
                ) -> _Late:
        """Record, replay and write ``entry``'s context as it is now (``state``: what
        happened in it)."""
        from distviz.replay import replay

        t0 = time.perf_counter()
        trace = assemble.record_trace(entry.context_id, entry.roots, entry.retain_graph,
                                      entry.frame, record_fn=assemble.piece_here)
        # from distviz's helper thread: the program's thread holds the context (a backward
        # that raised), and an RPC made there would join it
        got = fanout.on_all(trace.workers, me, observe_real.fetch_piece, entry.context_id,
                              True, True, False, True)
        seconds = {"record": round(time.perf_counter() - t0, 4)}
        t1 = time.perf_counter()
        rp = replay(trace)
        seconds["replay"] = round(time.perf_counter() - t1, 4)
        grads = {nid: s for piece in got.values() if isinstance(piece, dict)
                 for nid, s in (piece.get("summaries") or {}).items()}
        waited = time.monotonic() - entry.since
        trace.meta["traced"] = {
            "pid": os.getpid(), "argv": list(sys.argv), "context": entry.step,
            "seconds": seconds, "watched": {"gradients": grads}}
        if current_test() is not None:
            trace.meta["traced"]["test"] = current_test()
        path = journal.claim(self.config.out_dir, self.config.session_dir, me, entry.step)
        late = _Late(trace=trace, replay=rp, path=path, row=self._row(trace, rp, path, entry,
                                                                     seconds))
        self._write(late, state, waited, error)
        return late

    def _row(self, trace: Trace, rp: Any, path: Path, entry: Watched,
             seconds: dict[str, float]) -> ContextRow:
        from distviz.tracing import report

        return report.row(trace, rp, str(path), entry.step, os.getpid(), seconds)

    def _write(self, late: _Late, state: WatchedState, waited: float, error: str | None
               ) -> None:
        """Judge ``late``'s context for ``state``, save its trace and log its row."""
        ended = Ended(state, waited, self.config.hang_timeout, error, hung=late.state == "hang")
        late.row = watch_report.watched_row(late.row, late.trace, late.replay, ended)
        late.state = state
        traced = late.trace.meta.traced
        assert traced is not None
        traced["watched"].update(watch_report.watched_meta(
            ended, traced["watched"].get("gradients") or {}))
        traced["agreement"] = late.row.agreement_text
        journal.write_trace(late.path, late.trace.dumps())
        journal.append(self.config.session_dir, journal.Event(
            kind="context", pid=os.getpid(), worker=late.trace.initiator, row=late.row))

    # -- after the deadline, or instead of it (the program's thread) -----------------------------

    def _returned(self, entry: Watched, seconds: float) -> None:
        """A backward the watchdog took returned: slow, not a hang (or a hang some worker
        got out of: said as it is)."""
        with entry.lock:
            late = entry.late
            if late is None:
                return
            self._write(late, "returned", seconds, None)
            live.say(watch_report.returned_text(late.trace.initiator, entry.step, seconds,
                                                    self.config.hang_timeout, late.replay))

    def _raised(self, proc: Process, entry: Watched, exc: BaseException,
                seconds: float) -> None:
        """A watched backward raised: say so, and record its graph when that is cheap (the
        context is still here, no worker is gone); never raises."""
        text = error_line(exc)
        me = self.stats.worker or proc.worker or "?"
        try:
            with entry.lock:
                if entry.late is not None:
                    self._write(entry.late, "raised", seconds, text)
                    live.say(f"{me} context {entry.step}: after {seconds:.1f} s PyTorch's "
                                 f"backward raised: {text}")
                    return
                if watch_report.worker_gone(text) or not contexts.context_here(entry.context_id):
                    journal.append(self.config.session_dir, journal.Event(
                        kind="not_recorded", pid=os.getpid(), worker=me,
                        message=watch_report.raised_note(entry.step, seconds, text)))
                    return
                late = entry.late = self._record(entry, me, "raised", text)
            live.say(f"{me} context {entry.step}: {late.row.explanation}")
            live.say(f"trace: {late.path}")
        except Exception as err:  # noqa: BLE001 - PyTorch's error is what the program gets
            journal.append(self.config.session_dir, journal.Event(
                kind="not_recorded", pid=os.getpid(), worker=me,
                message=watch_report.raised_note(entry.step, seconds, text,
                                                 f"{type(err).__name__}: {first_line(err)}")))

    def hand_over(self) -> None:
        """Log this process's statistics for the session, once."""
        with self.lock:
            if self.handed or not self.stats.calls:
                return
            self.handed = True
            stats = self.stats.to_json()
        journal.append(self.config.session_dir, journal.Event(
            kind="backwards", pid=os.getpid(), worker=self.stats.worker, stats=stats))


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
