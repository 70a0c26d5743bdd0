"""Replay PyTorch's FAST-mode distributed backward, one engine event at a time.

This is a pure simulation of ``DistEngine`` (internals §2 and the reference simulator in §3.6)
with the sequential policy that PyTorch follows when every worker has one inter-op thread:

1. Only the initiator starts a pass. It computes its dependencies by BFS from the ``GraphRoot``
   (the roots, in order) **plus all of its send functions**, counted per edge; ``outstanding``
   starts at ``#sends + 1``. Call 0 runs the ``GraphRoot``.
2. Every incoming gradient message and the ``GraphRoot`` start a *call* with a private
   ``StdPriorityQueue`` (largest ``sequence_nr`` first, libstdc++ ties). Calls run one at a time
   from one global FIFO. A node runs in the call that made its last dependency decrement;
   children are pushed in next-edge order.
3. ``AccumulateGrad`` is captured into the context (``accumulate``); ``RecvRpcBackward`` sends its
   gradients (zeros for unused slots) to worker ``msg_id >> 48``, to the send with the same id.
4. A remote worker's *first* message computes its dependencies from all its sends only; that
   message is acknowledged when the worker is done and all gradients it sent were acknowledged.
   Later messages are acknowledged at once. A worker is done when every send ran and its queues
   are empty. The pass completes when the initiator is done and all its messages are acknowledged.
5. Nothing left to run and the pass not complete: the pass **hangs** (FAST mode's best known
   surprise); ``hang.diagnose`` explains it. A failing node aborts its worker's graph task and the
   error travels back only along the first-message chain, each hop prefixing
   ``Error on Node <rank>: ``.

``mode="smart"`` replays the never-implemented SMART mode of RFC #23110: only sends in the
roots' lineage (whose paired recv is reachable from the roots, across workers) take part.

Scope and caveats: with more than one inter-op thread per worker, real calls on one worker
overlap and this replay is one legal schedule among several. The replay never imports torch; all
graphs are walked with explicit stacks and node ids are mapped to integers once, so a
1,000,000-node trace replays in seconds.
"""

from __future__ import annotations

import gc
from bisect import bisect_right
from collections import deque
from collections.abc import Callable
from typing import Any

from distviz.errors import TraceError
from distviz.replay.heap import StdPriorityQueue
from distviz.replay.model import Event, ReplayState, WorkerState
from distviz.trace import ACCUMULATE_GRAD_SEQ, Trace, message_label, short_name

__all__ = ["MODES", "FREED_MESSAGE", "IndexedGraph", "LazyEvent", "Replay", "replay",
           "lineage_sends", "reachable_nodes"]

MODES = ("fast", "smart")
OP, SEND, RECV, ACC = 0, 1, 2, 3
_KIND = {"op": OP, "send": SEND, "recv": RECV, "accumulate_grad": ACC}
QUEUE_CAP = 20          # execute detail.queue holds at most this many entries
_SNAPSHOT_CELLS = 10_000_000  # snapshot budget: (#snapshots * #nodes) stays about this size
FREED_MESSAGE = (
    "Trying to backward through the graph a second time (or directly access saved tensors after "
    "they have already been freed). Saved intermediate values of the graph are freed when you "
    "call .backward() or autograd.grad(). Specify retain_graph=True if you need to backward "
    "through the graph a second time or if you need to access saved tensors after calling "
    "backward.")


# ----------------------------------------------------------------------------------------------
# The trace with integer node indices
# ----------------------------------------------------------------------------------------------

class IndexedGraph:
    """The trace's nodes as integer indices and flat lists, built once per replay.

    ``targets[i]`` and ``nrs[i]`` are tuples with the next edges' target indices (``-1`` for an
    edge without a function) and input numbers. ``key[i]`` is the ready-queue priority
    (``2**64 - 1`` for AccumulateGrad). Index ints are shared objects, so per-event payloads that
    mention nodes cost no new ints. Raises ``TraceError`` when a pass has a root that is not on
    the initiator.
    """

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        nodes = trace.nodes
        self.n = len(nodes)
        self.workers = list(trace.workers)
        wix = {w: k for k, w in enumerate(self.workers)}
        self.initiator = wix[trace.initiator]
        self.ids: list[str] = [nd.id for nd in nodes]
        nums = list(range(self.n))
        index = dict(zip(self.ids, nums, strict=True))
        self._index: dict[str, int] | None = None
        kind: list[int] = []
        key: list[int] = []
        worker: list[int] = []
        targets: list[tuple[int, ...]] = []
        nrs: list[tuple[int, ...]] = []
        msg: list[int] = []
        names: list[str] = []     # display names: MulBackward0, AccumulateGrad(t4)
        self.saved = bytearray(self.n)
        self.fault: dict[int, dict[str, Any]] = {}
        short: dict[str, str] = {}
        zeros: dict[int, tuple[int, ...]] = {0: (), 1: (0,), 2: (0, 0)}
        nodes_of: list[list[int]] = [[] for _ in self.workers]
        for i, nd in zip(nums, nodes, strict=True):
            k = _KIND[nd.kind]
            kind.append(k)
            w = wix[nd.worker]
            worker.append(w)
            nodes_of[w].append(i)
            if k == ACC:
                key.append(ACCUMULATE_GRAD_SEQ)
                names.append(f"AccumulateGrad({nd.var})" if nd.var else "AccumulateGrad")
            else:
                key.append(nd.seq)
                d = short.get(nd.name)
                if d is None:
                    d = short[nd.name] = short_name(nd.name)
                names.append(d)
            nx = nd.next
            if len(nx) == 1 and nx[0] is not None:
                e = nx[0]
                targets.append((index[e[0]],))
                nrs.append((e[1],) if e[1] else zeros[1])
            elif not nx:
                targets.append(())
                nrs.append(())
            else:
                targets.append(tuple([index[e[0]] if e is not None else -1 for e in nx]))
                ns = tuple([e[1] if e is not None else 0 for e in nx])
                if not any(ns):
                    ns = zeros.setdefault(len(ns), ns)   # share the common all-zero tuple
                nrs.append(ns)
            msg.append(-1 if nd.msg_id is None else nd.msg_id)
            if nd.saved:
                self.saved[i] = 1
            if nd.fault is not None:
                self.fault[i] = nd.fault
        self.kind, self.key, self.worker = kind, key, worker
        self.targets, self.nrs, self.msg, self.names = targets, nrs, msg, names
        self.nodes_of = nodes_of
        # the same facts as one tuple per node, for the hot loop (one lookup, better locality):
        # (kind, worker, targets, nrs, flags) with flags 1 = saved, 2 = fault
        fl = self.saved
        ft = self.fault
        self.info: list[tuple[int, int, tuple[int, ...], tuple[int, ...], int]] = [
            (kind[i], worker[i], targets[i], nrs[i], fl[i] | (2 if i in ft else 0))
            for i in nums]
        self.send_by_msg: dict[int, int] = {}
        self.recv_by_msg: dict[int, int] = {}
        sends: list[list[tuple[int, int]]] = [[] for _ in self.workers]
        for i, k in zip(nums, self.kind, strict=True):
            if k == SEND:
                self.send_by_msg.setdefault(self.msg[i], i)
                sends[self.worker[i]].append((self.msg[i], i))
            elif k == RECV:
                self.recv_by_msg.setdefault(self.msg[i], i)
        # a context's send functions are a std::map keyed by message id: sorted
        self.sends_of: list[list[int]] = [[i for _, i in sorted(s)] for s in sends]
        self.roots: list[list[int]] = []
        for p, bp in enumerate(trace.passes):
            rs = [index[r] for r in bp.roots]
            for r in rs:
                if self.worker[r] != self.initiator:
                    raise TraceError(f"root {self.ids[r]!r} is on {self.workers[self.worker[r]]}, "
                                     f"not on the initiator {trace.initiator}; roots must be "
                                     "tensors of the worker that calls backward",
                                     key=f"passes[{p}].roots")
            self.roots.append(rs)
        # BFS marks: shared scratch space, never part of a snapshot (the stamp only grows)
        self.mark: list[int] = [0] * self.n
        self.stamp = 0

    @property
    def index(self) -> dict[str, int]:
        """``{node id: index}``, built on first use (it is big for big traces)."""
        if self._index is None:
            self._index = {nid: i for i, nid in enumerate(self.ids)}
        return self._index

    def edges(self, i: int) -> list[tuple[int, int]]:
        """Return node ``i``'s next edges as ``(target index, input_nr)``."""
        return list(zip(self.targets[i], self.nrs[i], strict=True))

    def disp(self, i: int) -> str:
        """Return a short display name: ``MulBackward0`` or ``AccumulateGrad(t4)``."""
        return self.names[i]

    def target_send(self, msg_id: int) -> tuple[int, int]:
        """Return ``(worker index, send index)`` a recv with ``msg_id`` sends to; -1 when missing."""
        to = msg_id >> 48
        if not 0 <= to < len(self.workers):
            return -1, -1
        s = self.send_by_msg.get(msg_id, -1)
        if s >= 0 and self.worker[s] != to:
            s = -1
        return to, s


