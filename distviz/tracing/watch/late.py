"""A watched backward past its deadline, or one that raised (torch side; loaded only then).

``distviz.tracing.watch.watcher`` keeps the cheap path (a deadline in the table of backwards in
flight, a count); this module does what happens when that is not enough: it records the
context's graph as it is now on every worker (``assemble.piece_here``: no hooks, no saved
tensor read), fetches the gradients accumulated so far and the custom backwards its threads are in
(``busy``), replays it, judges and writes the
trace and its row, and says it live (``watch_report`` words it):

* ``deadline``: the watchdog thread, at the deadline; a replay that hangs stops the program
  with ``--on-hang stop``;
* ``returned``: the program's thread, when a backward the watchdog took returns (slow, not a
  hang);
* ``raised``: the program's thread, when a watched backward raises.

A hang is always written. A slow backward, or one that raised, is written while the process's
``Budget`` lasts (``limits.TRACE_WATCHED_WRITES``; a context that raises again, once): past it,
the watch says so once and counts the rest, as it counts every backward.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import torch.distributed.rpc as rpc

from distviz import limits
from distviz.judge.watched import Watched, WatchedState
from distviz.recorder import contexts
from distviz.recorder.gather import NoAnswer
from distviz.trace import Trace
from distviz.tracing.config import TraceConfig, current_test
from distviz.tracing.recording import assemble, capture
from distviz.tracing.shared import fanout, journal, live, stop
from distviz.tracing.shared.backward_stats import BackwardStats
from distviz.tracing.watch import busy, watch_report
from distviz.tracing.watch.entry import Budget, Late, WatchEntry
from distviz.words import error_line, first_line

if TYPE_CHECKING:  # pragma: no cover
    from distviz.replay.result import Replay
    from distviz.tracing.shared.process import Process


class Owner(Protocol):
    """What this module needs of the process's ``watch.Watch``."""

    config: TraceConfig
    stats: BackwardStats
    budget: Budget

    def hand_over(self) -> None: ...


class Recorded(NamedTuple):
    """A watched context's graph, recorded as it is now, and its replay (not written yet)."""

    trace: Trace
    replay: Replay
    seconds: dict[str, float]     # what the recording and the replay took


def deadline(watch: Owner, entry: WatchEntry) -> None:
    """The watchdog thread, at ``entry``'s deadline: record, replay, explain; stop the
    program when the replay hangs and ``--on-hang stop``."""
    with entry.lock:
        if entry.returned:      # it returned while the watchdog woke: nothing happened
            return
        me = watch.stats.worker or rpc.get_worker_info().name
        timeout = watch.config.hang_timeout
        try:
            got = _record(watch, entry, me)
            if got.replay.outcome != "hang" and not _may_write(watch, me):
                return
            late = _keep(watch, entry, me, got, "hang", None)
        except Exception as exc:  # noqa: BLE001 - a worker gone or silent, the context released
            entry.unrecorded = True
            if entry.returned:  # it returned while it was recorded, and took its context along
                return          # (``returned`` says it was slow)
            entry.silent = exc.worker if isinstance(exc, NoAnswer) else None
            text = watch_report.unrecorded_text(entry.step, timeout, exc, entry.silent,
                                                limits.LATE_RECORD_TIMEOUT)
            live.say(f"{me} {text}")
            journal.append(watch.config.session_dir, journal.Event(
                kind=journal.EventKind.NOT_RECORDED, pid=os.getpid(), worker=me, message=text))
            return
        entry.late = late
        for line in watch_report.deadline_lines(me, entry.step, timeout, late.trace,
                                                late.replay):
            live.say(line)
        live.say(f"trace: {late.path}")
    if late.replay.outcome == "hang" and watch.config.on_hang == "stop":
        watch.hand_over()
        try:
            stop.stop_program(watch.config, f"{me} context {entry.step} hangs",
                                 late.row.explanation)
        except stop.HangPredicted:   # no distviz trace to stop it (the Python API)
            pass


def _may_write(watch: Owner, me: str, raised_in: int | None = None) -> bool:
    """Whether the process's budget lets a slow or raised backward's trace be written; the
    first time it does not, say so live and in the summary."""
    take = watch.budget.take(current_test(), raised_in)
    if take == "say":
        note = watch_report.budget_note(limits.TRACE_WATCHED_WRITES)
        live.say(f"{me}: {note}")
        journal.append(watch.config.session_dir, journal.Event(
            kind=journal.EventKind.NOT_RECORDED, pid=os.getpid(), worker=me, message=note))
    return take == "write"


