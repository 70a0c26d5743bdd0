"""What if the network or a worker were slower? FAST mode as a discrete-event simulation.

``predict(trace, WhatIf(...))`` runs the replay engine on the trace with simulated time, using
what the real run measured and the changes asked for (``distviz replay TRACE --what-if
latency=5ms,slow=worker1:2x``):

1. **The engine's rules, in simulated time.** The replay engine runs one call at a time: the
   GraphRoot's, then one per gradient message it takes from its queue. Whenever it takes the
   next message, the simulation picks the one whose call starts first in simulated time: each
   worker takes its messages in the order they arrive (a queue; messages that arrive together
   keep the order PyTorch ran them in), once its previous call is over. Dependencies, ready
   queues and which nodes each call runs are the engine's own.
2. **Each call is timed.** A call starts when its message has arrived and the worker is free
   (plus the measured switch between calls); its nodes run one after the other, each for its
   measured duration (times ``slow`` for its worker), with the measured engine gap between two
   nodes. A ``RecvRpcBackward``'s message leaves where it left in the real run (during the
   recv) and arrives after its measured latency, plus ``latency`` and its bytes (from the
   gradient shapes) over ``bandwidth``.
3. **The end.** A worker's first message is acknowledged when it is done and its own messages
   were acknowledged, later messages on arrival; ``backward()`` returns when the initiator is
   done and acknowledged. Acknowledgements take the typical message latency (plus
   ``latency``); the time from the last acknowledgement to ``backward()`` returning is not
   observable and is kept as measured.

Without changes the simulation reproduces every measured node start: a message whose call
waited for it keeps its measured latency; a call that waited for its worker keeps its measured
switch, and its message is taken to have arrived (on the typical latency) no later than the
call started and no earlier than the messages that call ran after. The simulation runs one call
at a time per worker (one inter-op thread, as ``distviz run`` uses by default). Pure: no torch.
"""

from __future__ import annotations

import gc
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from distviz.analyses.changes import WhatIf
from distviz.analyses.timing import (
    Execution,
    PassTimeline,
    PassTiming,
    TimedMessage,
    Timing,
    analyze_pass,
    call_waits_for_message,
    fmt_us,
    gradient_dtype_bytes,
    measured_timelines,
    message_bytes,
    typical_latency,
)
from distviz.errors import UsageError
from distviz.outcome import Mode
from distviz.replay.values import Message
from distviz.trace import NodeKind, Trace

__all__ = ["PassPrediction", "Prediction", "predict", "time_report"]


# -- what the real run measured ----------------------------------------------------------------

@dataclass
class _Model:
    """The measured pieces of one pass (µs)."""

    tl: PassTimeline
    compute: dict[str, float] = field(default_factory=dict)     # node -> duration
    depart: dict[str, float] = field(default_factory=dict)      # recv -> message leaves after
    gap_after: dict[str, float] = field(default_factory=dict)   # node -> engine gap after it
    engine_typ: dict[str, float] = field(default_factory=dict)  # worker -> median engine gap
    compute_typ: dict[str, float] = field(default_factory=dict)
    switch: dict[str, float] = field(default_factory=dict)      # send -> gap before its call
    switch_typ: dict[str, float] = field(default_factory=dict)
    latency: dict[str, float] = field(default_factory=dict)     # send -> its message's latency
    bytes: dict[str, int] = field(default_factory=dict)         # recv -> its gradients' bytes
    message: dict[str, TimedMessage] = field(default_factory=dict)   # recv -> its message
    lat_typ: float = 0.0
    startup: float = 0.0
    ack: float = 0.0         # an acknowledgement's latency
    end: float = 0.0         # from the last acknowledgement to backward() returning


def _median(xs: Sequence[float], default: float) -> float:
    return statistics.median(xs) if xs else default


