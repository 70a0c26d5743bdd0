"""Values the replay produces, and the one protocol renderers read a replay through.

These are the only things renderers (terminal, DOT, HTML, Perfetto) read from the replay: typed,
immutable by convention, JSON-serialisable with ``to_json()`` (the shapes ``--json`` and the
trace files have always had), and never importing torch.

The events' actions, in the order they usually appear (``ACTIONS``):

``pass_start``            a backward pass begins on the initiator (``detail.roots``, ``detail.retain_graph``)
``compute_dependencies``  a worker counts dependencies by BFS from its roots and all its sends
                          (``detail.roots``: node ids, ``detail.deps``: {node id: count},
                          ``detail.outstanding``: sends (+1 for the GraphRoot on the initiator))
``call_start``            a call (private ready queue) starts on a worker with ``node`` as first task
                          (``detail.reason``: ``graph_root`` or ``message``)
``execute``               ``node`` runs in ``call`` (``detail.decrements``: [[node id, remaining]],
                          ``detail.pushed``: node ids pushed, ``detail.queue``: queue after, pop order)
``accumulate``            an AccumulateGrad is captured into the context (``detail.var``,
                          ``detail.zero``: the gradient is all zeros, from an unused RPC output)
``send_gradient``         a RecvRpcBackward sends its gradients (``message``)
``receive_gradient``      a worker receives a gradient message for its send (``message``,
                          ``message.first``: first message for the context on that worker)
``call_end``              the call's queue is empty
``worker_done``           every local send has run and the queues are empty on ``worker``
``ack``                   ``worker`` acknowledges a gradient message (``message``): a first
                          message once that worker is done and all its own messages were
                          acknowledged, a later message at once (``message.first`` tells which)
``error``                 a node raised (``detail.error``: the message as that worker reports it)
``crash``                 a worker process died (``crash_backward``)
``hang``                  nothing can run any more and the pass is not complete
``pass_end``              the pass ends (``detail.outcome``)

A ``Message`` is one gradient message: ``label`` is ``sender:counter``, ``send``/``recv`` are
node ids; its JSON is ``{"msg_id", "label", "context_id", "from", "to", "send", "recv",
"shapes", "first", "retain_graph", "zero_slots", "pass"}``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Protocol

from distviz.outcome import OUTCOMES, Mode

__all__ = [
    "ACTIONS", "OUTCOMES", "Accumulation", "BlockedKind", "BlockedSend", "BlockedWorker", "ReplayEvent", "Hang",
    "Message", "PassError", "ReplayLike", "ReplayState", "UnreachableRecv", "WorkerState",
]

ACTIONS = (
    "pass_start", "compute_dependencies", "call_start", "execute", "accumulate",
    "send_gradient", "receive_gradient", "call_end", "worker_done", "ack", "error", "crash",
    "hang", "pass_end",
)


# -- messages and events ----------------------------------------------------------------------

class Message(NamedTuple):
    """One gradient message a ``RecvRpcBackward`` sends to the paired send on another worker."""

    msg_id: int
    label: str                          # ``sender:counter``
    context_id: int
    sender: str                         # the worker that sends the gradient (JSON ``from``)
    to: str | None                      # the worker of the send (None: no such worker)
    send: str | None                    # the send's node id (None: the receiver has none)
    recv: str                           # the recv's node id
    shapes: list[list[int]] | None      # the gradients' shapes, when recorded
    first: bool                         # the receiver's first message for this context
    retain_graph: bool
    zero_slots: tuple[int, ...]         # gradient slots sent as zeros (unused RPC outputs)
    pass_index: int

    def to_json(self) -> dict[str, Any]:
        return {"msg_id": self.msg_id, "label": self.label, "context_id": self.context_id,
                "from": self.sender, "to": self.to, "send": self.send, "recv": self.recv,
                "shapes": self.shapes, "first": self.first, "retain_graph": self.retain_graph,
                "zero_slots": list(self.zero_slots), "pass": self.pass_index}


@dataclass(slots=True)
class ReplayEvent:
    """One replay step. ``step`` counts from 0 over the whole replay (all passes).

    ``detail`` is a plain dict whose keys depend on ``action`` (see the module docstring).
    """

    step: int
    pass_index: int
    action: str
    worker: str | None = None
    node: str | None = None
    call: int | None = None
    message: Message | None = None
    text: str = ""
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"step": self.step, "pass": self.pass_index, "action": self.action,
                               "worker": self.worker}
        if self.node is not None:
            out["node"] = self.node
        if self.call is not None:
            out["call"] = self.call
        if self.message is not None:
            out["message"] = self.message.to_json()
        out["text"] = self.text
        detail = self.detail
        if detail:
            out["detail"] = detail
        return out


# -- the state after a step ---------------------------------------------------------------------

@dataclass(slots=True)
class WorkerState:
    """One worker after a step."""

    initialized: bool = False                               # dependencies computed this pass
    deps: dict[str, int] = field(default_factory=dict)      # pending nodes -> remaining count (> 0)
    queue: list[str] = field(default_factory=list)          # current call's ready queue, pop order
    current_call: int | None = None
    pending_calls: list[str] = field(default_factory=list)  # start nodes of calls not yet run
    waiting_sends: list[str] = field(default_factory=list)  # sends that have not run yet
    executed: list[str] = field(default_factory=list)       # nodes run this pass, in order
    accumulated: dict[str, int] = field(default_factory=dict)  # leaf node id -> times, all passes
    outstanding: int = 0
    done: bool = False
    first_message: Message | None = None   # the message that initialized a remote worker
    unacked: list[str] = field(default_factory=list)  # labels of sent messages not yet acked
    keep_graph: bool = False                      # retain_graph of this worker's graph task
    failed: bool = False                          # its graph task aborted on an error, or it died
    acked_first: bool = False                     # it has answered its first message

    def to_json(self) -> dict[str, Any]:
        first = self.first_message.to_json() if self.first_message is not None else None
        return {"initialized": self.initialized, "deps": self.deps, "queue": self.queue,
                "current_call": self.current_call, "pending_calls": self.pending_calls,
                "waiting_sends": self.waiting_sends, "executed": self.executed,
                "accumulated": self.accumulated, "outstanding": self.outstanding,
                "done": self.done, "first_message": first,
                "unacked": self.unacked, "keep_graph": self.keep_graph,
                "failed": self.failed, "acked_first": self.acked_first}


@dataclass(slots=True)
class ReplayState:
    """The whole simulation after step ``step`` (``-1``: before the first step)."""

    step: int
    pass_index: int
    workers: dict[str, WorkerState]
    in_flight: list[Message] = field(default_factory=list)  # messages sent, not received
    event: ReplayEvent | None = None

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "pass": self.pass_index,
                "workers": {w: s.to_json() for w, s in self.workers.items()},
                "in_flight": [m.to_json() for m in self.in_flight],
                "event": self.event.to_json() if self.event else None}


# -- what a replay ends with ----------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Accumulation:
    """A leaf that received a gradient in the replay (all passes)."""

    count: int          # times its AccumulateGrad ran
    zero: bool          # every gradient it got was all zeros (an unused RPC output)
    var: str | None     # the scenario variable
    worker: str

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "zero": self.zero, "var": self.var, "worker": self.worker}


@dataclass(frozen=True, slots=True)
class PassError:
    """How a pass ended in an error: where it was raised and how far the error travelled.

    ``message`` is what ``backward()`` raises on the initiator (each hop prefixes ``Error on
    Node <rank>: ``), ``origin`` the message where it was raised, ``chain`` the workers it
    travelled through (raiser first), ``unnotified`` the started workers nobody tells;
    ``freed``: the node met saved tensors an earlier pass freed (not saved: the replay's own).
    """

    worker: str
    node: str | None
    message: str
    pass_index: int
    origin: str
    crash: bool = False
    chain: tuple[str, ...] = ()
    unnotified: tuple[str, ...] = ()
    freed: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"worker": self.worker, "node": self.node, "message": self.message,
                               "pass": self.pass_index}
        if self.crash:
            out["crash"] = True
        out["origin"] = self.origin
        out["chain"] = list(self.chain)
        out["unnotified"] = list(self.unnotified)
        return out


#: why a send's gradient never comes (``BlockedSend.kind``)
BlockedKind = Literal["unused", "no_grad", "no_recv", "blocked"]


@dataclass(frozen=True, slots=True)
class BlockedSend:
    """A send that never ran on a worker that started the pass, and why its gradient never comes.

    ``kind``: ``unused`` (its recv is unreachable from the roots), ``no_grad`` (the RPC was made
    under ``torch.no_grad()``: no recv exists), ``no_recv`` (no recv, cause unknown) or
    ``blocked`` (its recv is reachable but itself waits). ``call`` indexes ``trace.rpc_calls``.
    """

    node: str
    worker: str
    msg_id: int
    label: str
    recv: str | None
    recv_worker: str | None
    kind: BlockedKind
    reason: str
    var: str | None = None
    line: int | None = None
    call: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "worker": self.worker, "msg_id": self.msg_id,
                "label": self.label, "recv": self.recv, "recv_worker": self.recv_worker,
                "kind": self.kind, "reason": self.reason, "var": self.var, "line": self.line,
                "call": self.call}


@dataclass(frozen=True, slots=True)
class UnreachableRecv:
    """A recv the roots never reach: it never sends a gradient (``blocks``: the send it starves)."""

    node: str
    worker: str
    vars: tuple[str, ...]
    reason: str
    blocks: str | None

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "worker": self.worker, "vars": list(self.vars),
                "reason": self.reason, "blocks": self.blocks}


@dataclass(frozen=True, slots=True)
class BlockedWorker:
    """A worker that started the pass and never finishes: its blocked sends and unanswered acks."""

    worker: str
    sends: tuple[str, ...]
    acks: tuple[str, ...]
    waiting_for: str

    def to_json(self) -> dict[str, Any]:
        return {"worker": self.worker, "sends": list(self.sends), "acks": list(self.acks),
                "waiting_for": self.waiting_for}


@dataclass(frozen=True, slots=True)
class Hang:
    """Why a pass hangs, in the scenario's terms (``distviz.replay.hang.diagnose``).

    ``chain``: sentences from the cause up to the initiator; ``fixes``: sentences; ``summary``:
    one line.
    """

    pass_index: int
    mode: Mode
    blocked_sends: tuple[BlockedSend, ...]
    unreachable_recvs: tuple[UnreachableRecv, ...]
    blocked_workers: tuple[BlockedWorker, ...]
    chain: tuple[str, ...]
    fixes: tuple[str, ...]
    summary: str

    def to_json(self) -> dict[str, Any]:
        return {"pass": self.pass_index, "mode": self.mode,
                "blocked_sends": [b.to_json() for b in self.blocked_sends],
                "unreachable_recvs": [r.to_json() for r in self.unreachable_recvs],
                "blocked_workers": [w.to_json() for w in self.blocked_workers],
                "chain": list(self.chain), "fixes": list(self.fixes), "summary": self.summary}


# -- the one protocol every renderer accepts ------------------------------------------------------

class ReplayLike(Protocol):
    """What renderers read from a replay (``distviz.replay.result.Replay`` satisfies it)."""

    @property
    def mode(self) -> str: ...

    @property
    def outcome(self) -> str: ...

    @property
    def events(self) -> Sequence[ReplayEvent]: ...

    @property
    def hang(self) -> Hang | None: ...

    @property
    def error(self) -> PassError | None: ...

    @property
    def accumulated(self) -> Mapping[str, Accumulation]: ...

    def state_at(self, step: int) -> ReplayState: ...

    def initial_dependencies(self, pass_index: int = 0) -> Mapping[str, int]: ...
