"""Where a distributed backward spends its time: timelines, the critical path and waiting.

A backward pass on RPC workers is a set of node executions, one thread after the other on each
worker, joined by gradient messages: a ``RecvRpcBackward`` on one worker sends, the paired
``SendRpcBackward`` on the receiving worker starts a new call when the message is there. This
module reads such a timeline (measured: ``trace.real.events``; or simulated: ``whatif``) and says

* the **critical path**: the chain of executions and messages that decides the wall time, walked
  backwards from the last execution. Each execution waited either for the previous one on its
  thread (the worker was busy) or, when it starts a call, for the message that launched the call;
  the later of the two is the one it waited for. Its length is the pass's wall time, split into
  start-up (the initiator computes dependencies), compute per worker, engine overhead between
  nodes, message latency and the end (acknowledgements until ``backward()`` returns);
* per worker: **compute** (node executions), **engine** (between two nodes of one call),
  **waiting** for a gradient message (before a call that a message launches), **start-up**
  (the initiator, before its first node) and **done** (after its last node: nothing left).

Measured arrival times are not observable: a message's arrival is seen as the start of the call
it launches, which is later when the receiver was busy. A call waited for its message when the
message, sent at the end of its ``RecvRpcBackward`` plus the typical message latency (the median
over messages whose receiver was idle when they were sent), could not have been there before the
receiver's previous node ended. Simulated timelines know the arrival times and use them.

Pure: no torch. Traces without post-hook times (older ones) give estimated durations: a node
lasts until the next node starts on its thread in the same call.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from distviz.trace import Node, NodeKind, Trace, message_label
from distviz.trace.sections import Real
from distviz.words import plural

__all__ = ["Execution", "TimedMessage", "PassTimeline", "Segment", "CriticalPath", "WorkerTime",
           "PassTiming", "Timing", "analyze", "analyze_pass", "measured_timelines",
           "message_bytes", "gradient_dtype_bytes", "typical_latency", "call_waits_for_message",
           "fmt_us"]

DTYPE_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "complex64": 8,
               "complex128": 16, "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1,
               "bool": 1}


@dataclass(frozen=True, slots=True)
class Execution:
    """One node execution: ``start_us``..``end_us`` since the first pass started."""

    node: str
    worker: str
    kind: NodeKind            # op, send, recv, accumulate_grad
    thread: str
    start_us: float
    end_us: float
    call_start: bool = False  # the first node of a call (a message's send, or the GraphRoot's)

    @property
    def dur_us(self) -> float:
        return self.end_us - self.start_us


@dataclass(frozen=True, slots=True)
class TimedMessage:
    """One gradient message: sent when ``recv_node`` (on ``sender``) ends, its call starts on
    ``receiver`` with ``send_node``. ``arrived_us`` is known only in simulations."""

    msg_id: int
    sender: str
    receiver: str
    recv_node: str
    send_node: str
    sent_us: float
    started_us: float
    bytes: int = 0
    arrived_us: float | None = None

    @property
    def label(self) -> str:
        return message_label(self.msg_id)


@dataclass(frozen=True, slots=True)
class PassTimeline:
    """One backward pass as executions per worker (in start order per thread) and messages."""

    pass_index: int
    start_us: float
    end_us: float
    initiator: str
    workers: tuple[str, ...]
    executions: Mapping[str, Sequence[Execution]]
    messages: Sequence[TimedMessage]
    source: str = "measured"   # measured, estimated (no post-hook times) or simulated

    @property
    def wall_us(self) -> float:
        return self.end_us - self.start_us


#: what a piece of the critical path is (``Segment.kind``)
SegmentKind = Literal["startup", "compute", "engine", "message", "end"]


@dataclass(frozen=True, slots=True)
class Segment:
    """One piece of the critical path: ``kind`` is ``startup``, ``compute``, ``engine``,
    ``message`` or ``end``; ``node`` for compute, ``message`` (its label) for message."""

    kind: SegmentKind
    worker: str | None
    start_us: float
    end_us: float
    node: str | None = None
    message: str | None = None
    msg_id: int | None = None

    @property
    def dur_us(self) -> float:
        return self.end_us - self.start_us


@dataclass(frozen=True, slots=True)
class CriticalPath:
    """The chain that decides a pass's wall time, in time order; lengths in µs."""

    segments: tuple[Segment, ...]

    @property
    def length_us(self) -> float:
        return sum(s.dur_us for s in self.segments)

    def total(self, kind: str) -> float:
        """The time the path spends in segments of ``kind``."""
        return sum(s.dur_us for s in self.segments if s.kind == kind)

    def compute_by_worker(self) -> dict[str, float]:
        """Compute time on the path per worker, largest first."""
        out: dict[str, float] = {}
        for s in self.segments:
            if s.kind == "compute" and s.worker is not None:
                out[s.worker] = out.get(s.worker, 0.0) + s.dur_us
        return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))

    @property
    def nodes(self) -> list[str]:
        return [s.node for s in self.segments if s.kind == "compute" and s.node]

    @property
    def messages(self) -> list[str]:
        return [s.message for s in self.segments if s.kind == "message" and s.message]

    @property
    def message_ids(self) -> list[int]:
        return [s.msg_id for s in self.segments if s.kind == "message" and s.msg_id is not None]

    def to_json(self) -> dict[str, Any]:
        return {"length_us": _r(self.length_us), "startup_us": _r(self.total("startup")),
                "compute_us": {w: _r(v) for w, v in self.compute_by_worker().items()},
                "engine_us": _r(self.total("engine")), "message_us": _r(self.total("message")),
                "end_us": _r(self.total("end")), "nodes": self.nodes, "messages": self.messages,
                "segments": [{"kind": s.kind, "worker": s.worker, "start_us": _r(s.start_us),
                              "dur_us": _r(s.dur_us), "node": s.node, "message": s.message}
                             for s in self.segments]}


