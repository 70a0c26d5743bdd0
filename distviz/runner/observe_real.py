"""The one observer of PyTorch's real backward (torch side).

Every real ``dist_autograd.backward`` distviz watches goes through here: ``distviz run``'s
initiator (``runner/worker/initiator.py``), the trainers of a training scenario
(``runner/worker/session.py``) and a traced program (``tracing/recording/observe.py``). With distviz's hooks on
every node of every worker of the context (``recorder_hooks.install_hooks``), a pass runs under
the hang time-out:

* ``run_pass`` runs it in a thread of its own and waits at most the time-out (a hung pass is
  left behind: the run is torn down afterwards);
* ``watch`` runs it in the caller's thread (a traced program's backward stays in the program's
  thread, and its exception is the program's), with a watchdog called at the time-out.

``collect`` then fetches every worker's hook events and ``get_gradients`` in one RPC round from
a side thread (outside the program's context), estimates clock offsets for workers on other
hosts, pairs pre- and post-hooks, and returns a typed ``RealRun``: ``RealRun.to_json()`` is the
trace's ``real`` section.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed.rpc as rpc

from distviz import limits
from distviz.outcome import Outcome
from distviz.recorder import contexts, hooks
from distviz.recorder.side_thread import ALARMS, in_new_thread, in_threads
from distviz.runner.gradients import summarize
from distviz.trace.sections import RealEvent
from distviz.words import first_line

__all__ = ["Passes", "RealRun", "answers", "call_on_workers", "clock_offsets", "collect",
           "fetch_piece", "on_all", "pair_events", "run_pass", "send_to_workers", "side", "watch"]


def side(fn: Callable[[], Any]) -> Any:
    """``fn()`` in a thread of its own (which holds no dist autograd context)."""
    return in_new_thread(fn)


def call_on_workers(workers: Sequence[str], me: str, fn: Callable[..., Any],
                    args: tuple[Any, ...], timeout: float) -> dict[str, Any]:
    """Call ``fn(*args)`` on every worker (locally on ``me``), in the calling thread; returns
    each worker's result, or the exception it raised (a dead worker's included)."""
    sent = send_to_workers(workers, me, fn, args, timeout)
    return answers(sent, me, fn, args)


def send_to_workers(workers: Sequence[str], me: str, fn: Callable[..., Any],
                    args: tuple[Any, ...], timeout: float) -> dict[str, Any]:
    """Start ``fn(*args)`` on every worker but ``me``: each one's future, or the exception
    ``rpc_async`` raised at once (a dead worker)."""
    sent: dict[str, Any] = {}
    for w in workers:
        if w == me:
            continue
        try:
            sent[w] = rpc.rpc_async(w, fn, args=args, timeout=timeout)
        except Exception as exc:  # noqa: BLE001 - a dead worker
            sent[w] = exc
    return sent


def answers(sent: Mapping[str, Any], me: str, fn: Callable[..., Any],
            args: tuple[Any, ...]) -> dict[str, Any]:
    """``fn(*args)`` run here for ``me`` while the others work, then every worker's answer to
    ``send_to_workers`` waited for: by worker, a result or the exception raised."""
    out: dict[str, Any] = {}
    try:
        out[me] = fn(*args)
    except Exception as exc:  # noqa: BLE001
        out[me] = exc
    for w, f in sent.items():
        if isinstance(f, Exception):
            out[w] = f
            continue
        try:
            out[w] = f.wait()
        except Exception as exc:  # noqa: BLE001
            out[w] = exc
    return out


def on_all(workers: Sequence[str], me: str, fn: Callable[..., Any], *args: Any,
           timeout: float = limits.HOOKS_TIMEOUT) -> dict[str, Any]:
    """Call ``fn(*args)`` on every worker (locally on ``me``) from a side thread, outside the
    caller's dist autograd context; failures come back as exceptions."""
    return dict(side(lambda: call_on_workers(workers, me, fn, args, timeout)))


# -- running a pass ----------------------------------------------------------------------------

@dataclass
class Passes:
    """The passes run so far: each one's ``(start, end)`` (``CLOCK_MONOTONIC`` ns), when the
    first began, and how the last ended (``completed``, ``error``, ``hang``)."""

    windows: list[tuple[int, int]] = field(default_factory=list)
    t0: int = 0
    outcome: Outcome = "completed"
    error: str | None = None
    started: int = 0     # the running pass's start

    def begin(self) -> int:
        self.started = time.monotonic_ns()
        self.t0 = self.t0 or self.started
        return self.started

    def running(self, outcome: Outcome, error: str | None) -> Passes:
        """These passes with the running one until now (what a watchdog collects)."""
        return Passes(windows=[*self.windows, (self.started, time.monotonic_ns())], t0=self.t0,
                      outcome=outcome, error=error, started=self.started)


