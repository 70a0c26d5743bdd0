"""The HTML viewer's data: the graph and the replay as flat integer arrays.

A 100,000-node replay has some 170,000 events; the page must parse them in well under a second,
so nodes are numbered (their index in ``trace.nodes``) and everything is a flat array of
integers or a table of strings referenced by index:

* per node: ``kind`` (0 op, 1 send, 2 recv, 3 leaf), ``worker``, ``name`` (an index into
  ``names``: ``MulBackward0``, or a leaf's variable), ``seq`` (-1 for leaves), ``group`` (its
  RPC call group, ``distviz.views.call_groups``), ``deps0`` (initial dependencies in the first
  pass, -1: not reached), ``ids`` (the node ids, for search and the side panel);
* ``off``/``next``: each node's next edges as a compressed row (``next[off[i]:off[i+1]]``);
  ``pairs``: ``[recv, send, ...]`` for every message whose two ends exist;
* ``notes``: ``[node, text, ...]`` extra label lines (``msg 1:0``, ``= h``, ``root: loss``,
  a leaf's shape);
* per event: ``ea`` (an index into ``actions``), ``ew`` (worker, -1), ``en`` (node, -1),
  ``ep`` (pass), ``em`` (an index into ``msgs``, -1); ``ed`` maps an event to its changes
  ``[deps, decrements, pushed]`` (``distviz.replay.events.index_changes``), only for events that
  change counts; the sentences are in ``event_texts`` (one per line, another script element).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from distviz.analyses.timing import Timing
from distviz.judge.analysis import Analysis
from distviz.judge.findings import AGREEMENT_JSON_WORDS, Agreement
from distviz.render.dot.text import shape_text
from distviz.replay.event_log import EventLog
from distviz.replay.events import index_changes
from distviz.replay.graph import ACC, IndexedGraph
from distviz.replay.rpc_calls import recv_names
from distviz.replay.values import ACTIONS, Message, ReplayLike
from distviz.trace import Node, NodeKind, Trace, message_label, short_name
from distviz.views.groups import call_groups
from distviz.views.scope import resolve_node
from distviz.views.view import ViewSpec
from distviz.views.worker_summary import ordered_workers, worker_summary

__all__ = ["agreement_words", "critical_path", "event_texts", "viewer_data"]

KIND_CODE = {NodeKind.OP: 0, NodeKind.SEND: 1, NodeKind.RECV: 2, NodeKind.ACCUMULATE_GRAD: 3}

#: Each agreement check in words: (what is compared, when it matches, when it does not).
CHECK_WORDS = {
    "outcome": ("how the backward ends", "the same as PyTorch", "not what PyTorch did"),
    "order": ("the order each worker runs its nodes", "the same as PyTorch",
              "differs from PyTorch"),
    "executed": ("which nodes run", "the same nodes as PyTorch", "other nodes than PyTorch"),
    "gradients": ("the gradients", "equal the single-process reference",
                  "differ from the single-process reference"),
    "leaves": ("which leaves get a gradient", "the same leaves as PyTorch",
               "other leaves than PyTorch"),
    "fifo_order": ("gradient messages arrive", "in the order they were sent",
                   "in another order than they were sent"),
    "exact": ("the order can be compared exactly", "yes: one inter-op thread per worker",
              "no: more than one inter-op thread, so tasks overlap"),
}


def agreement_words(agreement: Agreement) -> list[str]:
    """Each check of ``agreement`` as a sentence (``the gradients: equal the single-process
    reference``; ``... : not compared``), for people rather than as raw keys."""
    out = []
    for key in Agreement.CHECKS:
        what, yes, no = CHECK_WORDS[key]
        value = agreement.check(key)
        out.append(f"{what}: {'not compared' if value is None else yes if value else no}")
    return out


def _notes(trace: Trace, nodes: Sequence[Node], held: dict[int, list[str]]) -> list[Any]:
    """Each node's extra label lines; ``held``: the variables of each recv's RPC result
    (``distviz.replay.rpc_calls.recv_names``, as the pictures and the hang's explanation)."""
    roots: dict[str, list[str]] = {}
    for bp in trace.passes:
        for r, v in zip(bp.roots, bp.root_vars, strict=False):
            roots.setdefault(r, []).append(v)
    notes: list[Any] = []
    for i, nd in enumerate(nodes):
        lines = []
        if nd.msg_id is not None:
            lines.append(f"msg {message_label(nd.msg_id)}")
        if nd.kind == NodeKind.ACCUMULATE_GRAD and nd.shape is not None:
            lines.append(shape_text(nd.shape))
        if nd.id in roots:
            lines.append("root: " + ", ".join(dict.fromkeys(roots[nd.id])))
        elif (names := held.get(i, []) if nd.kind == NodeKind.RECV else nd.vars):
            lines.append("= " + ", ".join(names[:2]) + (" …" if len(names) > 2 else ""))
        if nd.fault:
            lines.append(f"fault: {nd.fault.get('kind', '?')}")
        if lines:
            notes += [i, " · ".join(lines)]
    return notes


def _graph(nodes: Sequence[Node], g: IndexedGraph) -> dict[str, Any]:
    names: dict[str, int] = {}
    name: list[int] = []
    seq: list[int] = []
    off: list[int] = [0]
    nxt: list[int] = []
    for i, nd in enumerate(nodes):
        label = ((nd.var or "AccumulateGrad") if nd.kind == NodeKind.ACCUMULATE_GRAD
                 else short_name(nd.name))
        k = names.get(label)
        if k is None:
            k = names[label] = len(names)
        name.append(k)
        seq.append(-1 if g.kind[i] == ACC else nd.seq)
        nxt.extend(t for t in g.targets[i] if t >= 0)
        off.append(len(nxt))
    pairs: list[int] = []
    for m, r in sorted(g.recv_by_msg.items()):
        _to, s = g.target_send(m)
        if s >= 0:
            pairs += [r, s]
    return {"names": list(names), "name": name, "seq": seq, "off": off, "next": nxt,
            "pairs": pairs, "kind": list(g.kind),   # the graph's codes are KIND_CODE's
            "worker": list(g.worker), "ids": g.ids}


class _Messages:
    """The viewer's message table: one row per message id and pass, ``[label, sender, receiver,
    send, recv]`` as indices."""

    def __init__(self, g: IndexedGraph) -> None:
        self.wix = {w: k for k, w in enumerate(g.workers)}
        self.index = g.index
        self.rows: list[list[Any]] = []
        self._row_of: dict[tuple[int, int], int] = {}

    def row(self, m: Message) -> int:
        """The row of ``m`` (added on first sight)."""
        key = (m.msg_id, m.pass_index)
        k = self._row_of.get(key)
        if k is None:
            wix, index = self.wix, self.index
            k = self._row_of[key] = len(self.rows)
            self.rows.append([m.label, wix.get(m.sender, -1), wix.get(m.to or "", -1),
                              index.get(m.send or "", -1), index.get(m.recv, -1)])
        return k


def _events(replay: ReplayLike, g: IndexedGraph) -> dict[str, Any]:
    if isinstance(replay.events, EventLog):
        return _logged_events(replay.events, g)
    action_code = {a: k for k, a in enumerate(ACTIONS)}
    msgs = _Messages(g)
    wix, index = msgs.wix, msgs.index
    ea, ew, en, ep, em = [], [], [], [], []
    changes: dict[str, list[list[int]]] = {}
    for ev in replay.events:
        ea.append(action_code[ev.action])
        ew.append(wix.get(ev.worker, -1) if ev.worker is not None else -1)
        en.append(index[ev.node] if ev.node is not None and ev.node in index else -1)
        ep.append(ev.pass_index)
        em.append(-1 if ev.message is None else msgs.row(ev.message))
        if ev.action in ("compute_dependencies", "call_start", "execute"):
            deps, decs, pushed = index_changes(g, ev)
            if deps or decs or pushed:
                changes[str(ev.step)] = [deps, decs, pushed]
    return {"actions": list(ACTIONS), "ea": ea, "ew": ew, "en": en, "ep": ep, "em": em,
            "msgs": msgs.rows, "ed": changes}


def _logged_events(log: EventLog, g: IndexedGraph) -> dict[str, Any]:
    """``_events`` read from a replay's columns (its node and worker indices are ``g``'s)."""
    msgs = _Messages(g)
    row_of = [msgs.row(m) for m in log.messages]    # log.messages index -> row
    ea, ep, ew, en, em = (c.tolist() for c in log.columns())
    if row_of:
        em = [row_of[k] if k >= 0 else -1 for k in em]
    changes = {str(k): [deps, decs, pushed] for k, deps, decs, pushed in log.changes()}
    return {"actions": list(ACTIONS), "ea": ea, "ew": ew, "en": en, "ep": ep, "em": em,
            "msgs": msgs.rows, "ed": changes}


def event_texts(replay: ReplayLike) -> str:
    """Every event's sentence, one per line (newlines inside a sentence become spaces)."""
    return "\n".join((ev.text or ev.action).replace("\n", " ") for ev in replay.events)


def critical_path(timing: Timing | None, g: IndexedGraph) -> dict[str, list[int]]:
    """The real run's critical path (all passes): its nodes, and the recvs whose message is on
    it (the message edge starts there), as node indices."""
    nodes: list[int] = []
    recvs: list[int] = []
    for p in timing.passes if timing is not None else ():
        nodes.extend(g.index[n] for n in p.path.nodes if n in g.index and g.index[n] not in nodes)
        for m in p.path.message_ids:
            r = g.recv_by_msg.get(m, -1)
            if r >= 0 and r not in recvs:
                recvs.append(r)
    return {"nodes": nodes, "messages": recvs}


def viewer_data(found: Analysis, spec: ViewSpec | None = None) -> dict[str, Any]:
    """Return the JSON object the viewer's script reads (see the module docstring) for one
    run's analysis: the graph is the replay's, never built again.

    ``spec`` is the view the page opens on (``None``: every node up to 3,000 nodes, else the
    worker summary). The analysis's timing adds the real run's critical path (``critical``)
    and each worker's time to the summary. Raises ``UsageError`` when ``spec`` names a
    worker, RPC call or node the trace does not have.
    """
    trace, replay, agreement, timing = found.trace, found.replay, found.agreement, found.timing
    g = replay.graph
    grouping = call_groups(trace, g)
    deps0 = replay.initial_dependencies(0) if trace.passes else {}
    spec = spec or ViewSpec()
    start: dict[str, Any] = {"detail": spec.detail, "worker": spec.worker,
                             "rpcCall": spec.rpc_call, "depth": spec.depth, "focus": None}
    if spec.focus is not None:
        start["focus"] = g.index[resolve_node(g, spec.focus)]
    if spec.worker is not None and spec.worker not in g.workers:
        from distviz.views.scope import select_scope
        select_scope(g, spec)   # raises the UsageError naming the worker
    hang = replay.hang
    nodes = list(trace.nodes)   # read twice: a compact trace's nodes are built once
    return {
        "title": (trace.scenario.name if trace.scenario is not None else None)
        or "distributed backward",
        "workers": g.workers,
        "order": [g.workers.index(w) for w in ordered_workers(g.workers, trace.initiator)],
        "initiator": g.workers.index(trace.initiator),
        **_graph(nodes, g),
        "notes": _notes(trace, nodes, recv_names(trace, g)),
        "group": list(grouping.of),
        "groups": [[grp.short, grp.title, -1 if grp.call is None else grp.call]
                   for grp in grouping.groups],
        "deps0": [deps0.get(nid, -1) for nid in g.ids],
        "roots": [list(r) for r in g.roots],
        "rootVars": [list(bp.root_vars) for bp in trace.passes],
        **_events(replay, g),
        "outcome": replay.outcome,
        "mode": replay.mode,
        "summaryText": _summary_text(replay),
        "hang": None if hang is None else {
            "summary": hang.summary, "chain": list(hang.chain), "fixes": list(hang.fixes),
            "blocked": [g.index[b.node] for b in hang.blocked_sends if b.node in g.index],
            "blockedText": [f"{b.node} (message {b.label}): {b.reason}"
                            for b in hang.blocked_sends],
            "neverText": [f"{u.node}: {u.reason}" for u in hang.unreachable_recvs]},
        "error": None if replay.error is None else replay.error.to_json(),
        "agreement": None if agreement is None else {
            "text": agreement.text, "status": AGREEMENT_JSON_WORDS[agreement.status],
            "checks": agreement_words(agreement)},
        "summary": worker_summary(g, timing if timing is not None else False).to_json(),
        "critical": critical_path(timing, g),
        "start": start,
    }


def _summary_text(replay: ReplayLike) -> str:
    summary = getattr(replay, "summary", None)
    return str(summary()) if callable(summary) else replay.outcome