@dataclass(frozen=True, slots=True)
class WorkerTime:
    """How one worker spent one pass; the five parts add up to the pass's wall time (with
    one thread per worker)."""

    worker: str
    compute_us: float
    engine_us: float
    waiting_us: float
    startup_us: float
    done_us: float
    executions: int

    @property
    def busy_us(self) -> float:
        return self.compute_us + self.engine_us

    def to_json(self) -> dict[str, Any]:
        return {"worker": self.worker, "compute_us": _r(self.compute_us),
                "engine_us": _r(self.engine_us), "waiting_us": _r(self.waiting_us),
                "startup_us": _r(self.startup_us), "done_us": _r(self.done_us),
                "executions": self.executions}


@dataclass(frozen=True, slots=True)
class PassTiming:
    """The analysis of one pass: its wall time, critical path and per-worker split."""

    pass_index: int
    wall_us: float
    path: CriticalPath
    workers: tuple[WorkerTime, ...]
    messages: int
    source: str

    def to_json(self) -> dict[str, Any]:
        return {"pass": self.pass_index, "wall_us": _r(self.wall_us), "source": self.source,
                "messages": self.messages, "critical_path": self.path.to_json(),
                "workers": [w.to_json() for w in self.workers]}


@dataclass(frozen=True, slots=True)
class Timing:
    """Every analysed pass of one timeline (measured or simulated)."""

    passes: tuple[PassTiming, ...]
    source: str
    note: str = ""
    timelines: tuple[PassTimeline, ...] = field(default=(), repr=False, compare=False)

    @property
    def wall_us(self) -> float:
        return sum(p.wall_us for p in self.passes)

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "wall_us": _r(self.wall_us), "note": self.note,
                "passes": [p.to_json() for p in self.passes]}

    def summary(self) -> list[str]:
        """Two lines for people: the critical path and how each worker spent the time."""
        if not self.passes:
            return [f"time: {self.note or 'no timing'}"]
        path = [p.path for p in self.passes]
        wall = self.wall_us
        compute: dict[str, float] = {}
        for cp in path:
            for w, v in cp.compute_by_worker().items():
                compute[w] = compute.get(w, 0.0) + v
        comp = sum(compute.values())
        top = ", ".join(f"{w} {fmt_us(v)}" for w, v in
                        sorted(compute.items(), key=lambda kv: (-kv[1], kv[0]))[:4])
        hops = sum(len(cp.messages) for cp in path)
        nodes = sum(len(cp.nodes) for cp in path)
        line1 = (f"time: backward {fmt_us(wall)} ({self.source}); critical path "
                 f"{plural(nodes, 'node')}, {plural(hops, 'message')}: compute {fmt_us(comp)}"
                 + (f" ({top})" if top else "")
                 + f", messages {fmt_us(sum(cp.total('message') for cp in path))}"
                 f", engine {fmt_us(sum(cp.total('engine') for cp in path))}"
                 f", start {fmt_us(sum(cp.total('startup') for cp in path))}"
                 f", end {fmt_us(sum(cp.total('end') for cp in path))}")
        per: dict[str, list[float]] = {}
        for p in self.passes:
            for wt in p.workers:
                acc = per.setdefault(wt.worker, [0.0, 0.0, 0.0])
                acc[0] += wt.busy_us
                acc[1] += wt.waiting_us + wt.startup_us
                acc[2] += wt.done_us
        parts = [f"{w} busy {_pct(v[0], wall)} waiting {_pct(v[1], wall)} done {_pct(v[2], wall)}"
                 for w, v in per.items()]
        return [line1, "time per worker: " + " · ".join(parts)]