def reachable_nodes(g: IndexedGraph, roots: list[int]) -> bytearray:
    """Return a flag per node: reachable from ``roots`` along next edges and, across workers,
    from each reached recv to the send with the same message id (the gradient's path)."""
    seen = bytearray(g.n)
    stack = [r for r in roots]
    for r in roots:
        seen[r] = 1
    targets, kind, msg = g.targets, g.kind, g.msg
    while stack:
        x = stack.pop()
        for t in targets[x]:
            if t >= 0 and not seen[t]:
                seen[t] = 1
                stack.append(t)
        if kind[x] == RECV:
            _to, s = g.target_send(msg[x])
            if s >= 0 and not seen[s]:
                seen[s] = 1
                stack.append(s)
    return seen


def lineage_sends(g: IndexedGraph, roots: list[int]) -> bytearray:
    """SMART mode: a flag per node, set for the sends in the roots' lineage (their paired recv
    is reachable from the roots)."""
    seen = reachable_nodes(g, roots)
    out = bytearray(g.n)
    for sends in g.sends_of:
        for s in sends:
            r = g.recv_by_msg.get(g.msg[s], -1)
            if r >= 0 and seen[r]:
                out[s] = 1
    return out


# ----------------------------------------------------------------------------------------------
# Events whose text and detail are built when read
# ----------------------------------------------------------------------------------------------

_EV_TEXT = Event.__dict__["text"]      # the dataclass slots of Event
_EV_DETAIL = Event.__dict__["detail"]


class LazyEvent(Event):
    """An ``Event`` that keeps a compact payload and builds ``text`` and ``detail`` on access.

    A million-node replay makes millions of events; building every sentence and detail dict up
    front would cost gigabytes. Reading ``text``/``detail`` (or ``to_json()``) builds them from
    the payload and the trace each time, so they are always equal to what an eager event would
    hold. Assigning either one turns the event into a plain stored one.
    """

    __slots__ = ("_g", "_a")

    def __init__(self, step: int, pass_index: int, action: str, worker: str | None,
                 node: str | None, call: int | None, message: dict[str, Any] | None,
                 g: IndexedGraph, payload: tuple[Any, ...]) -> None:
        self.step = step
        self.pass_index = pass_index
        self.action = action
        self.worker = worker
        self.node = node
        self.call = call
        self.message = message
        self._g = g
        self._a: tuple[Any, ...] | None = payload

    def _build(self) -> tuple[str, dict[str, Any]]:
        assert self._a is not None
        return _FORMAT[self.action](self._g, self, self._a)

    def _materialize(self) -> None:
        if self._a is not None:
            text, detail = self._build()
            _EV_TEXT.__set__(self, text)
            _EV_DETAIL.__set__(self, detail)
            self._a = None

    @property
    def text(self) -> str:
        if self._a is None:
            return str(_EV_TEXT.__get__(self, Event))
        return self._build()[0]

    @text.setter
    def text(self, value: str) -> None:
        self._materialize()
        _EV_TEXT.__set__(self, value)

    @property
    def detail(self) -> dict[str, Any]:
        if self._a is None:
            d: dict[str, Any] = _EV_DETAIL.__get__(self, Event)
            return d
        return self._build()[1]

    @detail.setter
    def detail(self, value: dict[str, Any]) -> None:
        self._materialize()
        _EV_DETAIL.__set__(self, value)


def _names_text(g: IndexedGraph, nodes: tuple[int, ...] | list[int], limit: int = 3) -> str:
    names = [g.names[i] for i in nodes[:limit]]
    if len(nodes) > limit:
        return ", ".join(names) + f" and {len(nodes) - limit} more"
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]


def _ready_text(g: IndexedGraph, pushed: tuple[int, ...] | list[int]) -> str:
    if len(pushed) == 1:
        return f"; {g.names[pushed[0]]} becomes ready"
    return f"; {_names_text(g, pushed)} become ready"


def _fmt_execute(g: IndexedGraph, e: LazyEvent, a: tuple[Any, ...]) -> tuple[str, dict[str, Any]]:
    i, zero_in, decs, pushed, q, qlen = a
    ids, names, key = g.ids, g.names, g.key
    k = g.kind[i]
    if k == RECV:
        to = g.msg[i] >> 48
        dest = g.workers[to] if 0 <= to < len(g.workers) else f"rank {to}"
        text = (f"{e.worker} runs {names[i]} (seq {key[i]}) in call {e.call}; it sends its "
                f"gradient to {dest} (message {message_label(g.msg[i])})")
        return text, {"seq": key[i], "decrements": [], "pushed": [], "queue": [ids[x] for x in q],
                      "queue_len": qlen}
    if k == SEND:
        text = f"{e.worker} runs {names[i]} (message {message_label(g.msg[i])}) in call {e.call}"
    else:
        text = f"{e.worker} runs {names[i]} (seq {key[i]}) in call {e.call}"
    if pushed:
        text += _ready_text(g, pushed)
    elif decs:
        text += "; nothing becomes ready yet"
    detail: dict[str, Any] = {
        "seq": key[i],
        "decrements": [[ids[decs[j]], decs[j + 1]] for j in range(0, len(decs), 2)],
        "pushed": [ids[t] for t in pushed]}
    if zero_in:
        detail["zero"] = True
    detail["queue"] = [ids[x] for x in q]
    detail["queue_len"] = qlen
    return text, detail


