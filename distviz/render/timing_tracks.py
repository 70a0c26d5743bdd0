"""The critical path as Chrome trace events: a track of its own in the Perfetto export.

One process, ``pid = CRITICAL_PID``, named ``critical path · real`` (or ``· what-if``), sorted
after the real workers, with one thread track holding the path's segments in time order, on the
real run's clock: ``start-up`` (the initiator until its first node), each node run on the path
(named like its slice on the worker's track), ``engine`` (between two nodes), ``message 1:0
(worker1 → worker0)`` and ``end`` (acknowledgements until ``backward()`` returns). Every slice's
``args`` carry ``kind``, ``worker``, ``pass`` and the ``node`` or ``message``.
"""

from __future__ import annotations

from typing import Any

from distviz.analyses.timing import Segment, Timing

CRITICAL_PID = 2000
_NAMES = {"startup": "start-up (dependencies)", "engine": "engine",
          "end": "end (acknowledgements)"}


def _name(seg: Segment) -> str:
    if seg.kind == "compute" and seg.node:
        short = seg.node.split("/", 1)[-1]
        return short.split("#", 1)[0] if not short.startswith("AccumulateGrad(") else short
    if seg.kind == "message":
        return f"message {seg.message} (to {seg.worker})"
    return _NAMES.get(seg.kind, seg.kind)


def critical_path_events(timing: Timing, label: str = "real",
                         sort_index: int = 999) -> list[dict[str, Any]]:
    """The track's events: metadata, then one complete (``X``) slice per path segment."""
    pid = CRITICAL_PID
    out: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
         "args": {"name": f"critical path · {label}"}},
        {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
         "args": {"sort_index": sort_index}},
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": 1,
         "args": {"name": "critical path"}}]
    for p in timing.passes:
        for seg in p.path.segments:
            if seg.dur_us <= 0:
                continue
            args: dict[str, Any] = {"kind": seg.kind, "worker": seg.worker,
                                    "pass": p.pass_index}
            if seg.node:
                args["node"] = seg.node
            if seg.message:
                args["message"] = seg.message
            out.append({"ph": "X", "name": _name(seg), "cat": "critical_path",
                        "ts": round(seg.start_us, 3), "dur": round(seg.dur_us, 3), "pid": pid,
                        "tid": 1, "args": args})
    return out