def fmt_us(us: float) -> str:
    """``850 µs``, ``12.4 ms``, ``1.52 s``."""
    if abs(us) < 1000:
        return f"{us:.0f} µs"
    if abs(us) < 1_000_000:
        return f"{us / 1000:.3g} ms" if abs(us) < 100_000 else f"{us / 1000:.0f} ms"
    return f"{us / 1e6:.3g} s"


def _pct(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.0f}%" if whole > 0 else "-"


def _r(x: float) -> float:
    return round(float(x), 3)


# -- the measured timeline ----------------------------------------------------------------------

def message_bytes(node: Node | None, dtype_bytes: int) -> int:
    """Bytes of the gradients a ``RecvRpcBackward`` sends (its ``input_shapes``)."""
    if node is None or not node.input_shapes:
        return 0
    total = 0
    for shape in node.input_shapes:
        n = 1
        for d in shape:
            n *= int(d)
        total += n
    return total * dtype_bytes


def gradient_dtype_bytes(trace: Trace) -> int:
    """The gradients' element size: the most common leaf dtype (float32 when none is known)."""
    counts: dict[str, int] = {}
    for nd in trace.nodes_of_kind(NodeKind.ACCUMULATE_GRAD):
        if nd.dtype:
            counts[nd.dtype] = counts.get(nd.dtype, 0) + 1
    if not counts:
        return 4
    best = max(sorted(counts), key=lambda d: counts[d])
    return DTYPE_BYTES.get(best, 4)


def _pass_windows(real: Real, n: int) -> list[tuple[float, float]]:
    seconds = [float(s) for s in real.pass_seconds or []]
    starts = [float(s) for s in real.pass_start_us or []]
    out: list[tuple[float, float]] = []
    t = 0.0
    for p in range(min(n, len(seconds))):
        start = starts[p] if p < len(starts) else t   # older traces: passes back to back
        out.append((start, start + seconds[p] * 1e6))
        t = out[-1][1]
    return out