def _model(tl: PassTimeline, trace: Trace) -> _Model:
    """What the real run measured in one pass (``tl``); bytes of every recv from ``trace``."""
    m = _Model(tl, lat_typ=typical_latency(tl))
    dtype_bytes = gradient_dtype_bytes(trace)
    m.bytes = {n.id: message_bytes(n, dtype_bytes) for n in trace.nodes if n.kind == NodeKind.RECV}
    by_send = {msg.send_node: msg for msg in tl.messages}
    m.message = {msg.recv_node: msg for msg in tl.messages}
    switches: dict[str, list[tuple[Execution, Execution | None, TimedMessage]]] = {}
    for w, exs in tl.executions.items():
        last: dict[str, Execution] = {}
        gaps: list[float] = []
        for ex in exs:
            m.compute[ex.node] = ex.dur_us
            before = last.get(ex.thread)
            last[ex.thread] = ex
            if before is not None and not ex.call_start:
                m.gap_after[before.node] = max(ex.start_us - before.end_us, 0.0)
                gaps.append(m.gap_after[before.node])
            msg = by_send.get(ex.node) if ex.kind == NodeKind.SEND else None
            if msg is not None:
                switches.setdefault(w, []).append((ex, before, msg))
            if ex.kind == NodeKind.RECV and ex.node in m.message:
                m.depart[ex.node] = max(m.message[ex.node].sent_us - ex.start_us, 0.0)
        m.engine_typ[w] = _median(gaps, 0.0)
        m.compute_typ[w] = _median([ex.dur_us for ex in exs], 0.0)
        if w == tl.initiator and exs:
            m.startup = exs[0].start_us - tl.start_us
    for w, items in switches.items():
        bound = [(ex, before) for ex, before, msg in items
                 if before is not None and not call_waits_for_message(msg, before, m.lat_typ)]
        m.switch_typ[w] = _median([ex.start_us - b.end_us for ex, b in bound if b is not None],
                                  m.engine_typ.get(w, 0.0))
        arrived = tl.start_us    # arrivals on one worker follow the order its calls ran
        for ex, before, msg in items:
            if call_waits_for_message(msg, before, m.lat_typ):
                arrived = ex.start_us
                if before is not None:
                    m.switch[ex.node] = min(m.switch_typ[w], ex.start_us - before.end_us)
            else:
                assert before is not None
                m.switch[ex.node] = ex.start_us - before.end_us
                arrived = min(max(msg.sent_us + m.lat_typ, arrived), ex.start_us)
            m.latency[ex.node] = arrived - msg.sent_us
    return m


# -- the simulation: the replay engine, fed messages in simulated time order ------------------

@dataclass
class _Run:
    """One pass as simulated: executions per worker, messages, each worker's calls."""

    start_us: float
    execs: dict[str, list[Execution]]
    messages: list[TimedMessage] = field(default_factory=list)
    arrival: dict[str, float] = field(default_factory=dict)    # send -> its message arrives
    order: dict[str, list[str]] = field(default_factory=dict)  # worker -> sends of its calls
    end_us: float = 0.0


