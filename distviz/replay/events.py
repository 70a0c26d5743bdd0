"""Replay events and their sentences: one way of building every event.

An event read from a replay's ``EventLog`` (``distviz.replay.event_log``, where the engine writes
it as integers) is a ``LazyEvent``: the step, the action, the worker, node, call and message, and
a compact payload of integers and tuples. The sentence (``text``) and the
``detail`` dict are built from the payload when read, by the formatter this module registers
for the action (``FORMAT``). A million-node replay makes millions of events; building every
sentence up front would cost gigabytes, and building them on read always gives the same text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from distviz.replay.graph import RECV, SEND, IndexedGraph
from distviz.replay.values import Message, ReplayEvent
from distviz.trace import message_label, seq_text
from distviz.words import context_label, plural, word_for

__all__ = ["FORMAT", "LazyEvent", "clip", "index_changes", "ordinal", "payload_changes"]

_EV_TEXT = ReplayEvent.__dict__["text"]      # the dataclass slots of ReplayEvent
_EV_DETAIL = ReplayEvent.__dict__["detail"]

Formatter = Callable[[IndexedGraph, "LazyEvent", tuple[Any, ...]], tuple[str, dict[str, Any]]]


class LazyEvent(ReplayEvent):
    """An ``ReplayEvent`` that keeps a compact payload and builds ``text`` and ``detail`` on access.

    Reading ``text``/``detail`` (or ``to_json()``) builds them from the payload and the trace
    each time, with ``FORMAT[action]``. Assigning either one turns the event into a plain stored
    one.
    """

    __slots__ = ("_g", "_a")

    def __init__(self, step: int, pass_index: int, action: str, worker: str | None,
                 node: str | None, call: int | None, message: Message | None,
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
        return FORMAT[self.action](self._g, self, self._a)

    def _materialize(self) -> None:
        if self._a is not None:
            text, detail = self._build()
            _EV_TEXT.__set__(self, text)
            _EV_DETAIL.__set__(self, detail)
            self._a = None

    @property
    def text(self) -> str:
        if self._a is None:
            return str(_EV_TEXT.__get__(self, ReplayEvent))
        return self._build()[0]

    @text.setter
    def text(self, value: str) -> None:
        self._materialize()
        _EV_TEXT.__set__(self, value)

    @property
    def detail(self) -> dict[str, Any]:
        if self._a is None:
            d: dict[str, Any] = _EV_DETAIL.__get__(self, ReplayEvent)
            return d
        return self._build()[1]

    @detail.setter
    def detail(self, value: dict[str, Any]) -> None:
        self._materialize()
        _EV_DETAIL.__set__(self, value)


# -- words ------------------------------------------------------------------------------------------

def ordinal(n: int) -> str:
    """Return ``1st``, ``2nd``, ``3rd``, ``4th``, ``11th``, ``21st`` ..."""
    if 10 <= n % 100 <= 20:
        suf = "th"
    else:
        suf = {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suf}"


def clip(text: str, n: int = 160) -> str:
    """Return ``text`` cut to ``n`` characters (ending in ``...`` when cut)."""
    return text if len(text) <= n else text[: n - 3] + "..."


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


def _message(e: LazyEvent) -> Message:
    m = e.message
    assert m is not None
    return m


# -- 1. the pass starts ---------------------------------------------------------------------------

def _fmt_pass_start(g: IndexedGraph, e: LazyEvent,
                    a: tuple[Any, ...]) -> tuple[str, dict[str, Any]]:
    mode, excluded = a
    bp = g.trace.passes[e.pass_index]
    roots = g.roots[e.pass_index]
    what = ", ".join(f"`{v}`" for v in bp.root_vars) if bp.root_vars else _names_text(g, roots)
    text = (f"pass {e.pass_index + 1} starts: {e.worker} calls backward on {what} "
            f"(retain_graph={bp.retain_graph}) in "
            f"{context_label(g.trace.number, g.trace.context_id)}")
    detail: dict[str, Any] = {"roots": [g.ids[r] for r in roots],
                              "retain_graph": bp.retain_graph, "mode": mode}
    if bp.root_vars:
        detail["root_vars"] = list(bp.root_vars)
    if excluded is not None:
        detail["excluded_sends"] = [g.ids[s] for s in excluded]
    return text, detail


def _fmt_compute_dependencies(g: IndexedGraph, e: LazyEvent,
                              a: tuple[Any, ...]) -> tuple[str, dict[str, Any]]:
    roots, sends, order, counts, outstanding, keep, excluded = a
    ids = g.ids
    nsend = len(sends)
    src = f"the roots and its {plural(nsend, 'send')}" if roots else f"its {plural(nsend, 'send')}"
    if nsend and nsend <= 3:
        src += " (" + ", ".join(f"message {message_label(g.msg[s])}" for s in sends) + ")"
    text = (f"{e.worker} computes dependencies from {src}: {plural(len(order), 'node')} to wait "
            f"for, {plural(outstanding, 'task')} outstanding")
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


# -- 2. tasks (the engine's runs on a fresh ready queue; JSON keeps the name call) -------------------------------------------------------------------------------------

def _fmt_call_start(g: IndexedGraph, e: LazyEvent,
                    a: tuple[Any, ...]) -> tuple[str, dict[str, Any]]:
    if e.message is None:   # task 0: the GraphRoot seeds the roots
        decs, pushed, q, qlen = a
        text = f"{e.worker} starts task {e.call} with the GraphRoot"
        if pushed:
            text += (f"; {_names_text(g, pushed)} "
                     f"{'becomes' if len(pushed) == 1 else 'become'} ready")
        else:
            text += "; no root is ready yet"
        return text, {"reason": "graph_root",
                      "decrements": [[g.ids[decs[j]], decs[j + 1]] for j in range(0, len(decs), 2)],
                      "pushed": [g.ids[i] for i in pushed], "queue": [g.ids[x] for x in q],
                      "queue_len": qlen}
    (s,) = a
    m = e.message
    text = f"{e.worker} starts task {e.call} with {g.names[s]} (message {m.label})"
    return text, {"reason": "message", "label": m.label, "queue": [g.ids[s]], "queue_len": 1}


def _fmt_execute(g: IndexedGraph, e: LazyEvent, a: tuple[Any, ...]) -> tuple[str, dict[str, Any]]:
    i, zero_in, decs, pushed, q, qlen = a
    ids, names, key = g.ids, g.names, g.key
    k = g.kind[i]
    if k == RECV:
        to = g.rank_index.get(g.msg[i] >> 48, -1)
        dest = g.workers[to] if to >= 0 else f"rank {g.msg[i] >> 48}"
        text = (f"{e.worker} runs {names[i]} (seq {seq_text(key[i])}) in task {e.call}; it sends its "
                f"gradient to {dest} (message {message_label(g.msg[i])})")
        return text, {"seq": key[i], "decrements": [], "pushed": [], "queue": [ids[x] for x in q],
                      "queue_len": qlen}
    if k == SEND:
        text = f"{e.worker} runs {names[i]} (message {message_label(g.msg[i])}) in task {e.call}"
    else:
        text = f"{e.worker} runs {names[i]} (seq {seq_text(key[i])}) in task {e.call}"
    if pushed:
        text += _ready_text(g, pushed)
    elif decs:
        text += "; nothing becomes ready yet"
    detail: dict[str, Any] = {
        "seq": key[i],
        "decrements": [[ids[decs[j]], decs[j + 1]] for j in range(0, len(decs), 2)],
        "pushed": [ids[t] for t in pushed]}
    if zero_in == 2:     # a Python backward's None on the way
        detail["undefined"] = True
    elif zero_in:
        detail["zero"] = True
    detail["queue"] = [ids[x] for x in q]
    detail["queue_len"] = qlen
    return text, detail


def _fmt_accumulate(g: IndexedGraph, e: LazyEvent,
                    a: tuple[Any, ...]) -> tuple[str, dict[str, Any]]:
    i, zero, count, q, qlen = a[:5]
    var = g.trace.nodes[i].var
    what = f"the gradient of {var}" if var else f"the gradient of {g.ids[i]}"
    if len(a) > 5 and a[5]:     # undefined: DistAccumulateGradCaptureHook accumulates nothing
        text = (f"{e.worker} runs {g.names[i]}: {what} is undefined (a Python backward "
                f"returned None), so nothing goes into context {g.trace.number}")
        return text, {"var": var, "count": count, "zero": False, "undefined": True,
                      "queue": [g.ids[x] for x in q], "queue_len": qlen}
    text = (f"{e.worker} accumulates {what} into context {g.trace.number} "
            f"({ordinal(count)} time)")
    if zero:
        text += "; it is all zeros (an unused RPC output)"
    return text, {"var": var, "count": count, "zero": zero, "queue": [g.ids[x] for x in q],
                  "queue_len": qlen}


def _fmt_call_end(g: IndexedGraph, e: LazyEvent, a: tuple[Any, ...]) -> tuple[str, dict[str, Any]]:
    outstanding, left = a
    text = f"{e.worker} ends task {e.call}: its queue is empty"
    if left:
        text += (f"; {plural(left, 'send')} still {word_for(left, 'waits', 'wait')} "
                 "for a gradient")
    return text, {"outstanding": outstanding}


def _fmt_worker_done(g: IndexedGraph, e: LazyEvent,
                     a: tuple[Any, ...]) -> tuple[str, dict[str, Any]]:
    nsends, unacked = a
    sends = "its only send" if nsends == 1 else f"all {nsends} sends"
    text = f"{e.worker} is done: {sends} ran and its queues are empty"
    if unacked:
        text += f"; it still waits for {plural(unacked, 'acknowledgement')}"
    return text, {"unacked": unacked}


# -- 3. gradient messages -------------------------------------------------------------------------

def _fmt_send_gradient(g: IndexedGraph, e: LazyEvent,
                       a: tuple[Any, ...]) -> tuple[str, dict[str, Any]]:
    (nslots,) = a
    m = _message(e)
    dest = m.to or f"rank {m.msg_id >> 48} (no such worker)"
    text = f"{e.worker} sends the gradient for message {m.label} to {dest}"
    if m.send is None:
        text += ", which has no send function for it"
    elif m.first:
        text += f"; {dest} has not started this pass, so this is its first message"
    zs = m.zero_slots
    if zs and len(zs) == nslots:
        text += " (all zeros)"
    elif zs:
        text += (f" (zeros for unused {word_for(len(zs), 'output')} "
                 + ", ".join(str(j) for j in zs) + ")")
    return text, {"slots": nslots}


def _fmt_receive(g: IndexedGraph, e: LazyEvent, a: tuple[Any, ...]) -> tuple[str, dict[str, Any]]:
    (first,) = a
    m = _message(e)
    text = f"{e.worker} receives gradient for message {m.label} from {m.sender}"
    if first:
        text += (f"; first message for context {g.trace.number} here, so it computes "
                 "dependencies")
    else:
        text += "; it already runs this backward, so it acknowledges at once"
    return text, {"first": first}


def _fmt_ack(g: IndexedGraph, e: LazyEvent, a: tuple[Any, ...]) -> tuple[str, dict[str, Any]]:
    m = _message(e)
    if m.first:
        text = (f"{e.worker} acknowledges message {m.label} from {m.sender}: it is done and "
                "all gradients it sent were acknowledged")
    else:
        text = (f"{e.worker} acknowledges message {m.label} from {m.sender} at once (not its "
                "first message)")
    return text, {"first": m.first}


# -- 4. errors, crashes, hangs and the end of a pass ----------------------------------------------

def _fmt_error(g: IndexedGraph, e: LazyEvent, a: tuple[Any, ...]) -> tuple[str, dict[str, Any]]:
    how = a[0]
    if how == "node":       # a node raised on this worker
        _, i, origin, err, skipped = a
        text = (f"{e.worker} raises in {g.disp(i)} (seq {seq_text(g.key[i])}): {clip(origin)}; "
                "its backward aborts")
        return text, {"error": err, "origin": origin, "skipped": [g.ids[x] for x in skipped]}
    if how == "reject":     # the receiver has no send function for the message
        _, err = a
        m = _message(e)
        where = e.worker or f"rank {m.msg_id >> 48}"
        return f"{where} rejects message {m.label}: {err}", {"error": err, "rpc": True}
    if how == "raise":      # an outstanding gradient RPC of this worker failed
        _, err = a
        text = f"{e.worker}'s gradient RPC fails, so its backward aborts: {clip(err)}"
        return text, {"error": err}
    _, crashed, child, err = a   # "hop": the error reaches the sender of a first message
    label = _message(e).label
    if crashed:
        text = (f"{e.worker}'s gradient RPC (message {label}) to {child} fails because {child} "
                "died")
    else:
        text = f"{e.worker} gets the error as the answer to message {label} from {child}: {clip(err)}"
    return text, {"error": err, "from": child}


def _fmt_crash(g: IndexedGraph, e: LazyEvent, a: tuple[Any, ...]) -> tuple[str, dict[str, Any]]:
    i, err = a
    return f"{e.worker} crashes while running {g.disp(i)}: the process dies", {"error": err}


def _fmt_hang(g: IndexedGraph, e: LazyEvent, a: tuple[Any, ...]) -> tuple[str, dict[str, Any]]:
    waiting, summary = a
    return (f"nothing can run any more: {summary}",
            {"waiting_sends": {w: list(s) for w, s in waiting.items()}, "summary": summary})


def _fmt_pass_end(g: IndexedGraph, e: LazyEvent, a: tuple[Any, ...]) -> tuple[str, dict[str, Any]]:
    outcome, err = a
    p = e.pass_index + 1
    if outcome == "completed":
        text = f"pass {p} completes: backward() returns on {e.worker}"
    elif outcome == "hang":
        text = f"pass {p} hangs: backward() on {e.worker} never returns"
    else:
        text = f"pass {p} ends in an error: backward() on {e.worker} raises {clip(err)}"
    detail: dict[str, Any] = {"outcome": outcome}
    if outcome == "error":
        detail["error"] = err
    return text, detail


#: The formatter of each action: ``(graph, event, payload) -> (text, detail)``.
FORMAT: dict[str, Formatter] = {
    "pass_start": _fmt_pass_start, "compute_dependencies": _fmt_compute_dependencies,
    "call_start": _fmt_call_start, "execute": _fmt_execute, "accumulate": _fmt_accumulate,
    "send_gradient": _fmt_send_gradient, "receive_gradient": _fmt_receive,
    "call_end": _fmt_call_end, "worker_done": _fmt_worker_done, "ack": _fmt_ack,
    "error": _fmt_error, "crash": _fmt_crash, "hang": _fmt_hang, "pass_end": _fmt_pass_end,
}


def index_changes(g: IndexedGraph, ev: ReplayEvent) -> tuple[list[int], list[int], list[int]]:
    """What ``ev`` changes in the dependency counts, as node indices of ``g``: ``(deps,
    decrements, pushed)`` where ``deps`` is ``[node, count, ...]`` set by
    ``compute_dependencies``, ``decrements`` ``[node, remaining, ...]`` and ``pushed`` the nodes
    that became ready. The same as ``detail["deps"]``, ``detail["decrements"]`` and
    ``detail["pushed"]``, read from the compact payload without building the detail."""
    a = ev._a if isinstance(ev, LazyEvent) else None
    if a is None:
        index = g.index
        d = ev.detail
        deps = [x for nid, c in (d.get("deps") or {}).items() for x in (index[nid], c)]
        decs = [x for nid, c in (d.get("decrements") or []) for x in (index[nid], c)]
        return deps, decs, [index[nid] for nid in d.get("pushed") or []]
    return payload_changes(g, ev.action, ev.message is None, a)


def payload_changes(g: IndexedGraph, action: str, no_message: bool,
                    a: tuple[Any, ...]) -> tuple[list[int], list[int], list[int]]:
    """``index_changes`` of an event given by its action, whether it names no message, and its
    payload (``EventLog.changes`` reads every event of a big replay this way)."""
    if action == "compute_dependencies":
        order, counts = a[2], a[3]
        return [x for pair in zip(order, counts, strict=True) for x in pair], [], []
    if action == "call_start" and no_message:
        return [], list(a[0]), list(a[1])
    if action == "execute" and g.kind[a[0]] != RECV:
        return [], list(a[2]), list(a[3])
    return [], [], []