def measured_timelines(trace: Trace) -> list[PassTimeline]:
    """The real backward's passes as timelines (completed passes only; ``[]`` without a real
    run or events)."""
    real = trace.real
    if real is None or not real.events:
        return []
    runs = int(real.passes_run or 0)
    done = runs if real.outcome == "completed" else runs - 1
    windows = _pass_windows(real, done)
    nodes = trace.node_map()
    dtype_bytes = gradient_dtype_bytes(trace)
    measured = real.durations == "measured"
    by_pass: dict[int, list[dict[str, Any]]] = {}
    for ev in real.events:
        if isinstance(ev, dict):
            by_pass.setdefault(int(ev.get("pass") or 0), []).append(ev)
    out: list[PassTimeline] = []
    for p, (start, end) in enumerate(windows):
        evs = sorted(by_pass.get(p, []), key=lambda e: float(e.get("t_us") or 0.0))
        if not evs:
            continue
        out.append(_timeline(trace, p, start, end, evs, nodes, dtype_bytes,
                             "measured" if measured else "estimated"))
    return out


def _timeline(trace: Trace, p: int, start: float, end: float, evs: list[dict[str, Any]],
              nodes: Mapping[str, Node], dtype_bytes: int, source: str) -> PassTimeline:
    per: dict[str, list[Execution]] = {w: [] for w in trace.workers}
    seen_thread: set[tuple[str, str]] = set()
    for ev in evs:
        nid = str(ev.get("node"))
        nd = nodes.get(nid)
        worker = str(ev.get("worker") or (nd.worker if nd else ""))
        kind = nd.kind if nd else NodeKind.OP
        t = float(ev.get("t_us") or 0.0)
        dur = ev.get("dur_us")
        thread = str(ev.get("thread") or "backward")
        first = (worker, thread) not in seen_thread
        seen_thread.add((worker, thread))
        ex = Execution(nid, worker, kind, thread, t, t + float(dur) if dur is not None else t,
                       call_start=kind == NodeKind.SEND or (first and worker == trace.initiator))
        per.setdefault(worker, []).append(ex)
    sends: dict[tuple[str, int], Execution] = {}
    recvs: list[tuple[Execution, Node]] = []
    for exs in per.values():
        for ex in exs:
            nd = nodes.get(ex.node)
            if nd is None or nd.msg_id is None:
                continue
            if ex.kind == NodeKind.SEND:
                sends.setdefault((ex.worker, nd.msg_id), ex)
            elif ex.kind == NodeKind.RECV:
                recvs.append((ex, nd))
    messages: list[TimedMessage] = []
    for ex, nd in recvs:
        assert nd.msg_id is not None
        to = trace.worker_index().get(nd.msg_id >> 48, -1)
        send = sends.get((trace.workers[to], nd.msg_id)) if to >= 0 else None
        if send is None:
            continue
        # the RPC leaves during the recv's apply: its call can start before the recv returns
        sent = min(ex.end_us, send.start_us)
        messages.append(TimedMessage(nd.msg_id, ex.worker, send.worker, ex.node, send.node,
                                     sent, send.start_us, message_bytes(nd, dtype_bytes)))
    messages.sort(key=lambda m: (m.sent_us, m.msg_id))
    return PassTimeline(p, start, end, trace.initiator, tuple(trace.workers),
                        {w: tuple(v) for w, v in per.items()}, tuple(messages), source)


# -- which call waited for its message -------------------------------------------------------------

def _previous(tl: PassTimeline) -> dict[str, Execution | None]:
    """For each execution (by node id), the previous execution on its worker's thread."""
    prev: dict[str, Execution | None] = {}
    for exs in tl.executions.values():
        last: dict[str, Execution] = {}
        for ex in exs:
            prev[ex.node] = last.get(ex.thread)
            last[ex.thread] = ex
    return prev


def typical_latency(tl: PassTimeline) -> float:
    """The median time from a message's send to the start of its call, over messages whose
    receiver was idle when they were sent (all messages when there is none such)."""
    prev = _previous(tl)
    idle = [m.started_us - m.sent_us for m in tl.messages
            if (p := prev.get(m.send_node)) is None or p.end_us <= m.sent_us]
    pool = idle or [m.started_us - m.sent_us for m in tl.messages]
    return max(statistics.median(pool), 0.0) if pool else 0.0