class _Clock:
    """Simulated time for one replay: it reads the engine's events as they come (a call's nodes
    run one after the other on its worker) and picks the message the engine receives next."""

    def __init__(self, trace: Trace, models: Mapping[int, _Model], wi: WhatIf,
                 ranks: Mapping[tuple[int, str], Mapping[str, int]], shift: bool) -> None:
        self.models, self.wi, self.ranks, self.shift = models, wi, ranks, shift
        self.workers = list(trace.workers)
        self.kinds = {n.id: n.kind for n in trace.nodes}
        self.runs: dict[int, _Run] = {}
        self.cur: _Run | None = None
        self.m: _Model | None = None
        self.now: dict[str, float] = {}           # worker -> end of its last node
        self.free: dict[str, float] = {}          # worker -> end of its last call
        self.msg_send: list[str] = []             # message index (this pass) -> its send
        self.msg_to: list[str] = []
        self.starting: float = 0.0                # the start of the call just picked
        self.last: dict[str, str] = {}            # worker -> the last node of its call
        self.recv_start: dict[str, float] = {}

    # -- the engine's events ------------------------------------------------------------------
    def on_event(self, ev: Any) -> None:
        if ev.action == "pass_start":
            self._pass_start(ev.pass_index)
        if self.cur is None or self.m is None or ev.pass_index != self.m.tl.pass_index:
            return
        w = str(ev.worker)
        if ev.action == "call_start":
            trigger = ev.node if ev.message is not None else None
            self.now[w] = self.starting if trigger else self.cur.start_us + self.m.startup
            self.last.pop(w, None)
            if trigger:
                self.cur.order.setdefault(w, []).append(trigger)
        elif ev.action in ("execute", "accumulate") and ev.node:
            self._run_node(w, ev.node)
        elif ev.action == "send_gradient" and ev.message is not None:
            self._sent(w, ev.node, ev.message)
        elif ev.action == "call_end":
            self.free[w] = self.now.get(w, 0.0)
        elif ev.action == "pass_end":
            self._pass_end()

    def _pass_start(self, p: int) -> None:
        m = self.models.get(p)
        self.m, self.cur = m, None
        if m is None:
            return
        start = m.tl.start_us
        prev = self.runs.get(p - 1)
        if self.shift and prev is not None and p - 1 in self.models:
            start = prev.end_us + (m.tl.start_us - self.models[p - 1].tl.end_us)
        self.cur = _Run(start, {w: [] for w in self.workers})
        self.now, self.free, self.last = {}, {}, {}
        self.msg_send, self.msg_to = [], []

    def _run_node(self, w: str, node: str) -> None:
        m, cur = self.m, self.cur
        assert m is not None and cur is not None
        t = self.now.get(w, cur.start_us)
        prev = self.last.get(w)
        if prev is not None:
            t += m.gap_after.get(prev, m.engine_typ.get(w, 0.0))
        kind = self.kinds.get(node, NodeKind.OP)
        extra = self.wi.recv_us if kind == NodeKind.RECV else 0.0
        dur = extra + self.wi.factor(w) * m.compute.get(node, m.compute_typ.get(w, 0.0))
        cur.execs[w].append(Execution(node, w, kind, "simulated", t, t + dur, prev is None))
        if kind == NodeKind.RECV:
            self.recv_start[node] = t
        self.now[w], self.last[w] = t + dur, node

    def _sent(self, w: str, recv: str, message: Any) -> None:
        """A recv's message leaves where it left in the real run (a slower worker's extra time
        comes after the node's work, as ``--inject-delay`` does) and arrives after its measured
        latency, plus the what-if latency and its bytes over the bandwidth."""
        m, cur, wi = self.m, self.cur, self.wi
        assert m is not None and cur is not None
        send, to = _message_ends(message)
        self.msg_send.append(send or "")
        self.msg_to.append(to or "")
        if send is None or to is None:
            return
        sent = self.recv_start.get(recv, 0.0) + wi.recv_us + m.depart.get(recv, 0.0)
        nbytes = m.bytes.get(recv, 0)
        wire = m.latency.get(send, m.lat_typ) + wi.latency_us
        if wi.bandwidth_bits:
            wire += nbytes * 8.0 / wi.bandwidth_bits * 1e6
        cur.arrival[send] = sent + wire
        msg_id = int(getattr(message, "msg_id", 0) if not isinstance(message, dict)
                     else message.get("msg_id", 0))
        cur.messages.append(TimedMessage(msg_id, w, to, recv, send, sent, 0.0, nbytes, sent + wire))

    def _pass_end(self) -> None:
        m, cur = self.m, self.cur
        assert m is not None and cur is not None
        starts = {ex.node: ex.start_us for exs in cur.execs.values() for ex in exs}
        cur.messages = [TimedMessage(x.msg_id, x.sender, x.receiver, x.recv_node, x.send_node,
                                     x.sent_us, starts.get(x.send_node, x.arrived_us or 0.0),
                                     x.bytes, x.arrived_us) for x in cur.messages]
        cur.end_us = _ack_end(m, cur, m.ack + self.wi.latency_us) + m.end
        self.runs[m.tl.pass_index] = cur
        self.cur = None

    # -- which message the engine receives next ---------------------------------------------
    def choose(self, pending: Sequence[int]) -> int:
        """The position in ``pending`` (message indices of this pass) of the message whose call
        starts first. Each worker takes its messages in the order they arrive (a queue; ties in
        the order PyTorch ran them) once its previous call is over."""
        m, cur = self.m, self.cur
        if m is None or cur is None:
            return 0
        p = m.tl.pass_index
        first: dict[str, tuple[float, int, int]] = {}     # worker -> its earliest message
        for k, mi in enumerate(pending):
            send, w = self.msg_send[mi], self.msg_to[mi]
            arrival = cur.arrival.get(send)
            if arrival is None:
                continue
            ranks = self.ranks.get((p, w), {})
            cand = (arrival, ranks.get(send, len(ranks)), k)
            if w not in first or cand < first[w]:
                first[w] = cand
        best: tuple[float, float, int, int] | None = None
        for w, (arrival, rank, k) in first.items():
            start = arrival
            if w in self.free:
                send = self.msg_send[pending[k]]
                switch = m.switch.get(send, m.switch_typ.get(w, m.engine_typ.get(w, 0.0)))
                start = max(arrival, self.free[w] + switch)
            if best is None or (start, arrival, rank, k) < best:
                best = (start, arrival, rank, k)
        if best is None:
            return 0
        self.starting = best[0]
        return best[3]