def _fmt_accumulate(g: IndexedGraph, e: LazyEvent,
                    a: tuple[Any, ...]) -> tuple[str, dict[str, Any]]:
    i, zero, count, q, qlen = a
    var = g.trace.nodes[i].var
    what = f"the gradient of {var}" if var else f"the gradient of {g.ids[i]}"
    text = (f"{e.worker} accumulates {what} into context {g.trace.context_id} "
            f"({_ordinal(count)} time)")
    if zero:
        text += "; it is all zeros (an unused RPC output)"
    return text, {"var": var, "count": count, "zero": zero, "queue": [g.ids[x] for x in q],
                  "queue_len": qlen}


def _fmt_send_gradient(g: IndexedGraph, e: LazyEvent,
                       a: tuple[Any, ...]) -> tuple[str, dict[str, Any]]:
    (nslots,) = a
    m = e.message
    assert m is not None
    dest = m["to"] or f"rank {m['msg_id'] >> 48} (no such worker)"
    text = f"{e.worker} sends the gradient for message {m['label']} to {dest}"
    if m["send"] is None:
        text += ", which has no send function for it"
    elif m["first"]:
        text += f"; {dest} has not started this pass, so this is its first message"
    zs = m["zero_slots"]
    if zs and len(zs) == nslots:
        text += " (all zeros)"
    elif zs:
        text += (f" (zeros for unused output{'s' if len(zs) > 1 else ''} "
                 + ", ".join(str(j) for j in zs) + ")")
    return text, {"slots": nslots}


def _fmt_receive(g: IndexedGraph, e: LazyEvent, a: tuple[Any, ...]) -> tuple[str, dict[str, Any]]:
    (first,) = a
    m = e.message
    assert m is not None
    text = f"{e.worker} receives gradient for message {m['label']} from {m['from']}"
    if first:
        text += (f"; first message for context {g.trace.context_id} here, so it computes "
                 "dependencies")
    else:
        text += "; it already runs this backward, so it acknowledges at once"
    return text, {"first": first}


def _fmt_call_start(g: IndexedGraph, e: LazyEvent,
                    a: tuple[Any, ...]) -> tuple[str, dict[str, Any]]:
    (s,) = a
    m = e.message
    assert m is not None
    text = f"{e.worker} starts call {e.call} with {g.names[s]} (message {m['label']})"
    return text, {"reason": "message", "label": m["label"], "queue": [g.ids[s]], "queue_len": 1}


def _fmt_call_end(g: IndexedGraph, e: LazyEvent, a: tuple[Any, ...]) -> tuple[str, dict[str, Any]]:
    outstanding, left = a
    text = f"{e.worker} ends call {e.call}: its queue is empty"
    if left:
        text += (f"; {left} send{'s' if left > 1 else ''} still wait{'s' if left == 1 else ''} "
                 "for a gradient")
    return text, {"outstanding": outstanding}


def _fmt_ack(g: IndexedGraph, e: LazyEvent, a: tuple[Any, ...]) -> tuple[str, dict[str, Any]]:
    m = e.message
    assert m is not None
    if m["first"]:
        text = (f"{e.worker} acknowledges message {m['label']} from {m['from']}: it is done and "
                "all gradients it sent were acknowledged")
    else:
        text = (f"{e.worker} acknowledges message {m['label']} from {m['from']} at once (not its "
                "first message)")
    return text, {"first": m["first"]}


def _fmt_compute_dependencies(g: IndexedGraph, e: LazyEvent,
                              a: tuple[Any, ...]) -> tuple[str, dict[str, Any]]:
    roots, sends, order, counts, outstanding, keep, excluded = a
    ids = g.ids
    nsend = len(sends)
    send_word = "send" if nsend == 1 else "sends"
    src = f"the roots and its {nsend} {send_word}" if roots else f"its {nsend} {send_word}"
    if nsend and nsend <= 3:
        src += " (" + ", ".join(f"message {message_label(g.msg[s])}" for s in sends) + ")"
    text = (f"{e.worker} computes dependencies from {src}: {len(order)} nodes to wait for, "
            f"{outstanding} task{'s' if outstanding != 1 else ''} outstanding")
    detail: dict[str, Any] = {
        "roots": [ids[r] for r in roots] + [ids[s] for s in sends],
        "deps": {ids[i]: c for i, c in zip(order, counts, strict=True)},
        "outstanding": outstanding,
        "sends": [ids[s] for s in sends],
        "retain_graph": keep,
    }
    if excluded is not None:
        detail["excluded"] = [ids[s] for s in excluded]
    return text, detail


_FORMAT: dict[str, Callable[[IndexedGraph, LazyEvent, tuple[Any, ...]],
                            tuple[str, dict[str, Any]]]] = {
    "execute": _fmt_execute, "accumulate": _fmt_accumulate, "send_gradient": _fmt_send_gradient,
    "receive_gradient": _fmt_receive, "call_start": _fmt_call_start, "call_end": _fmt_call_end,
    "ack": _fmt_ack, "compute_dependencies": _fmt_compute_dependencies,
}


# ----------------------------------------------------------------------------------------------
# The simulator: one event per step; a snapshot is a clone of its mutable state
# ----------------------------------------------------------------------------------------------

_NO_DETAIL: dict[str, Any] = {}


