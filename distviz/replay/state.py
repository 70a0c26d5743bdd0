"""The replay engine's state: what lasts across passes, what one pass changes, and the steps
the engine schedules.

``RunState`` and ``PassState`` are dataclasses that copy themselves field by field (``copy()``
iterates ``dataclasses.fields``), so a snapshot can never share mutable state with the engine
by a forgotten name. ``replay_state`` turns them into the ``ReplayState`` renderers read.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

from distviz.outcome import Outcome
from distviz.replay.graph import IndexedGraph
from distviz.replay.heap import StdPriorityQueue
from distviz.replay.values import Message, PassError, ReplayEvent, ReplayState, WorkerState

__all__ = ["QUEUE_CAP", "Ack", "ComputeDeps", "ErrorHop", "MessageCall", "PassEnd", "PassStart",
           "PassState", "PerWorker", "RaiseError", "RootCall", "RunState", "SendGradient", "Step",
           "WorkerDone", "queue_payload", "replay_state", "unnotified", "waiting_sends"]

QUEUE_CAP = 20          # an event's detail.queue holds at most this many entries


# -- the state: every field is copied by copy() ---------------------------------------------------

def _copied(value: Any) -> Any:
    """A value's own copy when it has one (lists, dicts, bytearrays, deques, queues, states),
    else the value itself (ints, strings, tuples and frozen values are never mutated)."""
    copy = getattr(value, "copy", None)
    return copy() if copy is not None else value


class PerWorker(list[list[int]]):
    """One list per worker that grows in place; ``copy()`` copies the inner lists too."""

    def copy(self) -> PerWorker:
        return PerWorker([list(x) for x in self])


@dataclass(slots=True)
class PassState:
    """What one pass changes: made afresh for every pass (a new ``GraphTask``, empty queues).

    Containers are copied one level deep by ``copy()``; what they hold is never mutated in
    place (``visited[w]`` and ``part[w]`` lists are replaced, never appended to), except in a
    ``PerWorker``, whose own ``copy()`` copies its inner lists.
    """

    part: list[list[int]]                  # per worker: the sends taking part
    grad: bytearray                        # per node: the state of the gradient it received
                                           # (``undefined.GradState``: undefined, zeros, values)
    send_ran: bytearray                    # per send: it ran in this pass
    w_left: list[int]                      # per worker: participating sends not yet run
    order: PerWorker                       # per worker: nodes run, in order
    recv_slots: dict[int, int] = field(default_factory=dict)  # recv -> bit mask of fed slots
    send_mask: dict[int, int] = field(default_factory=dict)   # send -> bit mask of non-zero slots
    visited: list[list[int]] = field(default_factory=list)    # per worker: BFS order
    w_init: list[bool] = field(default_factory=list)     # dependencies computed
    w_done: list[bool] = field(default_factory=list)
    w_out: list[int] = field(default_factory=list)       # outstanding tasks
    w_keep: list[bool] = field(default_factory=list)     # retain_graph of its graph task
    w_failed: list[bool] = field(default_factory=list)
    w_first: list[int] = field(default_factory=list)     # its first message (index), or -1
    w_unacked: list[int] = field(default_factory=list)   # messages it sent, not acknowledged
    w_first_inflight: list[bool] = field(default_factory=list)
    w_acked_first: list[bool] = field(default_factory=list)
    msgs: list[Message] = field(default_factory=list)
    m_from: list[int] = field(default_factory=list)
    m_to: list[int] = field(default_factory=list)
    m_send: list[int] = field(default_factory=list)
    m_acked: list[bool] = field(default_factory=list)
    fifo: deque[int] = field(default_factory=deque)      # messages in flight, by index
    calls: int = 0
    cur_call: int | None = None
    cur_w: int = -1
    heap: StdPriorityQueue[int] | None = None            # the current call's ready queue

    @classmethod
    def start(cls, g: IndexedGraph, part: list[list[int]]) -> PassState:
        """Return the state at the start of a pass in which the sends ``part`` take part."""
        nw = len(g.workers)
        return cls(part=part, grad=bytearray(g.n), send_ran=bytearray(g.n),
                   order=PerWorker([] for _ in range(nw)),
                   w_left=[len(p) for p in part], visited=[[] for _ in range(nw)],
                   w_init=[False] * nw, w_done=[False] * nw, w_out=[0] * nw,
                   w_keep=[False] * nw, w_failed=[False] * nw, w_first=[-1] * nw,
                   w_unacked=[0] * nw, w_first_inflight=[False] * nw,
                   w_acked_first=[False] * nw)

    def copy(self) -> PassState:
        """Return an independent copy (every field, one level deep)."""
        return PassState(**{f.name: _copied(getattr(self, f.name)) for f in fields(self)})


@dataclass(slots=True)
class RunState:
    """What lasts across passes: the step, freed saved tensors, accumulations, the outcome."""

    deps: list[int]                        # per node: remaining dependencies (BFS-marked ones)
    freed: bytearray                       # per node: its saved tensors were released
    finished: bool
    step: int = -1
    pass_index: int = 0
    outcome: Outcome = "completed"
    acc_count: dict[int, int] = field(default_factory=dict)
    acc_nonzero: dict[int, bool] = field(default_factory=dict)
    orders: list[PerWorker] = field(default_factory=list)   # per finished pass: nodes run
    excluded: list[list[int]] = field(default_factory=list)   # per pass: sends left out (SMART)
    messages_total: int = 0
    error: PassError | None = None
    err_text: str = ""
    err_chain: list[int] = field(default_factory=list)
    agenda: deque[Step] = field(default_factory=deque)        # steps to run before the queues
    arr_ptr: dict[tuple[int, int], int] = field(default_factory=dict)

    def copy(self) -> RunState:
        """Return an independent copy (every field, one level deep)."""
        return RunState(**{f.name: _copied(getattr(self, f.name)) for f in fields(self)})


# -- the steps the engine schedules ---------------------------------------------------------------

class PassStart(NamedTuple):
    """The initiator starts the next pass."""


class ComputeDeps(NamedTuple):
    """``worker`` computes its dependencies."""
    worker: int


class RootCall(NamedTuple):
    """Call 0 on the initiator: the GraphRoot."""


class MessageCall(NamedTuple):
    """A call starts for message ``msg`` on its receiver."""
    msg: int


class SendGradient(NamedTuple):
    """The recv ``recv`` that ran in ``call`` sends its gradients."""
    recv: int
    call: int | None


class Ack(NamedTuple):
    """Message ``msg`` is acknowledged."""
    msg: int


class WorkerDone(NamedTuple):
    """``worker`` has run every send and its queues are empty."""
    worker: int


class ErrorHop(NamedTuple):
    """The error of ``child`` reaches the sender of its first message."""
    child: int


class RaiseError(NamedTuple):
    """An outstanding gradient RPC of ``worker`` failed (``node``: the recv, or -1)."""
    worker: int
    error: str
    node: int


class PassEnd(NamedTuple):
    """The pass ends with ``outcome``."""
    outcome: Outcome


Step = (PassStart | ComputeDeps | RootCall | MessageCall | SendGradient | Ack | WorkerDone
        | ErrorHop | RaiseError | PassEnd)


def replay_state(g: IndexedGraph, s: RunState, p: PassState, step: int,
                 event: ReplayEvent | None) -> ReplayState:
    """Build a fresh ``ReplayState`` (what renderers read) from the engine's state."""
    ids = g.ids
    workers: dict[str, WorkerState] = {}
    for w, name in enumerate(g.workers):
        init = p.w_init[w]
        ws = WorkerState(initialized=init)
        if init:
            deps = s.deps
            ws.deps = {ids[i]: deps[i] for i in p.visited[w] if deps[i] > 0}
            ws.waiting_sends = [ids[x] for x in p.part[w] if not p.send_ran[x]]
        if p.cur_w == w and p.heap is not None:
            ws.queue = [ids[i] for i in p.heap.pop_order()]
            ws.current_call = p.cur_call
        ws.pending_calls = [ids[p.m_send[mi]] for mi in p.fifo
                            if p.m_to[mi] == w and p.m_send[mi] >= 0]
        ws.executed = [ids[i] for i in p.order[w]]
        ws.accumulated = {ids[i]: c for i, c in s.acc_count.items() if g.worker[i] == w}
        ws.outstanding = p.w_out[w]
        ws.done = p.w_done[w]
        ws.first_message = p.msgs[p.w_first[w]] if p.w_first[w] >= 0 else None
        ws.unacked = [p.msgs[mi].label for mi in range(len(p.msgs))
                      if p.m_from[mi] == w and not p.m_acked[mi]]
        ws.keep_graph = p.w_keep[w]
        ws.failed = p.w_failed[w]
        ws.acked_first = p.w_acked_first[w]
        workers[name] = ws
    return ReplayState(step=step, pass_index=s.pass_index, workers=workers,
                       in_flight=[p.msgs[mi] for mi in p.fifo], event=event)


def waiting_sends(g: IndexedGraph, p: PassState) -> dict[str, list[str]]:
    """Per started worker with some left, the participating sends that have not run."""
    return {g.workers[w]: [g.ids[x] for x in p.part[w] if not p.send_ran[x]]
            for w in range(len(g.workers))
            if p.w_init[w] and any(not p.send_ran[x] for x in p.part[w])}


def unnotified(g: IndexedGraph, p: PassState, chain: list[int]) -> tuple[str, ...]:
    """The workers an error never reaches: started (or a gradient message is in flight to them),
    not finished, and off the error's chain (PyTorch has no failure notification)."""
    inflight = {p.m_to[mi] for mi in p.fifo}
    return tuple(g.workers[w] for w in range(len(g.workers))
                 if ((p.w_init[w] and not p.w_done[w]) or w in inflight) and w not in chain)


def queue_payload(heap: StdPriorityQueue[int] | None) -> tuple[tuple[int, ...], int]:
    """The current call's queue for an event: the first ``QUEUE_CAP`` in pop order, length."""
    if heap is None:
        return (), 0
    n = len(heap)
    if n <= 1:
        return ((heap.top(),), 1) if n else ((), 0)
    return tuple(heap.pop_order(QUEUE_CAP)), n