def _simulate(trace: Trace, models: Mapping[int, _Model], wi: WhatIf,
              ranks: Mapping[tuple[int, str], Mapping[str, int]], shift: bool) -> dict[int, _Run]:
    """Run the replay engine with ``_Clock`` choosing its messages; return the timed passes.
    Raises ``UsageError`` when the replay does not complete."""
    from distviz.replay.engine import Engine
    from distviz.replay.graph import IndexedGraph

    clock = _Clock(trace, models, wi, ranks, shift)

    class TimedEngine(Engine):
        def _next_message(self) -> int:
            fifo = self.p.fifo
            k = clock.choose(list(fifo))
            mi = fifo[k]
            del fifo[k]
            return mi

    gc_was_enabled = gc.isenabled()
    gc.disable()     # millions of small acyclic objects (see result.replay)
    try:
        engine = TimedEngine(IndexedGraph(trace), Mode.FAST, emit=True)
        log = engine.log
        assert log is not None
        while not engine.s.finished:
            engine.advance()
            if len(log) > engine.s.step:
                clock.on_event(log[engine.s.step])
    finally:
        if gc_was_enabled:
            gc.enable()
    if engine.s.outcome != "completed":
        raise UsageError(f"--what-if: the replay of this trace does not complete "
                         f"({engine.s.outcome})")
    return clock.runs


def _message_ends(message: Message) -> tuple[str | None, str | None]:
    """(send node id, receiving worker) of an engine message."""
    return message.send, message.to


def _ack_end(m: _Model, run: _Run, ack: float) -> float:
    """When the initiator is done and has every acknowledgement (each takes ``ack`` µs)."""
    done = {w: max((ex.end_us for ex in exs), default=0.0) for w, exs in run.execs.items()}
    first = {w: order[0] for w, order in run.order.items() if order}   # its first message
    sent_by: dict[str, list[TimedMessage]] = {}
    for msg in run.messages:
        sent_by.setdefault(msg.sender, []).append(msg)
    ready: dict[str, float] = {}               # worker -> done and all its messages answered
    later = sorted(first, key=lambda w: -run.arrival.get(first[w], 0.0))   # last started first
    for w in [*later, m.tl.initiator]:
        t = done.get(w, 0.0)
        for msg in sent_by.get(w, []):
            arrived = msg.arrived_us or 0.0
            if first.get(msg.receiver) == msg.send_node:
                t = max(t, ready.get(msg.receiver, arrived) + ack)
            else:
                t = max(t, arrived + ack)
        ready[w] = t
    return ready[m.tl.initiator]


def _fit_end(m: _Model, base: _Run) -> None:
    """Acknowledgements and the end are not observed: take the typical message latency for an
    acknowledgement, or less when that would end the pass after it really ended (then the end
    is 0); the end is what remains until the measured end. ``base`` is the schedule PyTorch
    ran, timed without changes."""
    ack = m.lat_typ
    if _ack_end(m, base, ack) > m.tl.end_us:
        lo, hi = 0.0, ack
        for _ in range(40):
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if _ack_end(m, base, mid) > m.tl.end_us else (mid, hi)
        ack = lo
    m.ack = ack
    m.end = m.tl.end_us - _ack_end(m, base, ack)


# -- the prediction ----------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class PassPrediction:
    """One pass: measured and predicted wall time (µs) and the predicted timeline's analysis."""

    pass_index: int
    measured_us: float
    predicted_us: float
    timing: PassTiming
    timeline: PassTimeline


