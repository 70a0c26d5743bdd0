"""What if the network or a worker were slower? FAST mode as a discrete-event simulation.

``predict(trace, WhatIf(...))`` times the replay's own schedule with what the real run measured
and with the changes asked for (``distviz replay TRACE --what-if latency=5ms,slow=worker1:2x``):

1. **The schedule comes from the replay engine.** Which nodes run in which call on which worker
   follows only from the order in which each worker's calls start (the arrival order of its
   gradient messages): the replay with ``arrival=`` gives the calls. The first order is the
   one PyTorch really ran.
2. **Each call is timed.** A call starts when its message has arrived and the worker's thread
   is free (plus the measured switch between calls); its nodes run one after the other, each
   for its measured duration (times ``slow`` on its worker), with the measured engine gap
   between two nodes. A ``RecvRpcBackward``'s message leaves where it left in the real run
   (during the recv) and arrives after its measured latency, plus ``latency`` and its bytes
   (from the gradient shapes) over ``bandwidth``.
3. **The order is checked.** A worker takes the earliest-arrived message when it is free
   (messages that both arrived while it was busy keep the order they had). When the timed
   schedule implies another arrival order, the replay runs again with it, until the order holds
   (at most ``MAX_ROUNDS`` rounds).
4. **The end.** A worker's first message is acknowledged when it is done and its own messages
   were acknowledged, later messages on arrival; ``backward()`` returns when the initiator is
   done and acknowledged. Acknowledgements take the typical message latency (plus ``latency``);
   the time from the last acknowledgement to ``backward()`` returning is not observable and is
   kept as measured (``end``).

Without changes the simulation reproduces every measured node time: messages whose call
waited for them keep their measured latency, calls that waited for their worker keep their
measured switch. Assumes one inter-op thread per worker (as ``distviz run`` uses by default).
Pure: no torch.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from distviz.errors import UsageError
from distviz.replay.changes import WhatIf
from distviz.replay.timing import (
    Execution,
    Message,
    PassTimeline,
    PassTiming,
    Timing,
    analyze_pass,
    call_waits_for_message,
    fmt_us,
    measured_timelines,
    typical_latency,
)
from distviz.trace import Trace

__all__ = ["Call", "PassPrediction", "Prediction", "predict", "time_report", "MAX_ROUNDS"]

MAX_ROUNDS = 8

# -- the schedule from the replay engine --------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Call:
    """One call on one worker: started by the message for ``trigger`` (a send's node id) or by
    the GraphRoot (``None``); the nodes it runs, in order."""

    trigger: str | None
    nodes: tuple[str, ...]


Arrival = dict[tuple[int, str], list[str]]


def _calls(rp: Any, pass_index: int) -> dict[str, list[Call]]:
    """Each worker's calls in one pass of a replay, from its ``call_start`` and ``execute`` /
    ``accumulate`` events."""
    trig: dict[int, tuple[str, str | None]] = {}
    runs: dict[int, list[str]] = {}
    for ev in rp.events:
        if ev.pass_index != pass_index or ev.call is None:
            continue
        if ev.action == "call_start":
            from_message = ev.message is not None
            trig[ev.call] = (str(ev.worker), ev.node if from_message else None)
            runs[ev.call] = []
        elif ev.action in ("execute", "accumulate") and ev.node and ev.call in runs:
            runs[ev.call].append(ev.node)
    out: dict[str, list[Call]] = {}
    for call in sorted(trig):
        worker, trigger = trig[call]
        out.setdefault(worker, []).append(Call(trigger, tuple(runs[call])))
    return out


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
    message: dict[str, Message] = field(default_factory=dict)   # recv -> its message
    lat_typ: float = 0.0
    startup: float = 0.0
    ack: float = 0.0         # an acknowledgement's latency
    end: float = 0.0         # from the last acknowledgement to backward() returning


def _median(xs: Sequence[float], default: float) -> float:
    return statistics.median(xs) if xs else default


def _model(tl: PassTimeline) -> _Model:
    m = _Model(tl, lat_typ=typical_latency(tl))
    by_send = {msg.send_node: msg for msg in tl.messages}
    m.message = {msg.recv_node: msg for msg in tl.messages}
    switches: dict[str, list[tuple[Execution, Execution | None, Message]]] = {}
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
            msg = by_send.get(ex.node) if ex.kind == "send" else None
            if msg is not None:
                switches.setdefault(w, []).append((ex, before, msg))
            if ex.kind == "recv" and ex.node in m.message:
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
        waited_until = tl.start_us   # the latest start of a call that waited for its message
        for ex, before, msg in items:
            most = ex.start_us - msg.sent_us
            if call_waits_for_message(msg, before, m.lat_typ):
                m.latency[ex.node] = most
                if before is not None:
                    m.switch[ex.node] = min(m.switch_typ[w], ex.start_us - before.end_us)
                waited_until = ex.start_us
            else:
                assert before is not None
                m.switch[ex.node] = ex.start_us - before.end_us
                least = waited_until - msg.sent_us   # it arrived after earlier waited-for ones
                m.latency[ex.node] = min(max(m.lat_typ, least), most)
    return m


# -- the simulation ----------------------------------------------------------------------------

@dataclass
class _Run:
    """One timed schedule of one pass."""

    execs: dict[str, list[Execution]]
    messages: list[Message]
    arrival: dict[str, float]              # send -> arrival time of its message
    order: dict[str, list[Call]]           # per worker, the calls in the order they ran
    call_end: dict[tuple[str, str | None], float]
    end_us: float = 0.0


def _simulate(m: _Model, calls: Mapping[str, Sequence[Call]], wi: WhatIf,
              start_us: float, kinds: Mapping[str, str]) -> _Run:
    """Time ``calls`` (each worker's calls in order; a call whose message cannot have been sent
    yet is overtaken by a later one whose message has been)."""
    order = {w: list(cs) for w, cs in calls.items()}
    run = _Run({w: [] for w in m.tl.workers}, [], {}, {w: [] for w in order}, {})
    free: dict[str, float | None] = {w: None for w in order}
    bits = wi.bandwidth_bits
    while any(order.values()):
        best: tuple[float, str] | None = None
        for w, pending in order.items():
            t = _ready(m, w, pending[0], free[w], run.arrival, start_us) if pending else None
            if t is not None and (best is None or (t, w) < best):
                best = (t, w)
        if best is None:
            _overtake(order, run.arrival)
            continue
        t, w = best
        call = order[w].pop(0)
        run.order[w].append(call)
        f = wi.factor(w)
        for k, node in enumerate(call.nodes):
            kind = kinds.get(node, "op")
            extra = wi.recv_us if kind == "recv" else 0.0
            dur = extra + f * m.compute.get(node, m.compute_typ.get(w, 0.0))
            run.execs[w].append(Execution(node, w, kind, "simulated", t, t + dur, k == 0))
            msg = m.message.get(node) if kind == "recv" else None
            if msg is not None:
                # a slower worker's extra time comes after the node's work (as
                # --inject-delay does): the message leaves as measured
                sent = t + extra + m.depart.get(node, 0.0)
                wire = m.latency.get(msg.send_node, m.lat_typ) + wi.latency_us
                if bits:
                    wire += msg.bytes * 8.0 / bits * 1e6
                run.arrival[msg.send_node] = sent + wire
                run.messages.append(Message(msg.msg_id, msg.sender, msg.receiver, node,
                                            msg.send_node, sent, 0.0, msg.bytes, sent + wire))
            t += dur
            if k + 1 < len(call.nodes):
                t += m.gap_after.get(node, m.engine_typ.get(w, 0.0))
        free[w] = t
        run.call_end[(w, call.trigger)] = t
    starts = {ex.node: ex.start_us for exs in run.execs.values() for ex in exs}
    run.messages = [Message(x.msg_id, x.sender, x.receiver, x.recv_node, x.send_node, x.sent_us,
                            starts.get(x.send_node, x.arrived_us or 0.0), x.bytes, x.arrived_us)
                    for x in run.messages]
    return run


def _ready(m: _Model, w: str, call: Call, free: float | None, arrival: Mapping[str, float],
           start_us: float) -> float | None:
    """When ``call`` can start on ``w``; ``None`` while its message has not been sent."""
    if call.trigger is None:
        t = start_us + m.startup
    elif call.trigger in arrival:
        t = arrival[call.trigger]
    else:
        return None
    if free is not None:
        switch = m.switch.get(call.trigger, m.switch_typ.get(w, m.engine_typ.get(w, 0.0))) \
            if call.trigger is not None else 0.0
        t = max(t, free + switch)
    return t


def _overtake(order: dict[str, list[Call]], arrival: Mapping[str, float]) -> None:
    """No worker's next call can start: move the earliest-arriving sent message's call first."""
    best: tuple[float, str, int] | None = None
    for w, pending in order.items():
        for k, call in enumerate(pending):
            if call.trigger is not None and call.trigger in arrival:
                cand = (arrival[call.trigger], w, k)
                if best is None or cand < best:
                    best = cand
    if best is None:
        raise ValueError("the schedule cannot go on: no call's message can be sent")
    _t, w, k = best
    order[w].insert(0, order[w].pop(k))


def _ack_end(m: _Model, run: _Run, ack: float) -> float:
    """When the initiator is done and has every acknowledgement (each takes ``ack`` µs)."""
    done = {w: max((ex.end_us for ex in exs), default=0.0) for w, exs in run.execs.items()}
    first: dict[str, str] = {}                 # worker -> the send of its first call
    for w, cs in run.order.items():
        if cs and cs[0].trigger is not None:
            first[w] = cs[0].trigger
    sent_by: dict[str, list[Message]] = {}
    for msg in run.messages:
        sent_by.setdefault(msg.sender, []).append(msg)
    acked: dict[str, float] = {}               # send -> when its sender has the answer
    ready: dict[str, float] = {}               # worker -> done and all its messages answered
    later = sorted(first, key=lambda w: -run.arrival.get(first[w], 0.0))
    for w in [*later, m.tl.initiator]:
        t = done.get(w, 0.0)
        for msg in sent_by.get(w, []):
            arrived = msg.arrived_us or 0.0
            if first.get(msg.receiver) == msg.send_node:
                t = max(t, ready.get(msg.receiver, arrived) + ack)
            else:
                t = max(t, arrived + ack)
            acked[msg.send_node] = t
        ready[w] = t
    return ready[m.tl.initiator]


def _arrival_order(run: _Run, m: _Model) -> dict[str, list[str]]:
    """Each worker's calls in the order a real worker would take them: when free, the first
    (in the current order) of the messages already there, else the next one to arrive."""
    out: dict[str, list[str]] = {}
    for w, cs in run.order.items():
        pending = [c for c in cs if c.trigger is not None]
        root = [c for c in cs if c.trigger is None]
        free = run.call_end.get((w, None)) if root else None
        picked: list[str] = []
        while pending:
            arrived = [c for c in pending if free is not None
                       and run.arrival.get(c.trigger or "", 0.0) <= free]
            call = arrived[0] if arrived else min(
                pending, key=lambda c: run.arrival.get(c.trigger or "", 0.0))
            pending.remove(call)
            assert call.trigger is not None
            picked.append(call.trigger)
            free = run.call_end.get((w, call.trigger))
            if free is not None:
                free += m.switch_typ.get(w, 0.0)
        out[w] = picked
    return out


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
    rounds: int
    settled: bool          # the arrival order the schedule implies is the one it ran
    reordered: bool        # some worker takes its messages in another order than measured

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
        if not self.settled:
            head += f"; the arrival order did not settle in {self.rounds} rounds"
        return [head, *self.timing.summary()[:1]]

    def to_json(self) -> dict[str, Any]:
        return {"what_if": self.what_if.to_json(), "description": self.what_if.describe(),
                "measured_us": round(self.measured_us, 3),
                "predicted_us": round(self.predicted_us, 3), "rounds": self.rounds,
                "settled": self.settled, "reordered": self.reordered,
                "timing": self.timing.to_json()}


ReplayFn = Callable[[Trace, Arrival | None], Any]


def _default_replay(trace: Trace, arrival: Arrival | None) -> Any:
    from distviz.replay.fast import replay
    return replay(trace, "fast", arrival=arrival)


def predict(trace: Trace, what_if: WhatIf | None = None,
            replay_fn: ReplayFn | None = None) -> Prediction:
    """Simulate ``trace``'s completed passes with ``what_if``; see the module docstring.

    Raises ``UsageError`` when the trace has no completed real run with events to measure, or
    when the replay does not complete.
    """
    wi = what_if or WhatIf()
    run_replay = replay_fn or _default_replay
    tls = measured_timelines(trace)
    if not tls:
        outcome = (trace.real or {}).get("outcome", "none")
        raise UsageError(f"--what-if needs a completed real backward with its events; this "
                         f"trace's real backward: {outcome}")
    kinds = {n.id: n.kind for n in trace.nodes}
    models = [_model(tl) for tl in tls]
    from distviz.replay.fast import observed_arrival
    arrival: Arrival = observed_arrival(trace)
    measured_order = {k: list(v) for k, v in arrival.items()}
    runs: list[_Run] = []
    settled = False
    rounds = 0
    while rounds < MAX_ROUNDS and not settled:
        rounds += 1
        rp = run_replay(trace, arrival)
        if rp.outcome != "completed":
            raise UsageError(f"--what-if: the replay does not complete ({rp.outcome})")
        runs = []
        new: Arrival = {}
        for m in models:
            p = m.tl.pass_index
            run = _simulate(m, _calls(rp, p), wi, m.tl.start_us, kinds)
            runs.append(run)
            for w, sends in _arrival_order(run, m).items():
                if sends:
                    new[(p, w)] = sends
        settled = all(new.get(k, []) == arrival.get(k, []) for k in set(new) | set(arrival))
        arrival = new
    base_rp = run_replay(trace, measured_order)
    passes: list[PassPrediction] = []
    shift = 0.0            # a longer pass delays the next one
    for m, run in zip(models, runs, strict=True):
        _fit_end(m, _simulate(m, _calls(base_rp, m.tl.pass_index), WhatIf(), m.tl.start_us,
                              kinds))
        if shift:
            run = _simulate(m, _calls(rp, m.tl.pass_index), wi, m.tl.start_us + shift, kinds)
        end = _ack_end(m, run, m.ack + wi.latency_us) + m.end
        tl = PassTimeline(m.tl.pass_index, m.tl.start_us + shift, end, m.tl.initiator,
                          m.tl.workers, {w: tuple(v) for w, v in run.execs.items()},
                          tuple(run.messages), "simulated")
        shift = end - m.tl.end_us
        passes.append(PassPrediction(m.tl.pass_index, m.tl.wall_us, tl.wall_us,
                                     analyze_pass(tl), tl))
    reordered = any(arrival.get(k, []) != v for k, v in measured_order.items())
    return Prediction(wi, tuple(passes), rounds, settled, reordered)


def time_report(trace: Trace, what_if: str | None = None) -> tuple[list[str], dict[str, Any]]:
    """Where the real backward spent its time, or with ``what_if`` (``--what-if`` text) the
    prediction: lines for people and the ``--json`` report's ``timing`` (and ``what_if``)
    keys (``timing`` is ``None`` without a measured real run). Raises ``UsageError`` for a bad
    ``what_if`` or a trace without a completed real run."""
    from distviz.replay.changes import parse_what_if
    from distviz.replay.timing import analyze
    timing = analyze(trace)
    lines = timing.summary() if timing else []
    out: dict[str, Any] = {"timing": timing.to_json() if timing else None}
    if what_if is not None:
        pred = predict(trace, parse_what_if(what_if, trace.workers))
        lines, out["what_if"] = pred.summary(), pred.to_json()
    return lines, out
