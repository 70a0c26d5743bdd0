"""Which RPC call each node belongs to: the ``calls`` detail, ``--rpc-call N`` and the HTML
viewer's collapse per call all use this one grouping.

A send or a recv belongs to the RPC call that made its message (``trace.rpc_calls``); the roots
form a group of their own; every other node joins the group of the nearest send or root above it
on its own worker (a breadth-first walk along next edges that never crosses a worker or enters a
recv); what nothing reaches forms one ``other`` group per worker.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from distviz.replay.graph import RECV, SEND, IndexedGraph
from distviz.replay.rpc_calls import CallIndex
from distviz.trace import RpcCall, Trace, message_label

__all__ = ["CallGroups", "NodeGroup", "call_groups", "rpc_call_title"]


@dataclass(frozen=True, slots=True)
class NodeGroup:
    """One group: ``call`` indexes ``trace.rpc_calls`` (``None`` for the roots' group, a message
    whose call is unknown, or the rest)."""

    key: str            # call3, msg0:1, roots, other
    title: str          # RPC call 3: rpc_sync(stage_forward) stage0 → stage1 at line 30
    call: int | None
    short: str = ""     # RPC call 3: stage_forward


@dataclass(frozen=True, slots=True)
class CallGroups:
    """``of[i]``: the group of node ``i`` (an index into ``groups``)."""

    groups: tuple[NodeGroup, ...]
    of: tuple[int, ...]


def rpc_call_title(call: RpcCall, k: int) -> str:
    """``RPC call 3: rpc_sync(stage_forward) stage0 → stage1 at line 30, result h``."""
    text = f"RPC call {k}: {call.api}({call.func}) {call.caller} → {call.callee}"
    if call.line is not None:
        text += f" at line {call.line}"
    if call.result_var:
        text += f", result {call.result_var}"
    return text


def call_groups(trace: Trace, g: IndexedGraph | None = None) -> CallGroups:
    """Return the group of every node (see the module docstring). Iterative; linear in the
    graph's size."""
    g = g if g is not None else IndexedGraph(trace)
    calls = CallIndex(trace, g)
    keys: dict[str, int] = {}
    groups: list[NodeGroup] = []

    def group(key: str, title: str, call: int | None, short: str = "") -> int:
        k = keys.get(key)
        if k is None:
            k = keys[key] = len(groups)
            groups.append(NodeGroup(key, title, call, short or title))
        return k

    of = [-1] * g.n
    queue: deque[int] = deque()
    for i in range(g.n):
        if g.kind[i] in (SEND, RECV):
            c = calls.call_of(i)
            if c is not None:
                of[i] = group(f"call{c}", rpc_call_title(trace.rpc_calls[c], c), c,
                              f"RPC call {c}: {trace.rpc_calls[c].func}")
            else:
                label = message_label(g.msg[i])
                of[i] = group(f"msg{label}", f"message {label}", None)
    for p_roots in g.roots:
        for r in p_roots:
            if of[r] < 0:
                of[r] = group("roots", "the backward roots", None)
    for i in range(g.n):
        if of[i] >= 0 and g.kind[i] != RECV:
            queue.append(i)
    targets, worker = g.targets, g.worker
    while queue:
        x = queue.popleft()
        for t in targets[x]:
            if t >= 0 and of[t] < 0 and worker[t] == worker[x]:
                of[t] = of[x]
                queue.append(t)
    rest = -1
    for i in range(g.n):
        if of[i] < 0:
            if rest < 0:
                rest = group("other", "other nodes", None)
            of[i] = rest
    return CallGroups(tuple(groups), tuple(of))
