"""Is an observed backward one that FAST mode's rules allow? (pure, torch-free)

With one inter-op thread per worker the replay predicts each worker's order exactly (given the
observed arrival order of gradient messages), and ``distviz.judge.agreement`` compares the two.
Real programs usually run with several inter-op threads: calls on one worker then overlap on
different threads and many orders are possible. This module checks the observed order against
the rules every FAST-mode schedule obeys, without choosing one:

* **once**: every node runs at most once per pass;
* **call**: a call (one ``execute_graph_task_until_ready_queue_empty``, started by the
  ``GraphRoot`` or by one incoming gradient message at its ``SendRpcBackward``) runs on one
  thread from start to end, so on each thread the events split into calls at each send and at
  the roots; a node runs in the call that made its last dependency decrement, so it runs in the
  call of one of its predecessors;
* **dependencies**: a node runs after every predecessor on its worker (later in the same call,
  or started earlier in another call);
* **priority**: when a call pops a node, no node waiting in that call's queue has a larger
  ``sequence_nr`` (AccumulateGrad largest of all). A node is in a call's queue from the moment
  its last predecessor in that call ran (the node runs in that call, so that predecessor made
  the last decrement).

Only same-worker rules are checked: workers on different hosts do not share a clock.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from distviz.trace import NodeKind, Trace
from distviz.trace.sections import RealEvent

__all__ = ["Violation", "check"]


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken rule: ``rule`` is ``once``, ``call``, ``dependencies`` or ``priority``."""

    worker: str
    pass_index: int
    node: str
    rule: str
    text: str


def _preds(trace: Trace) -> dict[str, list[str]]:
    """Same-worker predecessors of each node (nodes with a next edge into it)."""
    worker = {n.id: n.worker for n in trace.nodes}
    out: dict[str, list[str]] = {n.id: [] for n in trace.nodes}
    for n in trace.nodes:
        for e in n.next:
            if e is not None and worker.get(e[0]) == n.worker and n.id not in out[e[0]]:
                out[e[0]].append(n.id)
    return out


def _t(ev: RealEvent) -> float:
    """When ``ev`` started (microseconds; an event without a time counts as at 0)."""
    return float(ev.t_us or 0.0)


def _calls(events: list[RealEvent], kinds: dict[str, NodeKind],
           roots: set[str]) -> list[list[RealEvent]]:
    """Split one worker's events of one pass into calls: per thread, in time order, a new
    call starts at each send and at the first root."""
    by_thread: dict[str, list[RealEvent]] = {}
    for ev in events:
        by_thread.setdefault(str(ev.thread), []).append(ev)
    calls: list[list[RealEvent]] = []
    for evs in by_thread.values():
        current: list[RealEvent] | None = None
        root_seen = False
        for ev in sorted(evs, key=lambda e: _t(e)):
            node = ev.node
            starts = kinds.get(node) == NodeKind.SEND or (node in roots and not root_seen)
            if node in roots:
                root_seen = True
            if starts or current is None:
                current = []
                calls.append(current)
            current.append(ev)
    return calls


def _check_call(call: list[RealEvent], preds: dict[str, list[str]], key: dict[str, int],
                kinds: dict[str, NodeKind], roots: set[str], started: dict[str, float], worker: str,
                p: int) -> list[Violation]:
    out: list[Violation] = []
    pos = {ev.node: k for k, ev in enumerate(call)}
    ready_at: dict[str, int] = {}
    for k, ev in enumerate(call):
        node = ev.node
        if k == 0 and node not in roots:
            if kinds.get(node) != NodeKind.SEND:
                out.append(Violation(worker, p, node, "call", (
                    f"{node} started a call; FAST mode starts a call only at the GraphRoot "
                    "and at the send function an incoming gradient message is for")))
            continue     # the send that starts the call: not popped from a ready queue
        mine = [q for q in preds.get(node, []) if q in started]
        here = [q for q in mine if q in pos]
        if node in roots:
            ready_at[node] = -1
        elif not here:
            out.append(Violation(worker, p, node, "call", (
                f"{node} ran in a call that ran none of its predecessors "
                f"({', '.join(mine) or 'none ran'}); FAST mode runs a node in the call that made "
                "its last dependency decrement")))
            continue
        else:
            ready_at[node] = max(pos[q] for q in here)
        for q in here:
            if pos[q] > k:
                out.append(Violation(worker, p, node, "dependencies", (
                    f"{node} ran before its predecessor {q} in the same call")))
        t = _t(ev)
        for q in mine:
            if q not in pos and started[q] > t:
                out.append(Violation(worker, p, node, "dependencies", (
                    f"{node} started before its predecessor {q} (in another call)")))
    # priority: replay the call's queue with the observed pops
    waiting: list[tuple[int, int, str]] = []
    entering: dict[int, list[str]] = {}
    for node, at in ready_at.items():
        entering.setdefault(at, []).append(node)
    popped: set[str] = set()
    for node in entering.get(-1, []):
        heapq.heappush(waiting, (-key[node], pos[node], node))
    for k, ev in enumerate(call):
        node = ev.node
        if node in ready_at:
            while waiting and waiting[0][2] in popped:
                heapq.heappop(waiting)
            if waiting and -waiting[0][0] > key[node]:
                top = waiting[0][2]
                out.append(Violation(worker, p, node, "priority", (
                    f"{node} (sequence_nr {key[node]}) ran while {top} (sequence_nr "
                    f"{-waiting[0][0]}) was ready in the same call; FAST mode pops the largest "
                    "sequence_nr first")))
            popped.add(node)
        for nxt in entering.get(k, []):
            heapq.heappush(waiting, (-key[nxt], pos[nxt], nxt))
    return out


def check(trace: Trace) -> list[Violation]:
    """Return every violation of FAST mode's rules in ``trace.real``'s observed events.

    An empty list means each worker's observed order is one FAST mode allows. Traces without
    a real run give no violations.
    """
    events = trace.real.observed() if trace.real is not None else []
    if not events:
        return []
    kinds = {n.id: n.kind for n in trace.nodes}
    key = {n.id: n.seq for n in trace.nodes}
    preds = _preds(trace)
    out: list[Violation] = []
    groups: dict[tuple[int, str], list[RealEvent]] = {}
    for ev in events:
        if ev.node in kinds:
            groups.setdefault((ev.pass_index, ev.worker), []).append(ev)
    rank = {w: i for i, w in enumerate(trace.workers)}
    for (p, worker), evs in sorted(groups.items(), key=lambda g: (g[0][0], rank.get(g[0][1], 0))):
        roots = set(trace.passes[p].roots) if p < len(trace.passes) and \
            worker == trace.initiator else set()
        started: dict[str, float] = {}
        for ev in evs:
            node = ev.node
            if node in started:
                out.append(Violation(worker, p, node, "once", f"{node} ran twice in one pass"))
            else:
                started[node] = _t(ev)
        for call in _calls(evs, kinds, roots):
            out.extend(_check_call(call, preds, key, kinds, roots, started, worker, p))
    return out