def _record(watch: Owner, entry: WatchEntry, me: str) -> Recorded:
    """Record and replay ``entry``'s context as it is now."""
    got: dict[str, Any] = {}

    def record() -> Trace:
        trace = assemble.record_trace(entry.context_id, entry.roots, entry.retain_graph,
                                      entry.frame, record_fn=assemble.piece_here,
                                      timeout=limits.LATE_RECORD_TIMEOUT)
        # from distviz's helper thread: the program's thread holds the context (a backward
        # that raised), and an RPC made there would join it
        got.update(fanout.on_all(trace.workers, me, busy.fetch, entry.context_id))
        return trace
    trace, rp, _, seconds, _ = capture.capture(record)
    assert rp is not None
    grads = {nid: s for piece in got.values() if isinstance(piece, dict)
             for nid, s in (piece.get("summaries") or {}).items()}
    watched: dict[str, Any] = {"gradients": grads}
    running = {w: piece["busy"] for w, piece in sorted(got.items())
               if isinstance(piece, dict) and piece.get("busy")}
    if running:
        watched["busy"] = running
    capture.stamp(trace, entry.step, seconds, watched=watched)
    return Recorded(trace, rp, seconds)


def _keep(watch: Owner, entry: WatchEntry, me: str, got: Recorded, state: WatchedState,
          error: str | None) -> Late:
    """Write ``got`` (``state``: what happened in its context) as ``me``'s trace and row."""
    path = capture.claim(watch.config, me, entry.step)
    late = Late(trace=got.trace, replay=got.replay, path=path,
                row=capture.row(got.trace, got.replay, path, entry.step, got.seconds))
    _write(watch, late, state, time.monotonic() - entry.since, error)
    return late


def _write(watch: Owner, late: Late, state: WatchedState, waited: float, error: str | None
           ) -> None:
    """Judge ``late``'s context for ``state``, save its trace and log its row."""
    ended = Watched(state, waited, watch.config.hang_timeout, error, hung=late.state == "hang")
    late.row = watch_report.watched_row(late.row, late.trace, late.replay, ended)
    late.state = state
    traced = late.trace.meta.traced
    assert traced is not None
    traced["watched"].update(watch_report.watched_meta(ended, late.trace))
    capture.save(watch.config, late.trace, late.path, late.row, late.trace.initiator)


def returned(watch: Owner, entry: WatchEntry, seconds: float) -> None:
    """A backward the watchdog took returned: slow, not a hang (or a hang some worker
    got out of: said as it is)."""
    with entry.lock:
        late = entry.late
        if late is None:    # not recorded (said so, or the budget is spent: quiet)
            if entry.unrecorded:
                live.say(watch_report.answered_text(watch.stats.worker or "?", entry.step,
                                                    seconds, watch.config.hang_timeout,
                                                    entry.silent))
            return
        _write(watch, late, "returned", seconds, None)
        live.say(watch_report.returned_text(late.trace.initiator, entry.step, seconds,
                                                watch.config.hang_timeout, late.replay))

def raised(watch: Owner, proc: Process, entry: WatchEntry, exc: BaseException,
           seconds: float) -> None:
    """A watched backward raised: say so, and record its graph when that is cheap (the
    context is still here, no worker is gone); never raises."""
    text = error_line(exc)
    me = watch.stats.worker or proc.worker or "?"
    try:
        with entry.lock:
            if entry.late is not None:
                _write(watch, entry.late, "raised", seconds, text)
                live.say(f"{me} context {entry.step}: after {seconds:.1f} s PyTorch's "
                             f"backward raised: {text}")
                return
            if entry.silent is not None or watch_report.worker_gone(text) or \
                    not contexts.context_here(entry.context_id):
                why = None if entry.silent is None else \
                    f"{entry.silent} did not answer at the deadline"
                journal.append(watch.config.session_dir, journal.Event(
                    kind=journal.EventKind.NOT_RECORDED, pid=os.getpid(), worker=me,
                    message=watch_report.raised_note(entry.step, seconds, text, why)))
                return
            if not _may_write(watch, me, entry.context_id):
                return
            late = entry.late = _keep(watch, entry, me, _record(watch, entry, me), "raised",
                                          text)
        live.say(f"{me} context {entry.step}: {late.row.explanation}")
        live.say(f"trace: {late.path}")
    except Exception as err:  # noqa: BLE001 - PyTorch's error is what the program gets
        journal.append(watch.config.session_dir, journal.Event(
            kind=journal.EventKind.NOT_RECORDED, pid=os.getpid(), worker=me,
            message=watch_report.raised_note(entry.step, seconds, text,
                                             f"{type(err).__name__}: {first_line(err)}")))