def run_pass(context_id: int, roots: list[torch.Tensor], retain_graph: bool, timeout: float,
             passes: Passes) -> BaseException | None:
    """One ``dist_autograd.backward`` in a thread of its own, waited for at most ``timeout``
    seconds; its window and outcome go into ``passes``. Returns what it raised (``None`` when
    it returned, or still runs: ``passes.outcome == "hang"``)."""
    start = passes.begin()
    (ran,) = in_threads([lambda: contexts.BACKWARD(context_id, roots, retain_graph=retain_graph)],
                        timeout, f"distviz-backward-{len(passes.windows)}")
    passes.windows.append((start, time.monotonic_ns()))
    if not ran.done:
        passes.outcome = "hang"
        passes.error = (f"pass {len(passes.windows)}: dist_autograd.backward did not return "
                        f"within {timeout:g} s")
        return None
    if ran.error is not None:
        passes.outcome, passes.error = "error", first_line(ran.error)
        return ran.error
    return None


def watch(backward: Callable[[], Any], timeout: float, on_timeout: Callable[[], None],
          passes: Passes) -> BaseException | None:
    """Run ``backward()`` in this thread, with a watchdog that calls ``on_timeout()`` (from its
    own thread) when it has not returned after ``timeout`` seconds; then record its window and
    outcome in ``passes``. Returns what it raised (``BaseException`` included: the caller
    re-raises it)."""
    error: BaseException | None = None
    start = passes.begin()
    watchdog = ALARMS.after(timeout, on_timeout)
    try:
        backward()
    except BaseException as exc:  # noqa: BLE001 - handed to the caller, who re-raises it
        error = exc
    finally:
        watchdog.cancel()
    passes.windows.append((start, time.monotonic_ns()))
    passes.outcome = "error" if error is not None else "completed"
    passes.error = first_line(error) if error is not None else None
    return error


# -- collecting what every worker saw ----------------------------------------------------------

def fetch_piece(context_id: int, with_gradients: bool, forget: bool = False,
                keep: bool = False, summarized: bool = False) -> dict[str, Any]:
    """On one worker: its observed events and gradients (``recorder_hooks.collect``) and its
    boot id; then, with ``forget``, its hooks and node references dropped, with ``keep`` only
    its hooks (the node references stay for a later pass). With ``summarized`` the gradients
    come back as their JSON summaries (``summarize``, made here on their owner: no tensor
    crosses the wire), in ``piece["summaries"]``."""
    piece = hooks.collect(context_id, with_gradients, copy=not summarized)
    piece["boot"] = hooks.clock_sample()[0]
    if summarized:
        piece["summaries"] = {nid: summarize(g) for nid, g in piece["grads"].items()}
        piece["grads"] = {}
    if forget:
        contexts.forget(context_id)
    elif keep:
        hooks.remove_hooks(context_id)
    return piece


@dataclass
class RealRun:
    """What PyTorch's real backward did on every worker of one context (the trace's ``real``
    section as a value): the passes, every node execution observed (``events``, one dict per
    event), ``get_gradients`` by leaf id (the tensors), the workers that did not answer, the
    clock offsets of workers on other hosts, and what PyTorch raised after a hang."""

    passes: Passes
    hang_timeout: float
    events: list[RealEvent] = field(default_factory=list)
    gradients: dict[str, torch.Tensor] = field(default_factory=dict)
    summaries: dict[str, dict[str, Any]] = field(default_factory=dict)   # made on the owners
    unreachable: list[dict[str, str]] = field(default_factory=list)
    offsets: dict[str, tuple[int, int]] = field(default_factory=dict)
    interop_threads: int = 1
    measured: bool = True
    injected: Mapping[str, Any] | None = None
    after_hang: str | None = None

    @property
    def outcome(self) -> Outcome:
        return self.passes.outcome

    def _summaries(self) -> dict[str, dict[str, Any]]:
        """Every gradient's summary by leaf id: those made here and those of the owners."""
        out = {nid: summarize(g) for nid, g in self.gradients.items()}
        out.update(self.summaries)
        return dict(sorted(out.items()))

    def to_json(self) -> dict[str, Any]:
        """The ``real`` section (``docs/trace-format.md``)."""
        p = self.passes
        real: dict[str, Any] = {
            "outcome": p.outcome, "error": p.error, "passes_run": len(p.windows),
            "pass_seconds": [(e - s) / 1e9 for s, e in p.windows],
            "pass_start_us": [round((s - p.t0) / 1000.0, 3) for s, _e in p.windows],
            "interop_threads": self.interop_threads, "events": [e.to_json() for e in self.events],
            "gradients": self._summaries(),
            "unreachable": list(self.unreachable), "hang_timeout_s": self.hang_timeout,
            "clock": {"source": "CLOCK_MONOTONIC",
                      "offsets_us": {w: round(o / 1000.0, 3) for w, (o, _r) in
                                     sorted(self.offsets.items())},
                      "rtt_us": {w: round(r / 1000.0, 3) for w, (_o, r) in
                                 sorted(self.offsets.items())}}}
        if self.measured:
            real["durations"] = "measured"
        if self.injected:
            real["injected"] = dict(self.injected)
        if self.after_hang is not None:
            real["after_hang"] = self.after_hang
        return real