@dataclass(frozen=True, slots=True)
class Prediction:
    """The what-if simulation of every completed pass of a trace."""

    what_if: WhatIf
    passes: tuple[PassPrediction, ...]
    reordered: bool        # some worker takes its messages in another order than measured
    note: str = ""

    @property
    def measured_us(self) -> float:
        return sum(p.measured_us for p in self.passes)

    @property
    def predicted_us(self) -> float:
        return sum(p.predicted_us for p in self.passes)

    @property
    def timing(self) -> Timing:
        return Timing(tuple(p.timing for p in self.passes), "simulated", self.what_if.describe(),
                      tuple(p.timeline for p in self.passes))

    def summary(self) -> list[str]:
        """Two or three lines: the prediction against the measured time, then the new path."""
        ratio = self.predicted_us / self.measured_us if self.measured_us else 0.0
        head = (f"what-if ({self.what_if.describe()}): backward {fmt_us(self.predicted_us)} "
                f"predicted, {fmt_us(self.measured_us)} measured ({ratio:.2f}x)")
        if self.reordered:
            head += "; messages reach some worker in another order than measured"
        if self.note:
            head += f" ({self.note})"
        return [head, *self.timing.summary()[:1]]

    def to_json(self) -> dict[str, Any]:
        return {"what_if": self.what_if.to_json(), "description": self.what_if.describe(),
                "measured_us": round(self.measured_us, 3),
                "predicted_us": round(self.predicted_us, 3), "reordered": self.reordered,
                "note": self.note, "timing": self.timing.to_json()}


def predict(trace: Trace, what_if: WhatIf | None = None) -> Prediction:
    """Simulate ``trace``'s completed passes with ``what_if``; see the module docstring.

    Raises ``UsageError`` when the trace has no completed real run with events to measure, or
    when the replay does not complete.
    """
    from distviz.replay.result import observed_arrival

    wi = what_if or WhatIf()
    tls = measured_timelines(trace)
    if not tls:
        outcome = trace.real.outcome if trace.real is not None else "none"
        raise UsageError(f"--what-if needs a completed real backward with its events; this "
                         f"trace's real backward: {outcome}")
    models = {tl.pass_index: _model(tl, trace) for tl in tls}
    observed = observed_arrival(trace)
    ranks = {k: {s: i for i, s in enumerate(v)} for k, v in observed.items()}
    # the schedule PyTorch ran, timed without changes: it fits the unobserved end
    base = _simulate(trace, models, WhatIf(), ranks, shift=False)
    for p, m in models.items():
        _fit_end(m, base[p])
    runs = _simulate(trace, models, wi, ranks, shift=True)
    passes: list[PassPrediction] = []
    for p, m in sorted(models.items()):
        run = runs[p]
        tl = PassTimeline(p, run.start_us, run.end_us, m.tl.initiator, m.tl.workers,
                          {w: tuple(v) for w, v in run.execs.items()}, tuple(run.messages),
                          "simulated")
        passes.append(PassPrediction(p, m.tl.wall_us, tl.wall_us, analyze_pass(tl), tl))
    reordered = any(runs[p].order.get(w, []) != v for (p, w), v in observed.items()
                    if p in runs)
    note = ""
    threads = int(trace.real.interop_threads or 1) if trace.real is not None else 1
    if threads > 1:
        note = (f"the simulation runs one call at a time per worker; this run had {threads} "
                "inter-op threads")
    return Prediction(wi, tuple(passes), reordered, note)


def time_report(trace: Trace, what_if: str | None = None, *,
                timing: Timing | None | Literal["analyze"] = "analyze"
                ) -> tuple[list[str], dict[str, Any]]:
    """Where the real backward spent its time, or with ``what_if`` (``--what-if`` text) the
    prediction: lines for people and the ``--json`` report's ``timing`` (and ``what_if``)
    keys (``timing`` is ``None`` without a measured real run). ``timing``: the analysis when
    it is already made (``distviz.judge.analysis``). Raises ``UsageError`` for a bad
    ``what_if`` or a trace without a completed real run."""
    from distviz.analyses.changes import parse_what_if
    from distviz.analyses.timing import analyze
    if isinstance(timing, str):
        timing = analyze(trace)
    lines = timing.summary() if timing else []
    out: dict[str, Any] = {"timing": timing.to_json() if timing else None}
    if what_if is not None:
        pred = predict(trace, parse_what_if(what_if, trace.workers))
        lines, out["what_if"] = pred.summary(), pred.to_json()
    return lines, out