def call_waits_for_message(m: TimedMessage, before: Execution | None, latency: float) -> bool:
    """Did the call ``m`` launched wait for ``m`` (rather than for ``before``, the previous
    node on the receiver's thread)?"""
    if before is None:
        return True
    arrived = m.arrived_us if m.arrived_us is not None else m.sent_us + latency
    return arrived > before.end_us


# -- the analysis ------------------------------------------------------------------------------------

def analyze_pass(tl: PassTimeline) -> PassTiming:
    """The critical path and the per-worker split of one pass timeline."""
    prev = _previous(tl)
    latency = typical_latency(tl)
    by_send = {m.send_node: m for m in tl.messages}
    execs = {ex.node: ex for exs in tl.executions.values() for ex in exs}
    return PassTiming(tl.pass_index, tl.wall_us, _critical_path(tl, prev, by_send, execs, latency),
                      tuple(_worker_time(tl, w) for w in tl.workers), len(tl.messages), tl.source)


def _critical_path(tl: PassTimeline, prev: Mapping[str, Execution | None],
                   by_send: Mapping[str, TimedMessage], execs: Mapping[str, Execution],
                   latency: float) -> CriticalPath:
    """Walk back from the execution that ends last (explicit loop)."""
    if not execs:
        return CriticalPath((Segment("end", None, tl.start_us, tl.end_us),))
    cur = max(execs.values(), key=lambda e: (e.end_us, e.worker == tl.initiator, e.node))
    upto = max(cur.end_us, tl.end_us)
    segs = [Segment("end", tl.initiator, cur.end_us, upto)]
    upto = cur.end_us
    for _ in range(len(execs) + 1):
        # each segment ends where the later one starts (a message can leave before its
        # recv returns), so the path's length is the wall time
        start = min(cur.start_us, upto)
        segs.append(Segment("compute", cur.worker, start, upto, node=cur.node))
        upto = start
        before = prev.get(cur.node)
        m = by_send.get(cur.node) if cur.kind == NodeKind.SEND else None
        if m is not None and m.recv_node in execs and call_waits_for_message(m, before, latency):
            sent = min(m.sent_us, upto)
            segs.append(Segment("message", m.receiver, sent, upto, message=m.label,
                                msg_id=m.msg_id))
            upto = sent
            cur = execs[m.recv_node]
            continue
        if before is None:
            segs.append(Segment("startup", cur.worker, min(tl.start_us, upto), upto))
            break
        gap_start = min(before.end_us, upto)
        segs.append(Segment("engine", cur.worker, gap_start, upto))
        upto = gap_start
        cur = before
    segs.reverse()
    return CriticalPath(tuple(segs))


def _worker_time(tl: PassTimeline, worker: str) -> WorkerTime:
    exs = sorted(tl.executions.get(worker, ()), key=lambda e: (e.start_us, e.end_us))
    wall = tl.wall_us
    if not exs:
        return WorkerTime(worker, 0.0, 0.0, 0.0, 0.0, wall, 0)
    compute = engine = waiting = startup = 0.0
    reach = tl.start_us          # busy (or accounted for) up to here
    first = True
    for ex in exs:
        start = max(ex.start_us, reach)
        gap = start - reach
        if first and worker == tl.initiator:
            startup = gap
        elif ex.call_start or first:
            waiting += gap
        else:
            engine += gap
        first = False
        end = max(ex.end_us, start)
        compute += end - start
        reach = max(reach, end)
    done = max(tl.end_us - reach, 0.0)
    return WorkerTime(worker, compute, engine, waiting, startup, done, len(exs))


def analyze(trace: Trace) -> Timing | None:
    """The measured timing of ``trace``'s real backward; ``None`` without a real run's events."""
    tls = measured_timelines(trace)
    if not tls:
        return None
    source = tls[0].source
    note = "" if source == "measured" else \
        "durations estimated (no post-hook times in this trace: each node lasts until the next starts)"
    return Timing(tuple(analyze_pass(tl) for tl in tls), source, note, tuple(tls))
