"""What each drawn node stands for: one trace node, or a collapsed set of them (large graphs).

Above the node budget, linear chains of op nodes inside one worker fold into one box; if still
above budget, each worker is drawn as one summary box per RPC call (or per group of calls).
``plan_boxes`` decides; every walk is iterative.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from distviz.render.dot_text import display_name, sanitize_id
from distviz.trace import Node, Trace, message_label
from distviz.words import plural

__all__ = ["Box", "plan_boxes"]


@dataclass(slots=True)
class Box:
    """One drawn node: a trace node or a collapsed set of them."""

    key: str
    worker: str
    kind: str
    members: list[str]
    lines: list[str] = field(default_factory=list)


def plan_boxes(trace: Trace, full: bool, node_budget: int
               ) -> tuple[dict[str, str], dict[str, Box], str]:
    """Return ``({node id: box key}, {box key: Box}, collapsed)`` where ``collapsed`` is
    ``none``, ``chains``, ``groups`` or ``buckets``; ``full`` never collapses."""
    rep: dict[str, str] = {}
    boxes: dict[str, Box] = {}
    used: set[str] = set()
    for n in trace.nodes:
        base = "n_" + sanitize_id(n.id)
        key, k = base, 2
        while key in used:
            key, k = f"{base}_{k}", k + 1
        used.add(key)
        rep[n.id] = key
    collapsed = "none"
    if not full and len(trace.nodes) > node_budget:
        collapsed = "chains"
        _fold_chains(trace, rep, boxes)
        if len(set(rep.values())) > node_budget:
            rep, boxes, collapsed = _collapse_groups(trace, node_budget)
    for n in trace.nodes:
        key = rep[n.id]
        if key not in boxes:
            boxes[key] = Box(key=key, worker=n.worker, kind=n.kind, members=[n.id])
    return rep, boxes, collapsed


def _fold_chains(trace: Trace, rep: dict[str, str], boxes: dict[str, Box]) -> None:
    """Fold linear chains (2+ op nodes, one in-edge and one out-edge each, one worker)."""
    nodes = trace.node_map()
    indeg: dict[str, int] = {}
    preds: dict[str, str] = {}
    for n in trace.nodes:
        for e in n.next:
            if e is None:
                continue
            indeg[e[0]] = indeg.get(e[0], 0) + 1
            preds[e[0]] = n.id

    def succ(n: Node) -> str | None:
        targets = [e[0] for e in n.next if e is not None]
        return targets[0] if len(targets) == 1 else None

    def foldable(n: Node) -> bool:
        if n.kind != "op" or indeg.get(n.id, 0) != 1:
            return False
        s = succ(n)
        return (s is not None and nodes[s].worker == n.worker
                and nodes[preds[n.id]].worker == n.worker)

    ok = {n.id for n in trace.nodes if foldable(n)}
    for n in trace.nodes:
        if n.id not in ok or preds[n.id] in ok and succ(nodes[preds[n.id]]) == n.id:
            continue  # not a chain start
        chain = [n.id]
        cur = succ(n)
        while cur is not None and cur in ok and cur not in chain[-1:]:
            chain.append(cur)
            cur = succ(nodes[cur])
            if len(chain) > len(nodes):  # defensive: a cycle would never end
                break
        if len(chain) < 2:
            continue
        first, last = nodes[chain[0]], nodes[chain[-1]]
        key = "chain_" + sanitize_id(first.id)
        boxes[key] = Box(key=key, worker=first.worker, kind="chain", members=chain,
                          lines=[f"{plural(len(chain), 'op')}: {display_name(first)} … "
                                 f"{display_name(last)}"])
        for nid in chain:
            rep[nid] = key


def _group_key(n: Node) -> str:
    if n.call is not None:
        return f"call{n.call}"
    if n.msg_id is not None:
        return f"msg{message_label(n.msg_id)}"
    return "rest"


def _group(trace: Trace) -> dict[str, str]:
    """Assign every node a per-worker group: the RPC call (or message) region it belongs to.

    Send and recv nodes carry their call; other nodes join the group of the nearest root or
    send above them (multi-source breadth-first search); the rest form one group per worker.
    """
    nodes = trace.node_map()
    group: dict[str, str] = {}
    queue: deque[str] = deque()
    roots = {r for p in trace.passes for r in p.roots}
    for n in trace.nodes:
        if n.kind in ("send", "recv"):
            group[n.id] = _group_key(n)
        elif n.id in roots:
            group[n.id] = "root"
    for n in trace.nodes:
        if n.id in group and n.kind != "recv":
            queue.append(n.id)
    while queue:
        nid = queue.popleft()
        for e in nodes[nid].next:
            if e is None or e[0] in group or nodes[e[0]].worker != nodes[nid].worker:
                continue
            group[e[0]] = group[nid]
            queue.append(e[0])
    for n in trace.nodes:
        group.setdefault(n.id, "rest")
    return group


def _summary_lines(nodes: Mapping[str, Node], title: str, members: list[str]) -> list[str]:
    counts = {"op": 0, "send": 0, "recv": 0, "accumulate_grad": 0}
    for m in members:
        counts[nodes[m].kind] = counts.get(nodes[m].kind, 0) + 1
    parts = [plural(counts["op"], "op")]
    if counts["send"]:
        parts.append(plural(counts["send"], "send"))
    if counts["recv"]:
        parts.append(plural(counts["recv"], "recv"))
    if counts["accumulate_grad"]:
        parts.append(plural(counts["accumulate_grad"], "leaf", "leaves"))
    return [title, f"{plural(len(members), 'node')}: " + ", ".join(parts)]


def _call_title(trace: Trace, key: str) -> str:
    if key.startswith("call"):
        idx = int(key[4:])
        if 0 <= idx < len(trace.rpc_calls):
            c = trace.rpc_calls[idx]
            return f"call {idx}: {c.func} ({c.api} {c.caller} -> {c.callee})"
        return f"call {idx}"
    if key.startswith("msg"):
        return f"message {key[3:]}"
    return {"root": "backward roots", "rest": "other nodes"}.get(key, key)


def _collapse_groups(trace: Trace, budget: int) -> tuple[dict[str, str], dict[str, Box], str]:
    """Collapse each worker into per-call groups, then into buckets of groups if needed."""
    group = _group(trace)
    nodes = trace.node_map()
    per_worker: dict[str, list[str]] = {w: [] for w in trace.workers}
    members: dict[tuple[str, str], list[str]] = {}
    for n in trace.nodes:
        gk = (n.worker, group[n.id])
        if gk not in members:
            members[gk] = []
            per_worker[n.worker].append(gk[1])
        members[gk].append(n.id)
    rep: dict[str, str] = {}
    boxes: dict[str, Box] = {}
    total_groups = len(members)
    mode = "groups"
    size = 1
    room = max(1, budget - len(trace.workers) - 2)
    if total_groups > room:
        mode = "buckets"
        size = max(2, math.ceil(total_groups / room))
    for w in trace.workers:
        keys = per_worker[w]
        for start in range(0, len(keys), size):
            chunk = keys[start:start + size]
            mem = [m for k in chunk for m in members[(w, k)]]
            if size == 1:
                title = _call_title(trace, chunk[0])
            else:
                title = f"{len(chunk)} groups: {_call_title(trace, chunk[0])} … {_call_title(trace, chunk[-1])}"
            key = f"group_{sanitize_id(w)}_{start // size}"
            boxes[key] = Box(key=key, worker=w, kind="group", members=mem,
                              lines=_summary_lines(nodes, title, mem))
            for m in mem:
                rep[m] = key
    return rep, boxes, mode

