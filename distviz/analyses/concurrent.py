"""Several contexts on one worker (pure): the calls of concurrent contexts share the worker's
engine thread.

FAST mode runs every backward call of a worker (its ``GraphRoot`` call, then one per incoming
gradient message) on the worker's inter-op thread pool: with one inter-op thread, calls run
one at a time, first come first served, whichever context they belong to. So when several
trainers' contexts meet on a parameter server, each context's calls run there in the order
its messages arrived, interleaved with the other contexts' calls, and each context's own order
is exactly what its replay predicts with that arrival order (``distviz.judge.agreement``).

``shared_workers`` reads the real events of every recorded context and lays each worker's
calls out on one time line: which context each call belonged to, when it started and ended,
and whether any call began before the previous one (of another context) had ended, which
one inter-op thread rules out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from distviz.trace import NodeKind, Trace

__all__ = ["ContextCall", "SharedWorker", "shared_workers"]


@dataclass(frozen=True)
class ContextCall:
    """One backward call on a worker: the context it belongs to (number in the recording,
    from 1, and its label), the node it started with, how many nodes it ran, and its observed
    start and end (microseconds from the first observed event of the recording)."""

    context: int
    label: str
    first: str
    nodes: int
    start_us: float
    end_us: float


@dataclass(frozen=True)
class SharedWorker:
    """A worker that ran calls of several contexts: its calls in the order they started, the
    contexts they came from, and how many calls overlapped the one before them."""

    worker: str
    calls: tuple[ContextCall, ...]
    contexts: tuple[int, ...]
    overlaps: int

    @property
    def sentence(self) -> str:
        """One line for the report."""
        how = ("one at a time" if self.overlaps == 0
               else f"with {self.overlaps} overlapping the previous call")
        return (f"{self.worker} ran {len(self.calls)} backward calls of {len(self.contexts)} "
                f"contexts on its engine thread, {how}, in the order their gradient messages "
                "arrived")


def _calls(number: int, label: str, trace: Trace) -> dict[str, list[ContextCall]]:
    """Each worker's calls of one context, from its real events (a call starts with a send,
    or with the root on the initiator)."""
    base = float(trace.real.extra.get("t0_ns", 0)) / 1000.0 if trace.real is not None else 0.0
    kinds = {n.id: n.kind for n in trace.nodes}
    out: dict[str, list[ContextCall]] = {}
    current: dict[str, list[tuple[str, float, float]]] = {}

    def close(worker: str) -> None:
        run = current.pop(worker, [])
        if run:
            out.setdefault(worker, []).append(ContextCall(
                context=number, label=label, first=run[0][0], nodes=len(run),
                start_us=run[0][1], end_us=max(end for _, _, end in run)))
    events = trace.real.observed() if trace.real is not None else []
    for ev in sorted(events, key=lambda e: (e.worker, float(e.t_us or 0.0))):
        worker, nid = ev.worker, ev.node
        start = base + float(ev.t_us or 0.0)
        end = start + float(ev.dur_us or 0.0)
        if kinds.get(nid) == NodeKind.SEND:
            close(worker)
        current.setdefault(worker, []).append((nid, start, end))
    for worker in list(current):
        close(worker)
    return out


def shared_workers(contexts: Sequence[Trace], labels: Sequence[str],
                   owners: Sequence[str]) -> list[SharedWorker]:
    """The workers that ran calls of contexts of more than one trainer, with their calls in
    order (see the module docstring). ``labels`` name the contexts (``trainer1 2``);
    ``owners`` are their trainers."""
    per_worker: dict[str, list[ContextCall]] = {}
    for i, trace in enumerate(contexts):
        for worker, calls in _calls(i + 1, labels[i], trace).items():
            per_worker.setdefault(worker, []).extend(calls)
    starts = [c.start_us for calls in per_worker.values() for c in calls]
    origin = min(starts, default=0.0)
    out: list[SharedWorker] = []
    order = list(contexts[0].workers) if contexts else []
    for worker in sorted(per_worker, key=lambda w: order.index(w) if w in order else len(order)):
        calls = sorted(per_worker[worker], key=lambda c: c.start_us)
        involved = sorted({c.context for c in calls})
        if len({owners[c - 1] for c in involved}) < 2:
            continue
        shifted = tuple(ContextCall(c.context, c.label, c.first, c.nodes, c.start_us - origin,
                                    c.end_us - origin) for c in calls)
        overlaps = sum(1 for a, b in zip(shifted, shifted[1:], strict=False)
                       if a.context != b.context and b.start_us < a.end_us)
        out.append(SharedWorker(worker=worker, calls=shifted, contexts=tuple(involved),
                                overlaps=overlaps))
    return out