class _Sim:
    """The mutable state of a replay and the step function. ``emit=False`` skips event building
    (used to re-simulate for ``Replay.state_at``); the state transitions are identical."""

    def __init__(self, g: IndexedGraph, mode: str, emit: bool,
                 arrival: dict[tuple[int, int], list[int]] | None = None) -> None:
        self.g = g
        self.mode = mode
        self.emit = emit
        # Optional observed schedule: (pass, worker) -> send indices in the order their calls
        # started on that worker. Without it, messages are received in global FIFO order.
        self.arrival = arrival or {}
        self.arr_ptr: dict[tuple[int, int], int] = {}
        n, nw = g.n, len(g.workers)
        self.step = -1
        self.pass_index = 0
        self.finished = not g.trace.passes
        self.outcome = "completed"
        # across passes
        self.freed = bytearray(n)
        self.acc_count: dict[int, int] = {}
        self.acc_nonzero: dict[int, bool] = {}
        self.orders: list[list[list[int]]] = []
        self.order_cur: list[list[int]] = []
        self.excluded: list[list[int]] = []
        self.messages_total = 0
        self.error: dict[str, Any] | None = None
        self.hang: dict[str, Any] | None = None
        # per pass (reset by pass_start)
        self.deps: list[int] = [0] * n
        self.visited: list[list[int]] = [[] for _ in range(nw)]  # BFS order, this pass
        self.part: list[list[int]] = [[] for _ in range(nw)]   # participating sends
        self._clear_pass_state()
        self.agenda: deque[tuple[Any, ...]] = deque()
        self.err_text = ""
        self.err_chain: list[int] = []
        if not self.finished:
            self._reset_pass()
            self.agenda.append(("pass_start",))

    # -- snapshots ----------------------------------------------------------------------------
    def clone(self) -> _Sim:
        """Return an independent copy (graph and immutable per-pass lists are shared)."""
        c = _Sim.__new__(_Sim)
        d = self.__dict__
        cd = c.__dict__
        cd.update(d)
        cd["emit"] = False
        for name in ("freed", "nonzero", "ran"):
            cd[name] = bytearray(d[name])
        for name in ("deps", "w_init", "w_done", "w_out", "w_keep", "w_failed", "w_first",
                     "w_unacked", "w_first_inflight", "w_acked_first", "w_left", "msgs", "m_from", "m_to",
                     "m_send", "m_acked", "excluded"):
            cd[name] = list(d[name])
        for name in ("acc_count", "acc_nonzero", "recv_slots", "send_mask"):
            cd[name] = dict(d[name])
        cd["orders"] = [[list(o) for o in per] for per in self.orders]
        cd["order_cur"] = cd["orders"][-1] if self.orders else []
        cd["visited"] = list(self.visited)
        cd["part"] = list(self.part)
        cd["fifo"] = deque(self.fifo)
        cd["arr_ptr"] = dict(self.arr_ptr)
        cd["agenda"] = deque(self.agenda)
        cd["err_chain"] = list(self.err_chain)
        cd["heap"] = self.heap.copy() if self.heap is not None else None
        return c

    def _clear_pass_state(self) -> None:
        """Fresh per-pass state (what a new ``GraphTask`` and empty queues mean here)."""
        g = self.g
        nw = len(g.workers)
        self.nonzero = bytearray(g.n)
        self.ran = bytearray(g.n)
        self.recv_slots: dict[int, int] = {}
        self.send_mask: dict[int, int] = {}
        self.visited = [[] for _ in range(nw)]
        self.w_init = [False] * nw
        self.w_done = [False] * nw
        self.w_out = [0] * nw
        self.w_keep = [False] * nw
        self.w_failed = [False] * nw
        self.w_first = [-1] * nw
        self.w_unacked = [0] * nw
        self.w_first_inflight = [False] * nw
        self.w_acked_first = [False] * nw
        self.w_left = [len(p) for p in self.part]   # participating sends that have not run
        self.msgs: list[dict[str, Any]] = []
        self.m_from: list[int] = []
        self.m_to: list[int] = []
        self.m_send: list[int] = []
        self.m_acked: list[bool] = []
        self.fifo: deque[int] = deque()
        self.calls = 0
        self.cur_call: int | None = None
        self.cur_w = -1
        self.heap: StdPriorityQueue[int] | None = None

    def _reset_pass(self) -> None:
        g = self.g
        nw = len(g.workers)
        if self.mode == "smart":
            flags = lineage_sends(g, g.roots[self.pass_index])
            self.part = [[s for s in g.sends_of[w] if flags[s]] for w in range(nw)]
            self.excluded.append([s for w in range(nw) for s in g.sends_of[w] if not flags[s]])
        else:
            self.part = g.sends_of
            self.excluded.append([])
        self._clear_pass_state()
        self.orders.append([[] for _ in range(nw)])
        self.order_cur = self.orders[-1]

    # -- the step function ----------------------------------------------------------------------
    def advance(self) -> Event | None:
        """Run one step; return its event (``None`` when ``emit`` is off or the replay ended)."""
        if self.finished:
            return None
        self.step += 1
        if self.agenda:
            item = self.agenda.popleft()
            op = item[0]
            if op == "pass_start":
                return self._pass_start()
            if op == "deps":
                return self._compute_dependencies(item[1])
            if op == "root_call":
                return self._root_call()
            if op == "call":
                return self._message_call(item[1])
            if op == "send_gradient":
                return self._send_gradient(item[1], item[2])
            if op == "ack":
                return self._ack(item[1])
            if op == "done":
                return self._worker_done(item[1])
            if op == "error_hop":
                return self._error_hop(item[1])
            if op == "raise":
                return self._raise(item[1], item[2], item[3])
            if op == "pass_end":
                return self._pass_end(item[1])
            raise AssertionError(f"unknown agenda item {op}")
        if self.heap is not None:
            if self.heap:
                return self._run(self.heap.pop())
            return self._call_end()
        if self.fifo:
            return self._receive(self._next_message())
        return self._hang()

    def _next_message(self) -> int:
        """The message received next: the FIFO head, or with an observed schedule the first
        message in FIFO order that is next in its receiver's arrival order."""
        if not self.arrival:
            return self.fifo.popleft()
        for k, mi in enumerate(self.fifo):
            key = (self.pass_index, self.m_to[mi])
            order = self.arrival.get(key)
            if order is None:
                break
            ptr = self.arr_ptr.get(key, 0)
            if ptr < len(order) and order[ptr] == self.m_send[mi]:
                self.arr_ptr[key] = ptr + 1
                del self.fifo[k]
                return mi
        mi = self.fifo.popleft()  # not in the schedule (or it is inconsistent): FIFO
        key = (self.pass_index, self.m_to[mi])
        self.arr_ptr[key] = self.arr_ptr.get(key, 0) + 1
        return mi

    # -- helpers ------------------------------------------------------------------------------
    def _event(self, action: str, worker: int | None, text: str, *, node: int | None = None,
               call: int | None = None, message: dict[str, Any] | None = None,
               detail: dict[str, Any] | None = None) -> Event:
        g = self.g
        return Event(self.step, self.pass_index, action,
                     None if worker is None or worker < 0 else g.workers[worker],
                     None if node is None else g.ids[node], call, message, text,
                     detail if detail is not None else {})

    def _wname(self, w: int) -> str:
        return self.g.workers[w]

    def _names(self, nodes: list[int], limit: int = 3) -> str:
        g = self.g
        names = [g.disp(i) for i in nodes[:limit]]
        if len(nodes) > limit:
            return ", ".join(names) + f" and {len(nodes) - limit} more"
        if len(names) <= 1:
            return "".join(names)
        return ", ".join(names[:-1]) + " and " + names[-1]

    def _queue_detail(self, detail: dict[str, Any]) -> None:
        heap = self.heap
        if heap is None:
            return
        n = len(heap)
        ids = self.g.ids
        detail["queue"] = [ids[i] for i in heap.pop_order(QUEUE_CAP)] if n else []
        detail["queue_len"] = n

    def _check_complete(self, w: int) -> None:
        """Worker ``w`` is done and owes no ack: answer its first message or end the pass."""
        if not self.w_done[w] or self.w_unacked[w] or self.w_failed[w]:
            return
        if w == self.g.initiator:
            self.agenda.appendleft(("pass_end", "completed"))
        elif self.w_first[w] >= 0 and not self.w_acked_first[w]:
            self.w_acked_first[w] = True
            self.agenda.appendleft(("ack", self.w_first[w]))

    # -- 1. the pass starts on the initiator ---------------------------------------------------
    def _pass_start(self) -> Event | None:
        g = self.g
        bp = g.trace.passes[self.pass_index]
        ini = g.initiator
        self.agenda.append(("deps", ini))
        self.agenda.append(("root_call",))
        if not self.emit:
            return None
        roots = [g.ids[r] for r in g.roots[self.pass_index]]
        what = ", ".join(f"`{v}`" for v in bp.root_vars) if bp.root_vars else \
            self._names(g.roots[self.pass_index])
        text = (f"pass {self.pass_index + 1} starts: {self._wname(ini)} calls backward on {what} "
                f"(retain_graph={bp.retain_graph}) in context {g.trace.context_id}")
        detail: dict[str, Any] = {"roots": roots, "retain_graph": bp.retain_graph,
                                  "mode": self.mode}
        if bp.root_vars:
            detail["root_vars"] = list(bp.root_vars)
        if self.mode == "smart":
            detail["excluded_sends"] = [g.ids[s] for s in self.excluded[self.pass_index]]
        return self._event("pass_start", ini, text, detail=detail)

    # -- 2. computeDependencies: BFS from the GraphRoot (initiator) and all local sends --------
    def _compute_dependencies(self, w: int) -> Event | None:
        g = self.g
        deps, targets, mark = self.deps, g.targets, g.mark
        g.stamp += 1
        stamp = g.stamp
        order: list[int] = []
        sources: list[tuple[int, ...]] = []
        is_ini = w == g.initiator
        if is_ini:
            sources.append(tuple(g.roots[self.pass_index]))  # the GraphRoot's edges
        sends = self.part[w]
        for s in sends:
            sources.append(targets[s])
        for es in sources:
            for t in es:
                if t < 0:
                    continue
                if mark[t] != stamp:
                    mark[t] = stamp
                    deps[t] = 1
                    order.append(t)
                else:
                    deps[t] += 1
        k = 0
        while k < len(order):
            x = order[k]
            k += 1
            for t in targets[x]:
                if t < 0:
                    continue
                if mark[t] != stamp:
                    mark[t] = stamp
                    deps[t] = 1
                    order.append(t)
                else:
                    deps[t] += 1
        self.visited[w] = order
        self.w_init[w] = True
        self.w_out[w] = len(sends) + (1 if is_ini else 0)
        if is_ini:
            self.w_keep[w] = g.trace.passes[self.pass_index].retain_graph
        if not self.emit:
            return None
        # the counts change as the pass runs: keep a compact copy for the event
        counts = tuple([deps[i] for i in order])
        roots = tuple(g.roots[self.pass_index]) if is_ini else ()
        part = set(sends)
        excluded = (tuple(x for x in g.sends_of[w] if x not in part)
                    if self.mode == "smart" else None)
        return LazyEvent(self.step, self.pass_index, "compute_dependencies", g.workers[w], None,
                         None, None, g, (roots, tuple(sends), order, counts, self.w_out[w],
                                         self.w_keep[w], excluded))

    # -- 3. call 0: the GraphRoot seeds ones into the roots -------------------------------------
    def _root_call(self) -> Event | None:
        g = self.g
        w = g.initiator
        call = self.calls
        self.calls += 1
        self.cur_call, self.cur_w = call, w
        heap: StdPriorityQueue[int] = StdPriorityQueue()
        self.heap = heap
        deps, key = self.deps, g.key
        pushed: list[int] = []
        decs: list[list[Any]] = []
        for r in g.roots[self.pass_index]:
            d = deps[r] - 1
            deps[r] = d
            self.nonzero[r] = 1
            if d == 0:
                heap.push(r, key[r])
                pushed.append(r)
            if self.emit:
                decs.append([g.ids[r], d])
        # GraphRoot task: +1 counted at compute_dependencies, processed now
        self.w_out[w] += len(pushed) - 1
        if not self.emit:
            return None
        text = f"{self._wname(w)} starts call {call} with the GraphRoot"
        if pushed:
            text += f"; {self._names(pushed)} {'becomes' if len(pushed) == 1 else 'become'} ready"
        else:
            text += "; no root is ready yet"
        detail: dict[str, Any] = {"reason": "graph_root", "decrements": decs,
                                  "pushed": [g.ids[i] for i in pushed]}
        self._queue_detail(detail)
        return self._event("call_start", w, text, call=call, detail=detail)

    def _queue_payload(self) -> tuple[tuple[int, ...], int]:
        """The current call's queue for an event: the first ``QUEUE_CAP`` in pop order, length."""
        heap = self.heap
        if heap is None:
            return (), 0
        n = len(heap)
        if n == 0:
            return (), 0
        if n == 1:
            return (heap.top(),), 1
        return tuple(heap.pop_order(QUEUE_CAP)), n

    # -- 4. pop and run one node of the current call ------------------------------------------
    def _run(self, i: int) -> Event | None:
        g = self.g
        k, w, targets, nrs, flags = g.info[i]
        call = self.cur_call
        self.w_out[w] -= 1
        self.ran[i] = 1
        self.order_cur[w].append(i)
        if k == ACC:
            return self._accumulate(i, w, call)
        if flags:
            if flags & 2:
                fault = g.fault[i]
                if fault.get("kind") == "crash":
                    return self._crash(i, w)
                msg = str(fault.get("message", "error in backward"))
                return self._node_error(i, w, msg)
            if self.freed[i]:
                return self._node_error(i, w, FREED_MESSAGE)
            if not self.w_keep[w]:
                self.freed[i] = 1        # release_variables() after apply without retain_graph
        if k == RECV:
            # RecvRpcBackward::apply sends (grads, context_id, msg_id, retain_graph): next step
            self.agenda.append(("send_gradient", i, call))
            if not self.emit:
                return None
            return LazyEvent(self.step, self.pass_index, "execute", g.workers[w], g.ids[i],
                             call, None, g, (i, False, (), (), (), 0))
        # evaluate_function: decrement each next edge in order; push the ready ones
        deps, key = self.deps, g.key
        heap = self.heap
        assert heap is not None
        nonzero, kinds = self.nonzero, g.kind
        emit = self.emit
        pushed: list[int] = []
        decs: list[int] = []
        if k == SEND:
            self.w_left[w] -= 1
            mask = self.send_mask.get(i, 0)
            zero_in = mask == 0
            j = 0
            for t, nr in zip(targets, nrs, strict=False):
                if t >= 0:
                    d = deps[t] - 1
                    deps[t] = d
                    if (mask >> j) & 1:
                        nonzero[t] = 1
                        if kinds[t] == RECV:
                            self.recv_slots[t] = self.recv_slots.get(t, 0) | (1 << nr)
                    if d == 0:
                        heap.push(t, key[t])
                        pushed.append(t)
                    if emit:
                        decs.append(t)
                        decs.append(d)
                j += 1
        else:
            nz = nonzero[i]
            zero_in = not nz
            for t, nr in zip(targets, nrs, strict=False):
                if t < 0:
                    continue
                d = deps[t] - 1
                deps[t] = d
                if nz:
                    nonzero[t] = 1
                    if kinds[t] == RECV:
                        self.recv_slots[t] = self.recv_slots.get(t, 0) | (1 << nr)
                if d == 0:
                    heap.push(t, key[t])
                    pushed.append(t)
                if emit:
                    decs.append(t)
                    decs.append(d)
        self.w_out[w] += len(pushed)
        if not emit:
            return None
        q, qlen = self._queue_payload()
        return LazyEvent(self.step, self.pass_index, "execute", g.workers[w], g.ids[i], call,
                         None, g, (i, zero_in, tuple(decs), tuple(pushed), q, qlen))

    def _accumulate(self, i: int, w: int, call: int | None) -> Event | None:
        """A captured AccumulateGrad: the gradient goes into the context, never into .grad."""
        g = self.g
        zero = not self.nonzero[i]
        count = self.acc_count.get(i, 0) + 1
        self.acc_count[i] = count
        self.acc_nonzero[i] = self.acc_nonzero.get(i, False) or not zero
        if not self.emit:
            return None
        q, qlen = self._queue_payload()
        return LazyEvent(self.step, self.pass_index, "accumulate", g.workers[w], g.ids[i], call,
                         None, g, (i, zero, count, q, qlen))

    # -- 5. a recv sends its gradients (undefined slots as zeros) -------------------------------
    def _send_gradient(self, r: int, call: int | None) -> Event | None:
        g = self.g
        w = g.worker[r]
        msg_id = g.msg[r]
        to, s = g.target_send(msg_id)
        nd = g.trace.nodes[r]
        if nd.input_shapes is not None:
            nslots = len(nd.input_shapes)
        elif s >= 0:
            nslots = len(g.targets[s])
        else:
            nslots = 1 + max((nr for x in self.visited[w] for t, nr in g.edges(x) if t == r),
                             default=0)
        mask = self.recv_slots.get(r, 0)
        first = to >= 0 and s >= 0 and not self.w_init[to] and not self.w_first_inflight[to]
        if first:
            self.w_first_inflight[to] = True
        message = {"msg_id": msg_id, "label": message_label(msg_id),
                   "context_id": g.trace.context_id,
                   "from": g.workers[w], "to": g.workers[to] if to >= 0 else None,
                   "send": g.ids[s] if s >= 0 else None, "recv": g.ids[r],
                   "shapes": nd.input_shapes, "first": first, "retain_graph": self.w_keep[w],
                   "zero_slots": [j for j in range(nslots) if not (mask >> j) & 1],
                   "pass": self.pass_index}
        mi = len(self.msgs)
        self.msgs.append(message)
        self.m_from.append(w)
        self.m_to.append(to)
        self.m_send.append(s)
        self.m_acked.append(False)
        self.w_unacked[w] += 1
        self.messages_total += 1
        self.fifo.append(mi)
        if not self.emit:
            return None
        return LazyEvent(self.step, self.pass_index, "send_gradient", g.workers[w], g.ids[r],
                         call, message, g, (nslots,))

    # -- 6. a worker receives a gradient message -----------------------------------------------
    def _receive(self, mi: int) -> Event | None:
        g = self.g
        message = self.msgs[mi]
        to, s, frm = self.m_to[mi], self.m_send[mi], self.m_from[mi]
        if s < 0:
            # processBackwardAutogradReq: retrieveSendFunction raises on the receiver; the
            # sender's outstanding RPC fails and its graph task errors.
            err = f"Could not find send function for autograd message id: {message['msg_id']}"
            self.agenda.append(("raise", frm, f"Error on Node {frm}: {err}",
                                g.recv_by_msg.get(message["msg_id"], -1)))
            if not self.emit:
                return None
            where = g.workers[to] if to >= 0 else f"rank {message['msg_id'] >> 48}"
            return self._event("error", to if to >= 0 else None,
                               f"{where} rejects message {message['label']}: {err}",
                               message=message, detail={"error": err, "rpc": True})
        mask = (1 << len(g.targets[s])) - 1
        for j in message["zero_slots"]:
            mask &= ~(1 << j)
        self.send_mask[s] = mask        # setGrads
        first = not self.w_init[to]
        if first:
            # first message for the context here: computeDependencies, answer when done
            self.w_first[to] = mi
            self.w_keep[to] = bool(message["retain_graph"])
            self.agenda.append(("deps", to))
        else:
            # later message: launch a call and answer at once
            self.agenda.append(("ack", mi))
        self.agenda.append(("call", mi))
        if not self.emit:
            return None
        return LazyEvent(self.step, self.pass_index, "receive_gradient", g.workers[to], g.ids[s],
                         None, message, g, (first,))

    def _message_call(self, mi: int) -> Event | None:
        g = self.g
        w, s = self.m_to[mi], self.m_send[mi]
        call = self.calls
        self.calls += 1
        self.cur_call, self.cur_w = call, w
        heap: StdPriorityQueue[int] = StdPriorityQueue()
        heap.push(s, g.key[s])          # incrementOutstandingTasks=false: the send was counted
        self.heap = heap
        if not self.emit:
            return None
        return LazyEvent(self.step, self.pass_index, "call_start", g.workers[w], g.ids[s], call,
                         self.msgs[mi], g, (s,))

    def _call_end(self) -> Event | None:
        g = self.g
        w, call = self.cur_w, self.cur_call
        self.heap = None
        self.cur_call, self.cur_w = None, -1
        if self.w_out[w] == 0 and not self.w_done[w]:
            self.agenda.appendleft(("done", w))
        if not self.emit:
            return None
        return LazyEvent(self.step, self.pass_index, "call_end", g.workers[w], None, call, None,
                         g, (self.w_out[w], self.w_left[w]))

    def _worker_done(self, w: int) -> Event | None:
        self.w_done[w] = True
        self._check_complete(w)
        if not self.emit:
            return None
        n = len(self.part[w])
        sends = "its only send" if n == 1 else f"all {n} sends"
        text = f"{self._wname(w)} is done: {sends} ran and its queues are empty"
        if self.w_unacked[w]:
            text += f"; it still waits for {self.w_unacked[w]} acknowledgement(s)"
        return self._event("worker_done", w, text, detail={"unacked": self.w_unacked[w]})

    def _ack(self, mi: int) -> Event | None:
        g = self.g
        message = self.msgs[mi]
        self.m_acked[mi] = True
        frm, to = self.m_from[mi], self.m_to[mi]
        self.w_unacked[frm] -= 1
        self._check_complete(frm)
        if not self.emit:
            return None
        return LazyEvent(self.step, self.pass_index, "ack", g.workers[to], None, None, message,
                         g, ())

    # -- errors ---------------------------------------------------------------------------------
    def _abort(self, w: int) -> list[int]:
        """Abort ``w``'s graph task: its current call stops; returns the skipped nodes."""
        self.w_failed[w] = True
        skipped: list[int] = []
        if self.cur_w == w and self.heap is not None:
            skipped = self.heap.pop_order(QUEUE_CAP)
            self.heap = None
            self.cur_call, self.cur_w = None, -1
        return skipped

    def _node_error(self, i: int, w: int, msg: str) -> Event | None:
        g = self.g
        call = self.cur_call
        skipped = self._abort(w)
        text_err = f"Error on Node {w}: {msg}"
        self.err_text = text_err
        self.err_chain = [w]
        self.error = {"worker": self._wname(w), "node": g.ids[i], "message": text_err,
                      "pass": self.pass_index, "origin": msg}
        self.agenda.append(("pass_end", "error") if w == g.initiator else ("error_hop", w))
        if not self.emit:
            return None
        text = f"{self._wname(w)} raises in {g.disp(i)} (seq {g.key[i]}): {_clip(msg)}"
        text += "; its backward aborts"
        return self._event("error", w, text, node=i, call=call,
                           detail={"error": text_err, "origin": msg,
                                   "skipped": [g.ids[x] for x in skipped]})

    def _crash(self, i: int, w: int) -> Event | None:
        g = self.g
        call = self.cur_call
        self._abort(w)
        name = self._wname(w)
        self.err_chain = [w]
        if w == g.initiator:
            msg = f"{name} (rank {w}, the initiator) died during the backward pass"
            self.err_text = msg
            self.agenda.append(("pass_end", "error"))
        else:
            self.err_text = ""
            self.agenda.append(("error_hop", w))
            msg = f"{name} (rank {w}) died during the backward pass"
        self.error = {"worker": name, "node": g.ids[i], "message": msg, "pass": self.pass_index,
                      "crash": True, "origin": msg}
        if not self.emit:
            return None
        text = f"{name} crashes while running {g.disp(i)}: the process dies"
        return self._event("crash", w, text, node=i, call=call, detail={"error": msg})

    def _raise(self, w: int, text_err: str, node: int) -> Event | None:
        """An outstanding RPC of ``w`` failed (missing send): ``w``'s graph task errors."""
        g = self.g
        self._abort(w)
        self.err_text = text_err
        self.err_chain = [w]
        self.error = {"worker": self._wname(w), "node": g.ids[node] if node >= 0 else None,
                      "message": text_err, "pass": self.pass_index,
                      "origin": text_err.split(": ", 1)[1]}
        self.agenda.append(("pass_end", "error") if w == g.initiator else ("error_hop", w))
        if not self.emit:
            return None
        text = f"{self._wname(w)}'s gradient RPC fails, so its backward aborts: {_clip(text_err)}"
        return self._event("error", w, text, node=node if node >= 0 else None,
                           detail={"error": text_err})

    def _error_hop(self, child: int) -> Event | None:
        """The error reaches the sender of ``child``'s first message (its outstanding RPC)."""
        g = self.g
        mi = self.w_first[child]
        p = self.m_from[mi]
        crashed = self.error is not None and self.error.get("crash") and not self.err_text
        if crashed:
            inner = (f"RPC to {self._wname(child)} failed: {self._wname(child)} (rank {child}) "
                     "died during the backward pass")
            self.err_text = f"Error on Node {p}: {inner}"
        else:
            self.err_text = f"Error on Node {p}: {self.err_text}"
        self.err_chain.append(p)
        self._abort(p)
        if self.error is not None:
            self.error["message"] = self.err_text
        self.agenda.append(("pass_end", "error") if p == g.initiator else ("error_hop", p))
        if not self.emit:
            return None
        label = self.msgs[mi]["label"]
        if crashed:
            text = (f"{self._wname(p)}'s gradient RPC (message {label}) to "
                    f"{self._wname(child)} fails because {self._wname(child)} died")
        else:
            text = (f"{self._wname(p)} gets the error as the answer to message {label} from "
                    f"{self._wname(child)}: {_clip(self.err_text)}")
        return self._event("error", p, text, message=self.msgs[mi],
                           detail={"error": self.err_text, "from": self._wname(child)})

    # -- 7. nothing can run: the pass hangs -----------------------------------------------------
    def _hang(self) -> Event | None:
        g = self.g
        self.agenda.append(("pass_end", "hang"))
        if not self.emit:
            return None
        from distviz.replay.hang import diagnose

        state = self.state(self.step - 1, None)
        self.hang = diagnose(g.trace, state, graph=g, mode=self.mode,
                             pass_index=self.pass_index)
        waiting = {w: s.waiting_sends for w, s in state.workers.items() if s.waiting_sends}
        text = f"nothing can run any more: {self.hang['summary']}"
        return self._event("hang", g.initiator, text,
                           detail={"waiting_sends": waiting, "summary": self.hang["summary"]})

    def _pass_end(self, outcome: str) -> Event | None:
        g = self.g
        p = self.pass_index
        if outcome == "error" and self.error is not None:
            self.error["chain"] = [self._wname(w) for w in self.err_chain]
            # started (or about to start: a gradient message is in flight to it), not finished,
            # and off the chain: nobody tells it (PyTorch has no failure notification)
            inflight = {self.m_to[mi] for mi in self.fifo}
            self.error["unnotified"] = [
                self._wname(w) for w in range(len(g.workers))
                if ((self.w_init[w] and not self.w_done[w]) or w in inflight)
                and w not in self.err_chain]
        ev: Event | None = None
        if self.emit:
            ini = self._wname(g.initiator)
            if outcome == "completed":
                text = f"pass {p + 1} completes: backward() returns on {ini}"
            elif outcome == "hang":
                text = f"pass {p + 1} hangs: backward() on {ini} never returns"
            else:
                text = (f"pass {p + 1} ends in an error: backward() on {ini} raises "
                        f"{_clip(self.err_text)}")
            detail: dict[str, Any] = {"outcome": outcome}
            if outcome == "error":
                detail["error"] = self.err_text
            ev = self._event("pass_end", g.initiator, text, detail=detail)
        if outcome != "completed":
            self.outcome = outcome
            self.finished = True
        elif p + 1 < len(g.trace.passes):
            self.pass_index += 1
            self._reset_pass()
            self.agenda.append(("pass_start",))
        else:
            self.finished = True
        return ev

    # -- the state a renderer sees ---------------------------------------------------------------
    def state(self, step: int, event: Event | None) -> ReplayState:
        """Build a fresh ``ReplayState`` from the current simulation state."""
        g = self.g
        ids = g.ids
        p = min(self.pass_index, len(self.orders) - 1) if self.orders else 0
        workers: dict[str, WorkerState] = {}
        orders = self.orders[p] if self.orders else [[] for _ in g.workers]
        for w, name in enumerate(g.workers):
            init = self.w_init[w]
            ws = WorkerState(initialized=init)
            if init:
                deps = self.deps
                ws.deps = {ids[i]: deps[i] for i in self.visited[w] if deps[i] > 0}
                ws.waiting_sends = [ids[s] for s in self.part[w] if not self.ran[s]]
            if self.cur_w == w and self.heap is not None:
                ws.queue = [ids[i] for i in self.heap.pop_order()]
                ws.current_call = self.cur_call
            ws.pending_calls = [ids[self.m_send[mi]] for mi in self.fifo
                                if self.m_to[mi] == w and self.m_send[mi] >= 0]
            ws.executed = [ids[i] for i in orders[w]]
            ws.accumulated = {ids[i]: c for i, c in self.acc_count.items() if g.worker[i] == w}
            ws.outstanding = self.w_out[w]
            ws.done = self.w_done[w]
            ws.first_message = self.msgs[self.w_first[w]] if self.w_first[w] >= 0 else None
            ws.unacked = [self.msgs[mi]["label"] for mi in range(len(self.msgs))
                          if self.m_from[mi] == w and not self.m_acked[mi]]
            ws.keep_graph = self.w_keep[w]
            ws.failed = self.w_failed[w]
            ws.acked_first = self.w_acked_first[w]
            workers[name] = ws
        return ReplayState(step=step, pass_index=p, workers=workers,
                           in_flight=[self.msgs[mi] for mi in self.fifo], event=event)