def collect(context_id: int, workers: Sequence[str], me: str, passes: Passes,
            hang_timeout: float, sends: set[str], *, earlier: Sequence[RealEvent] = (),
            forget: bool = False, keep: bool = False,
            call: Callable[..., dict[str, Any]] = on_all, summarized: bool = False) -> RealRun:
    """Fetch every worker's events and gradients (``fetch_piece``, through ``call``, by default
    ``on_all``) after ``passes`` ran, and make the ``RealRun``. ``earlier``: events of passes
    collected before (a traced context's later pass); ``sends``: the send nodes' ids (a send
    starts a new call on its thread). After a hang no gradients are fetched and no clock
    offsets measured. ``summarized``: the workers send their gradients' summaries
    (``RealRun.summaries``), not the tensors, for a caller that only writes the summaries."""
    hung = passes.outcome == "hang"
    got = call(workers, me, fetch_piece, context_id, not hung, forget and not hung, keep,
               summarized, timeout=limits.COLLECT_TIMEOUT)
    boot = hooks.clock_sample()[0]
    away = [w for w in workers if isinstance(got.get(w), dict) and got[w].get("boot") != boot]
    offsets = clock_offsets([me, *away], me, got) if away and not hung else {}
    run = RealRun(passes=passes, hang_timeout=hang_timeout, offsets=offsets,
                  interop_threads=torch.get_num_interop_threads())
    events = list(earlier)
    for w in workers:
        piece = got.get(w)
        if not isinstance(piece, dict):
            why = first_line(piece) if piece is not None else "no answer"
            run.unreachable.append({"worker": w, "error": why})
            continue
        run.gradients.update(piece["grads"])
        run.summaries.update(piece.get("summaries") or {})
        events.extend(pair_events(w, piece["events"], passes.windows, passes.t0, sends,
                                  offsets.get(w, (0, 0))[0]))
    events.sort(key=lambda e: (e.t_us or 0.0, e.worker))
    run.events = events
    return run


def clock_offsets(workers: Sequence[str], me: str,
                  got: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """``{worker: (offset ns, round trip ns)}`` for workers on another host than ``me``.

    Workers on one host (one boot id) share ``CLOCK_MONOTONIC`` and need no offset. For the
    others, the best of a few RPC round trips (NTP's estimate): the remote clock read halfway,
    ``offset = remote - (sent + answered) / 2``, correct to half the round trip.
    """
    mine, _ = hooks.clock_sample()

    def measure() -> dict[str, tuple[int, int]]:
        out: dict[str, tuple[int, int]] = {}
        for w in workers:
            if w == me or isinstance(got.get(w), BaseException) or got.get(w) is None:
                continue
            best: tuple[int, int] | None = None
            for _ in range(5):
                sent = time.monotonic_ns()
                boot, remote = rpc.rpc_sync(w, hooks.clock_sample, timeout=10.0)
                answered = time.monotonic_ns()
                if boot == mine and mine:
                    break
                sample = (remote - (sent + answered) // 2, answered - sent)
                if best is None or sample[1] < best[1]:
                    best = sample
            if best is not None:
                out[w] = best
        return out
    try:
        return dict(side(measure))
    except Exception:  # noqa: BLE001 - a worker stopped answering: no offsets
        return {}


def pair_events(worker: str, raw: list[list[Any]], windows: Sequence[tuple[int, int]],
                t0: int, sends: set[str], offset: int = 0) -> list[RealEvent]:
    """One event per node execution, with its start and its duration measured from the
    post-hook. Without a post-hook time (a node that raised, or an old worker), the duration is
    estimated as the time until the next node started on the same thread in the same call (a
    send always starts a new call); ``None`` for the last node of a call. ``offset`` (ns) is
    the worker's clock minus the initiator's (0 on one host)."""
    out: list[RealEvent] = []
    last_on: dict[str, RealEvent] = {}
    for item in raw:
        nid, thread, t_ns, shapes = item[:4]
        end_ns = item[4] if len(item) > 4 else None
        t_ns -= offset
        pidx = 0
        for i, (s, _e) in enumerate(windows):
            if t_ns >= s:
                pidx = i
        t_us = round((t_ns - t0) / 1000.0, 3)
        ev = RealEvent(pass_index=pidx, worker=worker, node=nid, t_us=t_us,
                       dur_us=None if end_ns is None else round((end_ns - offset - t_ns) / 1000.0,
                                                                3),
                       thread=thread, grad_shapes=shapes)
        prev = last_on.get(thread)
        if prev is not None and prev.dur_us is None and nid not in sends \
                and prev.pass_index == pidx:
            prev.dur_us = max(t_us - (prev.t_us or 0.0), 0.0)
        last_on[thread] = ev
        out.append(ev)
    return out
