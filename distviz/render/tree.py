"""Each worker's graph as a terminal tree, and the summary of a recorded trace (rich values).

Legend: ``deps N`` is the initial FAST dependency count of the node in the pass
(``distviz.replay.graph.initial_dependencies``: one per edge from the ``GraphRoot`` and from
nodes reached by BFS from the roots and every send, so a root starts at 1); ``↺`` marks a node
already shown above (not expanded again); ``[in k]`` the input number of an edge when it is not
0; ``not reached`` nodes that no root or send leads to.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from distviz.outcome import Mode
from distviz.render.terminal_text import more, node_label
from distviz.replay.graph import IndexedGraph, initial_dependencies
from distviz.replay.rpc_calls import recv_names
from distviz.trace import KINDS, Node, NodeKind, Trace, message_label, short_name
from distviz.words import NOTATION, context_label, plural

__all__ = ["render_graph", "render_summary"]

_KINDS = KINDS


def _pair_ends(trace: Trace) -> dict[str, str | None]:
    """Return ``{send or recv id: id of the other end or None}``."""
    out: dict[str, str | None] = {}
    for p in trace.pairs():
        if p["send"] is not None:
            out[p["send"]] = p["recv"]
        if p["recv"] is not None:
            out[p["recv"]] = p["send"]
    return out


def _graph_label(node: Node, deps: int | None, ends: dict[str, str | None],
                 held: Mapping[str, list[str]]) -> Text:
    t = Text()
    if node.kind == NodeKind.ACCUMULATE_GRAD:
        t.append(short_name(node.name), style="green")
        if node.var:
            t.append(f" {node.var}", style="bold green")
        if node.shape is not None:
            t.append(f" {list(node.shape)}", style="dim")
        if node.dtype:
            t.append(f" {node.dtype}", style="dim")
    elif node.kind in (NodeKind.SEND, NodeKind.RECV):
        t.append(node_label(node.id), style="magenta")
        # a recv: the variables its RPC result was assigned to (also a result never used)
        names = held.get(node.id) if node.kind == NodeKind.RECV else node.vars
        if names:
            t.append(f" = {', '.join(names)}", style="dim")
        label = message_label(node.msg_id) if node.msg_id is not None else "?"
        other = ends.get(node.id)
        arrow = "←" if node.kind == NodeKind.SEND else "→"
        t.append(f" {label} {arrow} ")
        if other is None:
            t.append("(no recv: never gets a gradient)" if node.kind == NodeKind.SEND
                     else "(no send)", style="bold red")
        else:
            t.append(other, style="magenta")
    else:
        t.append(node_label(node.id))
        if node.vars:
            t.append(f" = {', '.join(node.vars)}", style="dim")
    if deps is None:
        t.append("  not reached", style="yellow")
    else:
        t.append(f"  deps {deps}", style="cyan")
    return t


def _counts_by_kind(trace: Trace, max_nodes: int) -> RenderableType:
    table = Table(title=f"graph: {plural(len(trace.nodes), 'node')}", title_justify="left")
    table.add_column("worker")
    for k in _KINDS:
        table.add_column(k, justify="right")
    for w in trace.workers:
        counts = Counter(n.kind for n in trace.nodes if n.worker == w)
        table.add_row(w, *(str(counts.get(k, 0)) for k in _KINDS))
    note = Text(f"{plural(len(trace.nodes), 'node')} is more than max_nodes={max_nodes}; showing counts "
                "by kind. Use `distviz export TRACE --format svg|html` for the whole graph.",
                style="dim")
    return Group(table, note)


def render_graph(trace: Trace, max_nodes: int = 200, *, pass_index: int = 0,
                 mode: Mode = Mode.FAST) -> RenderableType:
    """Return each worker's graph as a rich ``Tree`` (one per worker), or a summary when big.

    Tree roots are the pass roots (initiator) then the sends by message id, then nodes nothing
    reaches. Children follow next edges in PyTorch's order; a node reached again is shown as a
    ``↺`` reference, not expanded. Labels carry the initial ``deps`` count of pass
    ``pass_index`` in ``mode`` (see the module docstring), send/recv pairs with both ends
    (``SendRpcBackward#2 1:0 ← worker0/RecvRpcBackward#0``), leaves with their variable,
    shape and dtype, and ops and recvs with the variables they produced (``MulBackward0#1 =
    t5``, ``RecvRpcBackward#0 = t3``: an RPC result). Walks with an explicit stack (no recursion), so deep graphs are fine. Above
    ``max_nodes`` nodes it returns per-worker counts by kind and a note.
    """
    if len(trace.nodes) > max_nodes:
        return _counts_by_kind(trace, max_nodes)
    deps = initial_dependencies(trace, pass_index, mode)
    roots = set(trace.passes[pass_index].roots) if trace.passes else set()
    legend = Text("notation: " + "; ".join(f"{shown} {meaning.split(':', 1)[-1].strip()}"
                                           if shown in ("[in 1]", "↺") else f"{shown} {meaning}"
                                           for shown, meaning in NOTATION
                                           if shown in ("#3", "~1", "1:0", "[in 1]", "↺")),
                  style="dim")
    g = IndexedGraph(trace)
    held = {g.ids[i]: names for i, names in recv_names(trace, g).items()}
    return Group(*(_worker_tree(trace, w, deps, roots, held) for w in trace.workers), legend)


def _worker_tree(trace: Trace, w: str, deps: Mapping[str, int], roots: set[str],
                 held: Mapping[str, list[str]]) -> Tree:
    nodes = trace.node_map()
    ends = _pair_ends(trace)
    mine = [n for n in trace.nodes if n.worker == w]
    tree = Tree(Text(f"{w} ({plural(len(mine), 'node')})", style="bold"), guide_style="dim")
    starts = [n.id for n in mine if n.id in roots]
    starts += [n.id for n in sorted((n for n in mine if n.kind == NodeKind.SEND),
                                    key=lambda n: n.msg_id or 0)]
    shown: set[str] = set()
    # explicit stack of (parent tree, node id, input_nr); reversed so edge order is kept
    stack: list[tuple[Tree, str, int]] = [(tree, s, 0) for s in reversed(starts)]
    pending_unreached = [n.id for n in mine if n.id not in deps]
    while True:
        if not stack:
            # nodes nothing reaches: show each not yet shown as its own root
            while pending_unreached and pending_unreached[0] in shown:
                pending_unreached.pop(0)
            if not pending_unreached:
                break
            stack.append((tree, pending_unreached.pop(0), 0))
        parent, nid, input_nr = stack.pop()
        node = nodes[nid]
        prefix = Text(f"[in {input_nr}] ", style="dim") if input_nr else Text()
        if nid in shown:
            ref = prefix + Text(f"↺ {node_label(nid)}", style="dim")
            ref.append(" (shown above)", style="dim")
            parent.add(ref)
            continue
        shown.add(nid)
        branch = parent.add(prefix + _graph_label(node, deps.get(nid), ends, held))
        for e in reversed(node.next):
            if e is not None:
                stack.append((branch, e[0], e[1]))
    return tree


def render_summary(trace: Trace, *, max_items: int = 20) -> RenderableType:
    """Return a summary of a recorded trace: per worker its nodes by kind and its leaves
    (variable, shape, dtype), then every send/recv pair with both ends. Lists longer than
    ``max_items`` end with ``… N more``."""
    head = Text(f"{plural(len(trace.nodes), 'node')} on {plural(len(trace.workers), 'worker')}",
                style="bold")
    head.append(f" · initiator {trace.initiator} · "
                f"{context_label(trace.number, trace.context_id)}"
                f" · {plural(len(trace.passes), 'backward pass', 'backward passes')}")
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    table.add_column("worker")
    table.add_column("nodes by kind")
    table.add_column("leaves (var shape dtype)")
    for w in trace.workers:
        mine = [n for n in trace.nodes if n.worker == w]
        counts = Counter(n.kind for n in mine)
        kinds = ", ".join(f"{k} {counts[k]}" for k in _KINDS if counts.get(k))
        leaves = []
        for n in mine:
            if n.kind != NodeKind.ACCUMULATE_GRAD:
                continue
            shape = "" if n.shape is None else " " + (str(list(n.shape)) if n.shape else "[]")
            leaves.append(f"{n.var or node_label(n.id)}{shape} {n.dtype or ''}".rstrip())
        table.add_row(w, f"{len(mine)}: {kinds}" if mine else "0",
                      "\n".join(more(leaves, max_items)) or "—")
    return Group(head, table, _pairs_table(trace, max_items))


def _pairs_table(trace: Trace, max_items: int) -> RenderableType:
    pairs = trace.pairs()
    if not pairs:
        return Text("no send/recv pairs (no RPC in the context)", style="dim")
    msgs = Table(title="send/recv pairs", title_justify="left", show_edge=False, pad_edge=False,
                 box=None, header_style="bold")
    msgs.add_column("message")
    msgs.add_column("send (gets the gradient)")
    msgs.add_column("")
    msgs.add_column("recv (sends it)")
    for p in pairs[:max_items]:
        msgs.add_row(message_label(p["msg_id"]), p["send"] or Text("(none)", style="red"), "←",
                     p["recv"] or Text("(none)", style="red"))
    if len(pairs) > max_items:
        msgs.add_row(f"… {len(pairs) - max_items} more", "", "", "")
    return msgs

