"""The nodes a view shows: the whole graph, one worker, one RPC call, or a neighbourhood.

``select_scope(trace, spec)`` turns a ``ViewSpec`` into a ``Scope``; ``resolve_node`` finds the
node a user names (a node id, a variable, or an id without its worker). Walks are iterative.
"""

from __future__ import annotations

import difflib

from distviz.errors import UsageError
from distviz.replay.graph import ACC, IndexedGraph
from distviz.views.groups import call_groups, rpc_call_title
from distviz.views.view import Scope, ViewSpec
from distviz.words import plural

__all__ = ["neighbourhood", "resolve_node", "select_scope"]


def select_scope(trace_graph: IndexedGraph, spec: ViewSpec) -> Scope:
    """Return the ``Scope`` of ``spec`` on the trace behind ``trace_graph``.

    Raises ``UsageError`` (naming the flag) for an unknown worker, an RPC call the trace does
    not have, a node or variable that names no node (or several), or a negative depth.
    """
    g = trace_graph
    given = [f for f, v in (("--worker", spec.worker), ("--rpc-call", spec.rpc_call),
                            ("--focus", spec.focus)) if v is not None]
    if len(given) > 1:
        raise UsageError(f"{given[0]} cannot be used with {given[1]}: a view shows one worker, "
                         "one RPC call or one neighbourhood")
    if spec.worker is not None:
        return _worker_scope(g, spec.worker)
    if spec.rpc_call is not None:
        return _call_scope(g, spec.rpc_call)
    if spec.focus is not None:
        if spec.depth < 0:
            raise UsageError(f"--depth {spec.depth}: expected 0 or more")
        center = resolve_node(g, spec.focus)
        nodes = neighbourhood(g, g.index[center], spec.depth)
        label = spec.focus if spec.focus == center else f"{spec.focus} ({center})"
        return Scope("focus", f"the nodes within {plural(spec.depth, 'edge')} of {label} "
                     f"({len(nodes):,} of {g.n:,} nodes)",
                     frozenset(g.ids[i] for i in nodes), center)
    return Scope("all", f"the whole graph ({g.n:,} nodes)")


def _worker_scope(g: IndexedGraph, worker: str) -> Scope:
    if worker not in g.workers:
        near = difflib.get_close_matches(worker, g.workers, n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise UsageError(f"--worker {worker}: no such worker{hint}; workers: "
                         f"{', '.join(g.workers)}")
    w = g.workers.index(worker)
    members = g.nodes_of[w]
    return Scope("worker", f"worker {worker} ({len(members):,} of {g.n:,} nodes)",
                 frozenset(g.ids[i] for i in members))


def _call_scope(g: IndexedGraph, k: int) -> Scope:
    calls = g.trace.rpc_calls
    if not calls:
        raise UsageError(f"--rpc-call {k}: the trace records no RPC calls")
    if not 0 <= k < len(calls):
        held = f"RPC calls 0 to {len(calls) - 1}" if len(calls) > 1 else "only RPC call 0"
        raise UsageError(f"--rpc-call {k}: the trace has {held}")
    grouping = call_groups(g.trace, g)
    want = next((j for j, grp in enumerate(grouping.groups) if grp.call == k), -1)
    members = [i for i in range(g.n) if grouping.of[i] == want]
    keep = set(members)
    for i in members:   # the leaves it feeds, shared with other calls (weights)
        for t in g.targets[i]:
            if t >= 0 and g.kind[t] == ACC and g.worker[t] == g.worker[i]:
                keep.add(t)
    title = rpc_call_title(calls[k], k)
    return Scope("rpc_call", f"{title} ({len(keep):,} of {g.n:,} nodes)",
                 frozenset(g.ids[i] for i in keep))


#: A node with more neighbours than this is shown in a neighbourhood but not walked through
#: (a stack of 200 losses, a weight every micro-batch uses): its other neighbours are not near.
HUB_DEGREE = 32


def neighbourhood(g: IndexedGraph, center: int, depth: int) -> list[int]:
    """Return the nodes at most ``depth`` edges from ``center`` (either direction, and from a
    recv to the send its gradient goes to and back), ``center`` first, then by distance.

    The walk goes on from the center and from every node but leaves (``AccumulateGrad``: a
    weight is shared by everything that uses it) and hubs (more than ``HUB_DEGREE``
    neighbours): those are shown, not walked through."""
    preds: dict[int, list[int]] = {}
    for i in range(g.n):
        for t in g.targets[i]:
            if t >= 0:
                preds.setdefault(t, []).append(i)
    pair: dict[int, int] = {}
    for m, r in g.recv_by_msg.items():
        s = g.send_by_msg.get(m, -1)
        if s >= 0:
            pair[r] = s
            pair[s] = r
    dist = {center: 0}
    order = [center]
    k = 0
    while k < len(order):
        x = order[k]
        k += 1
        if dist[x] >= depth:
            continue
        near = [t for t in g.targets[x] if t >= 0] + preds.get(x, [])
        if x in pair:
            near.append(pair[x])
        if x != center and (g.kind[x] == ACC or len(near) > HUB_DEGREE):
            continue
        for t in near:
            if t not in dist:
                dist[t] = dist[x] + 1
                order.append(t)
    return order


def resolve_node(g: IndexedGraph, text: str) -> str:
    """Return the id of the node ``text`` names: a node id (``worker1/AddBackward0#3``), a
    variable (a leaf's, a root's or one whose ``grad_fn`` the node is), or an id without its
    worker (``AddBackward0#3``). Raises ``UsageError`` when it names no node or several."""
    if text in g.index:
        return text
    trace = g.trace
    found: list[int] = []
    for bp in trace.passes:
        for root, var in zip(bp.roots, bp.root_vars, strict=False):
            if var == text:
                found.append(g.index[root])
    for i, nd in enumerate(trace.nodes):
        if nd.var == text or text in nd.vars:
            found.append(i)
    if not found:
        found = [i for i, nid in enumerate(g.ids) if nid.split("/", 1)[-1] == text]
    unique = sorted(set(found))
    if len(unique) == 1:
        return g.ids[unique[0]]
    if unique:
        shown = ", ".join(g.ids[i] for i in unique[:4])
        more = f" and {len(unique) - 4:,} more" if len(unique) > 4 else ""
        raise UsageError(f"--focus {text}: names {len(unique):,} nodes ({shown}{more}); give "
                         "one node id")
    names = sorted({v for nd in trace.nodes for v in ([nd.var] if nd.var else []) + nd.vars}
                   | {v for bp in trace.passes for v in bp.root_vars})
    near = difflib.get_close_matches(text, names + g.ids[:5000], n=3)
    hint = f" (did you mean {', '.join(near)}?)" if near else ""
    raise UsageError(f"--focus {text}: no node or variable of that name{hint}; give a node id "
                     "as `distviz graph` shows it, or a variable of the program")

