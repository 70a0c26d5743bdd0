"""The worker-level summary: workers as nodes, gradient messages between them as edges.

``worker_summary(graph)`` counts each worker's nodes by kind and its RPC calls (made and served),
the gradient messages from each worker to each other one (both directions apart) with the bytes
their gradients hold (the recv's gradient shapes times the leaves' element size), and, where the
trace holds a measured real backward, how long each worker was busy and waited for messages.
Linear in the trace's size; the initiator comes first.
"""

from __future__ import annotations

from distviz.analyses.timing import Timing, analyze, gradient_dtype_bytes, message_bytes
from distviz.replay.graph import ACC, OP, RECV, SEND, IndexedGraph
from distviz.trace import Trace
from distviz.views.view import Link, WorkerStats, WorkerSummary

__all__ = ["ordered_workers", "worker_summary"]


def ordered_workers(workers: list[str], initiator: str) -> list[str]:
    """The workers with the initiator first, the others in trace order."""
    return [initiator] + [w for w in workers if w != initiator]


def worker_summary(g: IndexedGraph, timing: Timing | None | bool = True) -> WorkerSummary:
    """Return the summary of the trace behind ``g``. ``timing``: a ``Timing`` to use, ``True``
    to analyse the trace's real run when it has one, ``False`` for none."""
    trace = g.trace
    nw = len(g.workers)
    counts = [[0, 0, 0, 0] for _ in range(nw)]    # op, send, recv, leaf
    slot = {OP: 0, SEND: 1, RECV: 2, ACC: 3}
    for i in range(g.n):
        counts[g.worker[i]][slot[g.kind[i]]] += 1
    made = dict.fromkeys(g.workers, 0)
    served = dict.fromkeys(g.workers, 0)
    for c in trace.rpc_calls:
        if c.caller in made:
            made[c.caller] += 1
        if c.callee in served:
            served[c.callee] += 1
    links: dict[tuple[int, int], list[int]] = {}
    dtype_bytes = gradient_dtype_bytes(trace)
    for m, r in sorted(g.recv_by_msg.items()):
        _to, s = g.target_send(m)
        if s < 0:
            continue
        acc = links.setdefault((g.worker[r], g.worker[s]), [0, 0])
        acc[0] += 1
        acc[1] += message_bytes(trace.nodes[r], dtype_bytes)
    busy, waiting, wall = _times(trace, timing)
    order = ordered_workers(g.workers, trace.initiator)
    stats = []
    for w in order:
        k = g.workers.index(w)
        cnt = counts[k]
        stats.append(WorkerStats(w, k, w == trace.initiator, sum(cnt), cnt[0], cnt[1], cnt[2], cnt[3],
                                 made[w], served[w], busy.get(w), waiting.get(w)))
    rank = {w: order.index(w) for w in g.workers}
    out = [Link(g.workers[a], g.workers[b], v[0], v[1]) for (a, b), v in links.items()]
    out.sort(key=lambda lk: (rank[lk.sender], rank[lk.receiver]))
    return WorkerSummary(tuple(stats), tuple(out), g.n, wall)


def _times(trace: Trace, timing: Timing | None | bool
           ) -> tuple[dict[str, float], dict[str, float], float | None]:
    if timing is False or timing is None:
        return {}, {}, None
    found = analyze(trace) if timing is True else timing
    if found is None or not found.passes:
        return {}, {}, None
    busy: dict[str, float] = {}
    waiting: dict[str, float] = {}
    for p in found.passes:
        for wt in p.workers:
            busy[wt.worker] = busy.get(wt.worker, 0.0) + wt.busy_us
            waiting[wt.worker] = waiting.get(wt.worker, 0.0) + wt.waiting_us
    return busy, waiting, found.wall_us
