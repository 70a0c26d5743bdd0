"""The values a view of a trace is made of (pure; no Graphviz, no browser).

A view has a **scope** (which nodes: the whole graph, one worker, one RPC call, or the
neighbourhood of a node) and a **detail** (how they are drawn, least detailed first):

``summary``  the workers as boxes, edges carrying gradient messages and bytes (whole graph only)
``calls``    each worker's nodes grouped into one box per RPC call
``folded``   every node, straight chains of ops inside one worker folded into one box
``full``     every node

``ViewSpec`` is what a user asked for (``detail=None``: pick the most detailed readable one);
``Scope`` is the nodes a scope selects; ``WorkerSummary`` is the summary view's content.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["DETAILS", "Link", "Scope", "ViewSpec", "WorkerStats", "WorkerSummary"]

#: The details of a view, least detailed first.
DETAILS = ("summary", "calls", "folded", "full")


@dataclass(frozen=True, slots=True)
class ViewSpec:
    """What to show: a detail (``None``: the most detailed one that stays readable) and at most
    one scope (``worker``, ``rpc_call`` or ``focus`` with ``depth``)."""

    detail: str | None = None
    worker: str | None = None
    rpc_call: int | None = None
    focus: str | None = None
    depth: int = 2

    @property
    def scoped(self) -> bool:
        """True when the view is one worker, one RPC call or a neighbourhood."""
        return self.worker is not None or self.rpc_call is not None or self.focus is not None


#: what a view shows (``Scope.kind``)
ScopeKind = Literal["all", "worker", "rpc_call", "focus"]


@dataclass(frozen=True, slots=True)
class Scope:
    """The nodes a view shows. ``nodes`` is ``None`` for the whole graph, else the set of node
    ids; ``kind`` is ``all``, ``worker``, ``rpc_call`` or ``focus``; ``title`` says it in words
    (``RPC call 3: rpc_sync(stage_forward) stage0 -> stage1 at line 30``); ``center`` is the
    focus node."""

    kind: ScopeKind
    title: str
    nodes: frozenset[str] | None = None
    center: str | None = None

    def keeps(self, node_id: str) -> bool:
        """True when the view shows ``node_id``."""
        return self.nodes is None or node_id in self.nodes


@dataclass(frozen=True, slots=True)
class WorkerStats:
    """One worker in the summary: its nodes by kind, its RPC calls, its time (real runs)."""

    worker: str
    rank: int
    initiator: bool
    nodes: int
    ops: int
    sends: int
    recvs: int
    leaves: int
    calls_made: int            # RPC calls this worker made
    calls_served: int          # RPC calls other workers made to it
    busy_us: float | None = None      # real run: computing or in the engine
    waiting_us: float | None = None   # real run: waiting for a gradient message

    def to_json(self) -> dict[str, Any]:
        return {"worker": self.worker, "rank": self.rank, "initiator": self.initiator,
                "nodes": self.nodes, "ops": self.ops, "sends": self.sends, "recvs": self.recvs,
                "leaves": self.leaves, "calls_made": self.calls_made,
                "calls_served": self.calls_served, "busy_us": self.busy_us,
                "waiting_us": self.waiting_us}


@dataclass(frozen=True, slots=True)
class Link:
    """Gradient messages from one worker to another (a recv on ``sender`` feeding a send on
    ``receiver``), with the bytes their gradients hold."""

    sender: str
    receiver: str
    messages: int
    bytes: int

    def to_json(self) -> dict[str, Any]:
        return {"from": self.sender, "to": self.receiver, "messages": self.messages,
                "bytes": self.bytes}


@dataclass(frozen=True, slots=True)
class WorkerSummary:
    """The summary view: every worker (initiator first) and the message links between them."""

    workers: tuple[WorkerStats, ...]
    links: tuple[Link, ...]
    total_nodes: int
    wall_us: float | None = None     # the real backward's wall time, when measured
    notes: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {"workers": [w.to_json() for w in self.workers],
                "links": [k.to_json() for k in self.links], "total_nodes": self.total_nodes,
                "wall_us": self.wall_us}
