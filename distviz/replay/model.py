"""Values the replay produces: events, per-step state and the result of a whole replay.

These are the only things renderers (terminal, DOT, HTML, Perfetto) read from the replay. They are
plain data, JSON-serialisable with ``to_json()``, and never import torch.

Event actions, in the order they usually appear (``ACTIONS``):

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

A ``message`` is ``{"msg_id", "label", "context_id", "from", "to", "send", "recv", "shapes",
"first"}`` where ``label`` is ``sender:counter`` and ``send``/``recv`` are node ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ACTIONS = (
    "pass_start", "compute_dependencies", "call_start", "execute", "accumulate",
    "send_gradient", "receive_gradient", "call_end", "worker_done", "ack", "error", "crash",
    "hang", "pass_end",
)
OUTCOMES = ("completed", "hang", "error")


@dataclass(slots=True)
class Event:
    """One replay step. ``step`` counts from 0 over the whole replay (all passes)."""

    step: int
    pass_index: int
    action: str
    worker: str | None = None
    node: str | None = None
    call: int | None = None
    message: dict[str, Any] | None = None
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
            out["message"] = self.message
        out["text"] = self.text
        if self.detail:
            out["detail"] = self.detail
        return out


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
    # added by the replay engine (fast.py); renderers may ignore them
    first_message: dict[str, Any] | None = None  # the message that initialized a remote worker
    unacked: list[str] = field(default_factory=list)  # labels of sent messages not yet acked
    keep_graph: bool = False                      # retain_graph of this worker's graph task
    failed: bool = False                          # its graph task aborted on an error, or it died
    acked_first: bool = False                     # it has answered its first message

    def to_json(self) -> dict[str, Any]:
        return {"initialized": self.initialized, "deps": self.deps, "queue": self.queue,
                "current_call": self.current_call, "pending_calls": self.pending_calls,
                "waiting_sends": self.waiting_sends, "executed": self.executed,
                "accumulated": self.accumulated, "outstanding": self.outstanding,
                "done": self.done, "first_message": self.first_message,
                "unacked": self.unacked, "keep_graph": self.keep_graph,
                "failed": self.failed, "acked_first": self.acked_first}


@dataclass(slots=True)
class ReplayState:
    """The whole simulation after step ``step`` (``-1``: before the first step)."""

    step: int
    pass_index: int
    workers: dict[str, WorkerState]
    in_flight: list[dict[str, Any]] = field(default_factory=list)  # messages sent, not received
    event: Event | None = None

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "pass": self.pass_index,
                "workers": {w: s.to_json() for w, s in self.workers.items()},
                "in_flight": self.in_flight,
                "event": self.event.to_json() if self.event else None}
