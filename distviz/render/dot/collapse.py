"""What each drawn node stands for: one trace node, a folded chain, one RPC call's nodes on one
worker, or the nodes a scoped view leaves out.

``plan_boxes`` decides from the view's detail (``full``, ``folded``, ``calls``; ``None``: the
most detailed one under the node budget) and scope; every walk is iterative.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from distviz.render.dot.text import display_name, sanitize_id
from distviz.replay.graph import IndexedGraph
from distviz.trace import Node, NodeKind, Trace
from distviz.views.groups import call_groups
from distviz.views.view import Scope
from distviz.words import plural

__all__ = ["Box", "BoxKind", "Plan", "plan_boxes"]

#: what a drawn box is: one node (its kind), or a collapsed chain, call group or ghost
BoxKind = NodeKind | Literal["chain", "group", "ghost"]


@dataclass(slots=True)
class Box:
    """One drawn node: a trace node or a collapsed set of them (``ghost``: left out of a scoped
    view, one per worker)."""

    key: str
    worker: str
    kind: BoxKind                  # a node kind, or chain, group, ghost
    members: list[str]
    lines: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Plan:
    """``rep``: node id -> box key (every node, ghosts included); ``detail``: what was drawn."""

    rep: dict[str, str]
    boxes: dict[str, Box]
    detail: str


def plan_boxes(trace: Trace, detail: str | None, node_budget: int, scope: Scope | None = None,
               graph: IndexedGraph | None = None) -> Plan:
    """Return the boxes of a picture of ``scope`` (the whole graph by default) at ``detail``.

    ``detail=None`` takes ``full`` when the scope has at most ``node_budget`` nodes, else
    ``folded`` when that is small enough, else ``calls``. Nodes outside the scope that share an
    edge with it are drawn as one ghost box per worker; the others are not drawn.
    """
    keep = [n for n in trace.nodes if scope is None or scope.keeps(n.id)]
    rep: dict[str, str] = {}
    used: set[str] = set()
    for n in keep:
        base = "n_" + sanitize_id(n.id)
        key, k = base, 2
        while key in used:
            key, k = f"{base}_{k}", k + 1
        used.add(key)
        rep[n.id] = key
    boxes: dict[str, Box] = {}
    auto = detail is None
    if detail is None:
        detail = "full" if len(keep) <= node_budget else "folded"
    if detail == "folded":
        _fold_chains(trace, keep, rep, boxes)
        if auto and len(set(rep.values())) > node_budget:
            detail = "calls"
    if detail == "calls":
        rep.clear()
        boxes.clear()
        _collapse_calls(trace, keep, rep, boxes, graph)
    for n in keep:
        key = rep[n.id]
        if key not in boxes:
            boxes[key] = Box(key=key, worker=n.worker, kind=n.kind, members=[n.id])
    if scope is not None and scope.nodes is not None:
        _ghosts(trace, rep, boxes)
    return Plan(rep, boxes, detail)


def _fold_chains(trace: Trace, keep: list[Node], rep: dict[str, str],
                 boxes: dict[str, Box]) -> None:
    """Fold linear chains (2+ op nodes, one in-edge and one out-edge each, one worker)."""
    nodes = {n.id: n for n in keep}
    indeg: dict[str, int] = {}
    preds: dict[str, str] = {}
    for n in keep:
        for e in n.next:
            if e is None or e[0] not in nodes:
                continue
            indeg[e[0]] = indeg.get(e[0], 0) + 1
            preds[e[0]] = n.id

    def succ(n: Node) -> str | None:
        targets = [e[0] for e in n.next if e is not None]
        return targets[0] if len(targets) == 1 and targets[0] in nodes else None

    def foldable(n: Node) -> bool:
        if n.kind != NodeKind.OP or indeg.get(n.id, 0) != 1:
            return False
        s = succ(n)
        return (s is not None and nodes[s].worker == n.worker
                and nodes[preds[n.id]].worker == n.worker)

    ok = {n.id for n in keep if foldable(n)}
    for n in keep:
        if n.id not in ok or preds[n.id] in ok and succ(nodes[preds[n.id]]) == n.id:
            continue  # not a chain start
        chain = [n.id]
        cur = succ(n)
        while cur is not None and cur in ok and len(chain) <= len(nodes):
            chain.append(cur)
            cur = succ(nodes[cur])
        if len(chain) < 2:
            continue
        first, last = nodes[chain[0]], nodes[chain[-1]]
        key = "chain_" + sanitize_id(first.id)
        boxes[key] = Box(key=key, worker=first.worker, kind="chain", members=chain,
                         lines=[f"{plural(len(chain), 'op')}: {display_name(first)} … "
                                f"{display_name(last)}"])
        for nid in chain:
            rep[nid] = key


def _summary_lines(nodes: Mapping[str, Node], title: str, members: list[str]) -> list[str]:
    counts = dict.fromkeys(NodeKind, 0)
    for m in members:
        counts[nodes[m].kind] += 1
    parts = [plural(counts[NodeKind.OP], "op")]
    if counts[NodeKind.SEND]:
        parts.append(plural(counts[NodeKind.SEND], "send"))
    if counts[NodeKind.RECV]:
        parts.append(plural(counts[NodeKind.RECV], "recv"))
    if counts[NodeKind.ACCUMULATE_GRAD]:
        parts.append(plural(counts[NodeKind.ACCUMULATE_GRAD], "leaf", "leaves"))
    return [title, f"{plural(len(members), 'node')}: " + ", ".join(parts)]


def _collapse_calls(trace: Trace, keep: list[Node], rep: dict[str, str], boxes: dict[str, Box],
                    graph: IndexedGraph | None) -> None:
    """One box per (worker, RPC call group), in trace order."""
    grouping = call_groups(trace, graph)
    index = {n.id: i for i, n in enumerate(trace.nodes)} if graph is None else graph.index
    nodes = {n.id: n for n in keep}
    members: dict[tuple[str, int], list[str]] = {}
    for n in keep:
        members.setdefault((n.worker, grouping.of[index[n.id]]), []).append(n.id)
    for (w, gi), mem in members.items():
        grp = grouping.groups[gi]
        key = f"group_{sanitize_id(w)}_{sanitize_id(grp.key)}"
        boxes[key] = Box(key=key, worker=w, kind="group", members=mem,
                         lines=_summary_lines(nodes, grp.short, mem))
        for m in mem:
            rep[m] = key


def _ghosts(trace: Trace, rep: dict[str, str], boxes: dict[str, Box]) -> None:
    """One box per worker for the nodes outside the scope that share an edge with it."""
    outside: dict[str, set[str]] = {}
    nodes = trace.node_map()
    by_msg: dict[int, list[str]] = {}
    for n in trace.nodes:
        if n.msg_id is not None:
            by_msg.setdefault(n.msg_id, []).append(n.id)
    for n in trace.nodes:
        if n.id not in rep:
            continue
        near = [e[0] for e in n.next if e is not None]
        if n.msg_id is not None:
            near += by_msg[n.msg_id]
        for t in near:
            if t not in rep:
                outside.setdefault(nodes[t].worker, set()).add(t)
    for n in trace.nodes:   # the nodes whose next edges lead into the scope
        if n.id in rep:
            continue
        if any(e is not None and e[0] in rep for e in n.next):
            outside.setdefault(n.worker, set()).add(n.id)
    for w in trace.workers:
        mem = sorted(outside.get(w, ()))
        if not mem:
            continue
        key = "ghost_" + sanitize_id(w)
        boxes[key] = Box(key=key, worker=w, kind="ghost", members=mem,
                         lines=[f"{plural(len(mem), 'more node')} on {w}", "(not in this view)"])
        for m in mem:
            rep[m] = key