def _ordinal(n: int) -> str:
    if 10 <= n % 100 <= 20:
        suf = "th"
    else:
        suf = {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suf}"


def _clip(text: str, n: int = 160) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


# ----------------------------------------------------------------------------------------------
# The result
# ----------------------------------------------------------------------------------------------

class Replay:
    """The result of replaying a trace: events, per-pass orders, outcome and diagnoses.

    ``outcome`` is ``completed``, ``hang`` or ``error``. ``order[p][worker]`` lists the node ids
    that ran in pass ``p`` on that worker (ops, sends, recvs and AccumulateGrads). ``hang`` is
    ``hang.diagnose``'s dict when the replay hung; ``error`` is ``{"worker", "node", "message",
    "pass", "chain", "unnotified", ...}`` when it ended in an error. ``accumulated`` maps each leaf
    that received a gradient to ``{"count", "zero", "var", "worker"}`` (all passes). ``excluded``
    lists, per pass, the send ids SMART mode left out (empty in FAST mode).
    """

    def __init__(self, trace: Trace, mode: str, graph: IndexedGraph, sim: _Sim,
                 events: list[Event]) -> None:
        self.trace = trace
        self.arrival = sim.arrival
        self.mode = mode
        self.graph = graph
        self.events = events
        self.outcome: str = sim.outcome
        self.hang: dict[str, Any] | None = sim.hang
        self.error: dict[str, Any] | None = sim.error
        ids = graph.ids
        self.order: list[dict[str, list[str]]] = [
            {graph.workers[w]: [ids[i] for i in per[w]] for w in range(len(graph.workers))}
            for per in sim.orders]
        self.accumulated: dict[str, dict[str, Any]] = {
            ids[i]: {"count": c, "zero": not sim.acc_nonzero.get(i, False),
                     "var": trace.nodes[i].var, "worker": graph.workers[graph.worker[i]]}
            for i, c in sim.acc_count.items()}
        self.excluded: list[list[str]] = [[ids[s] for s in ex] for ex in sim.excluded]
        self.messages = sim.messages_total
        self.passes_run = len(sim.orders)
        n = len(events)
        self._interval = max(256, (n * max(graph.n, 1)) // _SNAPSHOT_CELLS + 1)
        self._snapshots: dict[int, _Sim] = {}
        self._snap_keys: list[int] = []
        self._cursor: _Sim | None = None

    # -- state at any step -----------------------------------------------------------------
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
        if cur is not None and base_step <= cur.step <= step:
            sim = cur
        elif k >= 0:
            sim = self._snapshots[base_step].clone()
        else:
            sim = _Sim(self.graph, self.mode, emit=False, arrival=self.arrival)
        while sim.step < step:
            sim.advance()
            if sim.step % self._interval == 0 and sim.step not in self._snapshots:
                self._snapshots[sim.step] = sim.clone()
                self._snap_keys.insert(bisect_right(self._snap_keys, sim.step), sim.step)
        self._cursor = sim
        return sim.state(step, self.events[step] if step >= 0 else None)

    # -- output ------------------------------------------------------------------------------
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
            "hang": self.hang, "error": self.error, "order": self.order,
            "accumulated": self.accumulated, "counts": self.counts(),
        }
        if self.mode == "smart":
            out["excluded_sends"] = self.excluded
        return out

    def summary(self) -> str:
        """Return one sentence: the outcome and where it went wrong."""
        n_pass = len(self.trace.passes)
        what = f"{self.mode.upper()} replay of {n_pass} pass{'es' if n_pass != 1 else ''} on " \
               f"{len(self.trace.workers)} workers"
        if self.outcome == "completed":
            ran = sum(len(v) for per in self.order for v in per.values())
            return (f"{what} completes in {len(self.events)} steps ({ran} node runs, "
                    f"{self.messages} gradient messages).")
        if self.outcome == "hang" and self.hang is not None:
            return f"{what} hangs in pass {self.passes_run}: {self.hang['summary']}"
        if self.error is not None:
            return (f"{what} ends in an error in pass {self.error['pass'] + 1} raised on "
                    f"{self.error['worker']}: {self.error['message']}")
        return f"{what} ends with outcome {self.outcome}."


