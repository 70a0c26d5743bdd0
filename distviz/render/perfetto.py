"""The real backward and the replay as Chrome trace-event JSON (opens in Perfetto and chrome://tracing).

Layout:

* **Real run** (``trace.real``): one process per worker, ``pid = rank + 1``, named
  ``worker1 (rank 1) · real``; one thread track per recorded thread name (more tracks,
  ``<thread> (2)``, only when slices of one thread would overlap without nesting, which the
  format forbids). Each recorded node execution is a complete (``X``) event at its recorded time
  (µs since the backward started, one clock for all workers) with ``cat="real"``.
* **Replay**: one process per worker, ``pid = 1000 + rank``, named ``worker1 (rank 1) ·
  replay``; one thread track per call (``call 3``); replay step *k* starts at ``k * 10`` µs and
  lasts 8 µs (the replay has no clock: only the order is meaningful).
* **Gradient messages** are flow arrows (``s`` on the ``RecvRpcBackward`` slice of the sender,
  ``f`` with ``"bp": "e"`` on the ``SendRpcBackward`` slice of the receiver), in both sets.
* Hangs, errors and crashes in the replay are instant (``i``) events on the worker's process.
* Each replay slice's ``args`` carry the node's ``seq`` (none for AccumulateGrad, which has no
  sequence number) and its initial dependency count in the pass (``deps``:
  ``distviz.replay.graph.initial_dependencies``, the count every view shows); real slices carry
  ``seq`` the same way.
* **Critical path** (with ``timing``, the analysis of the real run): a process of its own,
  ``critical path · real`` (``distviz.render.timing_tracks``), whose one track holds the path's
  segments in time order; the real slices on the path carry ``args.critical_path: true`` and
  the gradient messages on it are flows of category ``real.critical_path``. The metadata's
  ``critical_path`` holds the two summary lines.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from distviz.judge.analysis import Analysis
from distviz.render.timing_tracks import critical_path_events
from distviz.replay.values import ReplayLike
from distviz.trace import Node, NodeKind, Trace, has_seq, message_label, short_name
from distviz.trace.sections import Real

REAL_PID_BASE = 1
REPLAY_PID_BASE = 1000
STEP_US = 10
STEP_DUR_US = 8
MIN_DUR_US = 1.0


def _slice_name(node: Node | None, node_id: str) -> str:
    if node is None:
        return node_id.rsplit("/", 1)[-1]
    if node.kind == NodeKind.ACCUMULATE_GRAD:
        return f"AccumulateGrad({node.var})" if node.var else "AccumulateGrad"
    return short_name(node.name)


def _meta(pid: int, tid: int | None, name: str, value: str | int) -> dict[str, Any]:
    ev: dict[str, Any] = {"ph": "M", "name": name, "pid": pid, "tid": tid if tid is not None else 0,
                          "args": {"name" if isinstance(value, str) else "sort_index": value}}
    return ev


class _Lanes:
    """Assigns slices of one named thread to tracks so that slices on a track nest or are disjoint."""

    def __init__(self) -> None:
        self.stacks: list[list[float]] = []  # per lane: stack of open slice end times

    def place(self, ts: float, end: float) -> int:
        for i, stack in enumerate(self.stacks):
            while stack and stack[-1] <= ts:
                stack.pop()
            if not stack or stack[-1] >= end:
                stack.append(end)
                return i
        self.stacks.append([end])
        return len(self.stacks) - 1


def _round(x: float) -> float | int:
    r = round(float(x), 3)
    return int(r) if r == int(r) else r


def to_perfetto(found: Analysis) -> dict[str, Any]:
    """Return the Chrome trace-event JSON object ``{"traceEvents", "displayTimeUnit", "metadata"}``
    of one run's analysis (``distviz.judge.analysis``: the trace, its replay, the timing).

    See the module docstring for the process/track layout. When ``trace.real`` is ``None`` only
    the replay tracks are written. Timestamps are microseconds; pids and tids are integers. The
    analysis's timing (where the real backward spent its time) adds the critical path. Raises
    nothing for partial data: real events that name unknown nodes are drawn with the id's last
    part as the name.
    """
    trace, replay, timing = found.trace, found.replay, found.timing
    nodes = trace.node_map()
    events: list[dict[str, Any]] = []
    meta: dict[str, Any] = {"generator": "distviz", "context_id": trace.context_id,
                            "workers": list(trace.workers), "replay_step_us": STEP_US}
    flow_id = [0]
    critical: set[tuple[int, str | int]] = set()
    if timing is not None:
        for p in timing.passes:
            critical.update((p.pass_index, n) for n in p.path.nodes)
            critical.update((p.pass_index, m) for m in p.path.message_ids)
    if trace.real is not None:
        meta["real_outcome"] = trace.real.outcome
        events.extend(_real_events(trace, nodes, trace.real, flow_id, critical))
    if timing is not None and timing.passes:
        meta["critical_path"] = timing.summary()
        events.extend(critical_path_events(timing))
    meta["replay_outcome"] = replay.outcome
    events.extend(_replay_events(trace, nodes, replay, flow_id))
    return {"traceEvents": events, "displayTimeUnit": "ms", "metadata": meta}


def _rank(trace: Trace, worker: str | None) -> int:
    if worker in trace.workers:
        return trace.workers.index(worker)
    return len(trace.workers)


def _process_meta(trace: Trace, base: int, suffix: str, sort_offset: int) -> list[dict[str, Any]]:
    out = []
    for rank, w in enumerate(trace.workers):
        pid = base + rank
        out.append(_meta(pid, None, "process_name", f"{w} (rank {rank}) · {suffix}"))
        out.append(_meta(pid, None, "process_sort_index", sort_offset + 2 * rank))
    return out


def _real_events(trace: Trace, nodes: Mapping[str, Node], real: Real,
                 flow_id: list[int], critical: set[tuple[int, str | int]]
                 ) -> list[dict[str, Any]]:
    out = _process_meta(trace, REAL_PID_BASE, "real", 0)
    raw = [e for e in real.events if isinstance(e, dict)]
    order = sorted(range(len(raw)), key=lambda i: (float(raw[i].get("t_us") or 0.0),
                                                   -float(raw[i].get("dur_us") or MIN_DUR_US), i))
    lanes: dict[tuple[int, str], _Lanes] = {}
    tids: dict[tuple[int, str, int], int] = {}
    next_tid: dict[int, int] = {}
    # (pass, node id) -> (pid, tid, ts) of its slice, for flows
    where: dict[tuple[int, str], tuple[int, int, float]] = {}
    slices: list[dict[str, Any]] = []
    for i in order:
        e = raw[i]
        nid = str(e.get("node"))
        worker = e.get("worker") or (nodes[nid].worker if nid in nodes else None)
        pid = REAL_PID_BASE + _rank(trace, worker)
        ts = float(e.get("t_us") or 0.0)
        dur = e.get("dur_us")
        dur_f = max(float(dur), MIN_DUR_US) if isinstance(dur, (int, float)) else MIN_DUR_US
        thread = str(e.get("thread") or "backward")
        lane = lanes.setdefault((pid, thread), _Lanes()).place(ts, ts + dur_f)
        key = (pid, thread, lane)
        if key not in tids:
            tids[key] = next_tid.get(pid, 1)
            next_tid[pid] = tids[key] + 1
            tname = thread if lane == 0 else f"{thread} ({lane + 1})"
            out.append(_meta(pid, tids[key], "thread_name", tname))
        node = nodes.get(nid)
        pass_index = int(e.get("pass") or 0)
        args: dict[str, Any] = {"node": nid, "pass": pass_index}
        if node is not None:
            if has_seq(node.seq):
                args["seq"] = node.seq
            if node.msg_id is not None:
                args["message"] = message_label(node.msg_id)
        if e.get("grad_shapes") is not None:
            args["grad_shapes"] = e.get("grad_shapes")
        if dur is None:
            args["dur_unknown"] = True
        if (pass_index, nid) in critical:
            args["critical_path"] = True
        slices.append({"ph": "X", "name": _slice_name(node, nid), "cat": "real",
                       "ts": _round(ts), "dur": _round(dur_f), "pid": pid, "tid": tids[key],
                       "args": args})
        where.setdefault((pass_index, nid), (pid, tids[key], ts))
    out.extend(slices)
    out.extend(_flows(trace, where, "real", flow_id, critical))
    return out


def _flows(trace: Trace, where: Mapping[tuple[int, str], tuple[int, int, float]], cat: str,
           flow_id: list[int], critical: set[tuple[int, str | int]] | None = None
           ) -> list[dict[str, Any]]:
    """Flow arrows recv slice -> send slice, for every message whose two slices exist; those
    in ``critical`` (``(pass, msg_id)``) get the category ``<cat>.critical_path``."""
    out: list[dict[str, Any]] = []
    passes = sorted({p for p, _ in where})
    for p in passes:
        for pair in trace.pairs():
            recv, send = pair["recv"], pair["send"]
            if recv is None or send is None:
                continue
            a, b = where.get((p, recv)), where.get((p, send))
            if a is None or b is None:
                continue
            flow_id[0] += 1
            name = f"gradient {message_label(pair['msg_id'])}"
            kind = "critical_path" if critical and (p, pair["msg_id"]) in critical else "message"
            out.append({"ph": "s", "id": flow_id[0], "name": name, "cat": f"{cat}.{kind}",
                        "pid": a[0], "tid": a[1], "ts": _round(a[2])})
            out.append({"ph": "f", "bp": "e", "id": flow_id[0], "name": name,
                        "cat": f"{cat}.{kind}", "pid": b[0], "tid": b[1], "ts": _round(b[2])})
    return out


def _replay_events(trace: Trace, nodes: Mapping[str, Node], replay: ReplayLike,
                   flow_id: list[int]) -> list[dict[str, Any]]:
    out = _process_meta(trace, REPLAY_PID_BASE, "replay", 1)
    tids: dict[tuple[int, int], int] = {}
    next_tid: dict[int, int] = {}
    where: dict[tuple[int, str], tuple[int, int, float]] = {}
    slices: list[dict[str, Any]] = []
    evs: Sequence[Any] = replay.events
    executed: set[tuple[int, str]] = {(ev.pass_index, ev.node) for ev in evs
                                      if ev.action == "execute" and ev.node}
    for ev in evs:
        worker = ev.worker or (nodes[ev.node].worker if ev.node in nodes else None)
        pid = REPLAY_PID_BASE + _rank(trace, worker)
        if ev.action in ("hang", "error", "crash"):
            slices.append({"ph": "i", "s": "p", "name": ev.action, "cat": "replay",
                           "ts": ev.step * STEP_US, "pid": pid, "tid": 0,
                           "args": {"step": ev.step, "text": ev.text}})
            continue
        is_slice = ev.action == "execute" or (
            ev.action == "accumulate" and ev.node and (ev.pass_index, ev.node) not in executed)
        if not is_slice or not ev.node:
            continue
        call = ev.call if ev.call is not None else -1
        key = (pid, call)
        if key not in tids:
            tids[key] = next_tid.get(pid, 1)
            next_tid[pid] = tids[key] + 1
            out.append(_meta(pid, tids[key], "thread_name",
                             f"task {call}" if call >= 0 else "engine"))
            out.append(_meta(pid, tids[key], "thread_sort_index", tids[key]))
        node = nodes.get(ev.node)
        ts = ev.step * STEP_US
        args: dict[str, Any] = {"node": ev.node, "step": ev.step, "pass": ev.pass_index,
                                "text": ev.text}
        if node is not None and has_seq(node.seq):
            args["seq"] = node.seq
        deps = replay.initial_dependencies(ev.pass_index).get(ev.node)
        if deps is not None:
            args["deps"] = deps
        slices.append({"ph": "X", "name": _slice_name(node, ev.node), "cat": "replay", "ts": ts,
                       "dur": STEP_DUR_US, "pid": pid, "tid": tids[key], "args": args})
        where.setdefault((ev.pass_index, ev.node), (pid, tids[key], float(ts)))
    out.extend(slices)
    out.extend(_flows(trace, where, "replay", flow_id))
    return out
