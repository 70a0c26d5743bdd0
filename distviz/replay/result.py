"""The result of a replay: ``replay(trace) -> Replay``, and the state after any step.

``replay`` runs the engine to the end, then diagnoses a hang (``hang.diagnose``) on the state it
stopped in. ``Replay.state_at(step)`` re-simulates from the nearest snapshot (a copy of the
engine's state, made lazily every few hundred steps), so stepping in any order is cheap.
"""

from __future__ import annotations

import gc
from bisect import bisect_right
from collections.abc import Sequence
from typing import Any

from distviz.outcome import Mode, Outcome
from distviz.replay.engine import Engine
from distviz.replay.event_log import EventLog
from distviz.replay.graph import MODES, IndexedGraph, initial_dependencies
from distviz.replay.hang import diagnose
from distviz.replay.values import Accumulation, Hang, PassError, ReplayEvent, ReplayState
from distviz.trace import NodeKind, Trace
from distviz.words import plural

__all__ = ["Replay", "observed_arrival", "replay"]

_SNAPSHOT_CELLS = 10_000_000  # snapshot budget: (#snapshots * #nodes) stays about this size


class Replay:
    """The result of replaying a trace: events, per-pass orders, outcome and diagnoses.

    ``outcome`` is ``completed``, ``hang`` or ``error``. ``order[p][worker]`` lists the node ids
    that ran in pass ``p`` on that worker (ops, sends, recvs and AccumulateGrads). ``hang`` is
    the ``Hang`` diagnosis when the replay hung; ``error`` the ``PassError`` when it ended in an
    error. ``accumulated`` maps each leaf that received a gradient to its ``Accumulation`` (all
    passes). ``excluded`` lists, per pass, the send ids SMART mode left out (empty in FAST mode).
    """

    def __init__(self, trace: Trace, mode: Mode, graph: IndexedGraph, engine: Engine,
                 events: Sequence[ReplayEvent], hang: Hang | None) -> None:
        self.trace = trace
        self.arrival = engine.arrival
        self.mode = mode
        self.graph = graph
        self.events = events
        s = engine.s
        self.outcome: Outcome = s.outcome
        self.hang: Hang | None = hang
        self.error: PassError | None = s.error
        ids, workers = graph.ids, graph.workers
        self._orders = s.orders
        self._order: list[dict[str, list[str]]] | None = None
        self.accumulated: dict[str, Accumulation] = {
            ids[i]: Accumulation(count=c, zero=not s.acc_nonzero.get(i, False),
                                 var=trace.nodes[i].var, worker=workers[graph.worker[i]])
            for i, c in s.acc_count.items()}
        self.excluded: list[list[str]] = [[ids[x] for x in ex] for ex in s.excluded]
        self.messages = s.messages_total
        self.passes_run = len(s.orders)
        n = len(events)
        self._interval = max(256, (n * max(graph.n, 1)) // _SNAPSHOT_CELLS + 1)
        self._snapshots: dict[int, Engine] = {}
        self._snap_keys: list[int] = []
        self._cursor: Engine | None = None
        self._deps: dict[int, dict[str, int]] = {}

    @property
    def order(self) -> list[dict[str, list[str]]]:
        """Per pass, per worker: the ids of the nodes that ran, in order (built on first use)."""
        if self._order is None:
            ids, workers = self.graph.ids, self.graph.workers
            self._order = [{workers[w]: [ids[i] for i in per[w]] for w in range(len(workers))}
                           for per in self._orders]
        return self._order

    # -- state at any step -----------------------------------------------------------------------
    def state_at(self, step: int) -> ReplayState:
        """Return the state after ``step`` (``-1``: before the first step).

        Re-simulates from the nearest snapshot (one every ``_interval`` steps, made lazily), so
        any order of calls is cheap. Raises ``IndexError`` when ``step`` is outside
        ``-1 .. len(events) - 1``.
        """
        if not -1 <= step < len(self.events):
            raise IndexError(f"step {step} is outside -1..{len(self.events) - 1}")
        k = bisect_right(self._snap_keys, step) - 1
        base_step = self._snap_keys[k] if k >= 0 else -1
        cur = self._cursor
        if cur is not None and base_step <= cur.s.step <= step:
            sim = cur
        elif k >= 0:
            sim = self._snapshots[base_step].clone()
        else:
            sim = Engine(self.graph, self.mode, emit=False, arrival=self.arrival)
        while sim.s.step < step:
            sim.advance()
            at = sim.s.step
            if at % self._interval == 0 and at not in self._snapshots:
                self._snapshots[at] = sim.clone()
                self._snap_keys.insert(bisect_right(self._snap_keys, at), at)
        self._cursor = sim
        return sim.state(step, self.events[step] if step >= 0 else None)

    def initial_dependencies(self, pass_index: int = 0) -> dict[str, int]:
        """Return ``graph.initial_dependencies`` of pass ``pass_index`` in this replay's mode:
        ``{node id: count}`` (cached)."""
        deps = self._deps.get(pass_index)
        if deps is None:
            deps = self._deps[pass_index] = initial_dependencies(self.graph, pass_index,
                                                                  self.mode)
        return deps

    # -- output ----------------------------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        """Return ``{"workers", "nodes", "messages"}``: trace workers, trace nodes, and gradient
        messages the replay sent (all passes)."""
        return {"workers": len(self.trace.workers), "nodes": len(self.trace.nodes),
                "messages": self.messages}

    def to_json(self) -> dict[str, Any]:
        """Return the replay as plain JSON (``steps`` are the events' ``to_json()``)."""
        out: dict[str, Any] = {
            "outcome": self.outcome, "mode": self.mode,
            "summary": self.summary(),
            "steps": [e.to_json() for e in self.events],
            "hang": self.hang.to_json() if self.hang is not None else None,
            "error": self.error.to_json() if self.error is not None else None,
            "order": self.order,
            "accumulated": {k: a.to_json() for k, a in self.accumulated.items()},
            "counts": self.counts(),
        }
        if self.mode == Mode.SMART:
            out["excluded_sends"] = self.excluded
        return out

    def summary(self) -> str:
        """Return one sentence: the outcome and where it went wrong."""
        n_pass = len(self.trace.passes)
        what = (f"{self.mode.upper()} replay of {plural(n_pass, 'pass', 'passes')} on "
                f"{plural(len(self.trace.workers), 'worker')}")
        if self.outcome == "completed":
            ran = sum(len(v) for per in self._orders for v in per)
            return (f"{what} completes in {plural(len(self.events), 'step')} "
                    f"({plural(ran, 'node run')}, {plural(self.messages, 'gradient message')}).")
        if self.outcome == "hang" and self.hang is not None:
            return f"{what} hangs in pass {self.passes_run}: {self.hang.summary}"
        if self.error is not None:
            return (f"{what} ends in an error in pass {self.error.pass_index + 1} raised on "
                    f"{self.error.worker}: {self.error.message}")
        return f"{what} ends with outcome {self.outcome}."


def replay(trace: Trace, mode: Mode = Mode.FAST,
           arrival: dict[tuple[int, str], list[str]] | None = None,
           graph: IndexedGraph | None = None) -> Replay:
    """Replay every backward pass of ``trace`` in order and return the ``Replay``.

    ``mode`` is ``"fast"`` (PyTorch's algorithm) or ``"smart"`` (only the roots' lineage of
    sends takes part). A hang or an error ends the replay; later passes do not run; a hang is
    diagnosed once the engine has stopped. ``arrival`` optionally fixes, per ``(pass, worker)``,
    the order in which that worker's sends start their calls (the observed arrival order of
    gradient messages; ``observed_arrival`` below); by default messages are received
    in global FIFO order. ``graph``: ``trace``'s indexed graph when another replay of it has
    built it already (the engine only reads it). Raises ``ValueError`` for an unknown mode and
    ``TraceError`` when a root is not on the initiator.
    """
    if mode not in MODES:
        raise ValueError(f"unknown replay mode {mode!r} (expected one of {', '.join(MODES)})")
    mode = Mode(mode)     # a caller's word (``"smart"``) as the enum the engine compares
    # The replay allocates millions of small acyclic objects; the cyclic GC would rescan them
    # all again and again (quadratic in practice), so it is paused while the replay runs.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        g = graph if graph is not None else IndexedGraph(trace)
        arr: dict[tuple[int, int], list[int]] | None = None
        if arrival:
            index = g.index
            widx = {w: k for k, w in enumerate(g.workers)}
            arr = {(p, widx[w]): [index[s] for s in sends if s in index]
                   for (p, w), sends in arrival.items() if w in widx}
        engine = Engine(g, mode, emit=True, arrival=arr)
        events = engine.log
        assert events is not None
        engine.run()
        hang = _diagnose_hang(trace, g, mode, engine, events)
        return Replay(trace, mode, g, engine, events, hang)
    finally:
        if gc_was_enabled:
            gc.enable()


def _diagnose_hang(trace: Trace, g: IndexedGraph, mode: Mode, engine: Engine,
                   events: EventLog) -> Hang | None:
    """Diagnose a hang on the state the engine stopped in; give the hang event its summary."""
    if engine.s.outcome != "hang":
        return None
    hang_event = next(ev for ev in reversed(events) if ev.action == "hang")
    state = engine.state(hang_event.step - 1, None)
    hang = diagnose(trace, state, graph=g, mode=mode, pass_index=engine.s.pass_index)
    events.amend(hang_event.step, (hang_event.detail["waiting_sends"], hang.summary))
    return hang


def observed_arrival(trace: Trace) -> dict[tuple[int, str], list[str]]:
    """Per ``(pass, worker)``, the sends in the order PyTorch ran them (from ``trace.real``):
    with one inter-op thread per worker this is the order their gradient messages arrived."""
    kinds = {n.id: n.kind for n in trace.nodes}
    out: dict[tuple[int, str], list[str]] = {}
    for ev in trace.real.observed() if trace.real is not None else []:
        if kinds.get(ev.node) == NodeKind.SEND:
            out.setdefault((ev.pass_index, ev.worker), []).append(ev.node)
    return out