def replay(trace: Trace, mode: str = "fast",
           arrival: dict[tuple[int, str], list[str]] | None = None) -> Replay:
    """Replay every backward pass of ``trace`` in order and return the ``Replay``.

    ``mode`` is ``"fast"`` (PyTorch's algorithm) or ``"smart"`` (only the roots' lineage of
    sends takes part). A hang or an error ends the replay; later passes do not run.
    ``arrival`` optionally fixes, per ``(pass, worker)``, the order in which that worker's
    sends start their calls (the observed arrival order of gradient messages; see
    ``observed_arrival``); by default messages are received in global FIFO order.
    Raises ``ValueError`` for an unknown mode and ``TraceError`` when a root is not on the
    initiator.
    """
    if mode not in MODES:
        raise ValueError(f"unknown replay mode {mode!r} (expected one of {', '.join(MODES)})")
    # The replay allocates millions of small acyclic objects; the cyclic GC would rescan them
    # all again and again (quadratic in practice), so it is paused while the replay runs.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        g = IndexedGraph(trace)
        arr: dict[tuple[int, int], list[int]] | None = None
        if arrival:
            index = g.index
            widx = {w: k for k, w in enumerate(g.workers)}
            arr = {(p, widx[w]): [index[s] for s in sends if s in index]
                   for (p, w), sends in arrival.items() if w in widx}
        sim = _Sim(g, mode, emit=True, arrival=arr)
        events: list[Event] = []
        append = events.append
        advance = sim.advance
        while not sim.finished:
            ev = advance()
            if ev is not None:
                append(ev)
        return Replay(trace, mode, g, sim, events)
    finally:
        if gc_was_enabled:
            gc.enable()


def observed_arrival(trace: Trace) -> dict[tuple[int, str], list[str]]:
    """Per ``(pass, worker)``, the sends in the order PyTorch ran them (from ``trace.real``):
    with one inter-op thread per worker this is the order their gradient messages arrived."""
    kinds = {n.id: n.kind for n in trace.nodes}
    out: dict[tuple[int, str], list[str]] = {}
    real = trace.real if isinstance(trace.real, dict) else {}
    for ev in real.get("events") or []:
        if isinstance(ev, dict) and kinds.get(str(ev.get("node"))) == "send":
            out.setdefault((int(ev.get("pass", 0)), str(ev.get("worker"))), []).append(
                str(ev["node"]))
    return out
