"""The distributed autograd graph as Graphviz DOT text (pure: no Graphviz needed to build it).

``to_dot`` draws one trace, optionally in the state after one replay step; ``frames`` yields one
DOT text per replay step; ``build_dot`` returns the DOT text together with the id maps the HTML
viewer needs (trace node id -> SVG ``<g id>``, message id -> SVG edge id).

The output is deterministic: the same trace and replay give byte-identical text. Every walk uses
explicit stacks or queues, never recursion, so graphs of any depth render. Collapsing large
graphs is in ``distviz.render.dot.collapse``, quoting and names in ``distviz.render.dot.text``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from distviz.analyses.timing import Timing
from distviz.render.dot.collapse import Box, plan_boxes
from distviz.render.dot.style import (
    BLOCKED_COLOR,
    CURRENT_COLOR,
    KIND_STYLE,
    MESSAGE_COLOR,
    NEVER_COLOR,
    STATE_FILL,
    legend,
)
from distviz.render.dot.text import DotGraph, attrs, dot_quote, node_title, sanitize_id
from distviz.replay.graph import IndexedGraph, initial_dependencies
from distviz.replay.rpc_calls import recv_names
from distviz.replay.values import ReplayEvent, ReplayLike
from distviz.trace import Node, NodeKind, Trace, message_label
from distviz.views.view import Scope
from distviz.views.worker_summary import ordered_workers

__all__ = ["DEFAULT_NODE_BUDGET", "DETAIL_WORDS", "DotGraph", "build_dot", "frames",
           "initial_deps", "node_states", "to_dot"]

DEFAULT_NODE_BUDGET = 1500
NSLIMIT_ABOVE = 1000  # drawn nodes above which the x-coordinate network simplex is capped

MESSAGE_LABELS_UP_TO = 40   # message edges drawn with their label (above: the nodes say it)


# -- graph facts ---------------------------------------------------------------------------

def initial_deps(trace: Trace, replay: ReplayLike | None = None,
                 pass_index: int = 0) -> Mapping[str, int]:
    """Return the initial dependency count of every node in pass ``pass_index``
    (``distviz.replay.graph.initial_dependencies``, in the replay's mode when one is given).
    Nodes no root or send reaches are absent."""
    if replay is not None:
        return replay.initial_dependencies(pass_index)
    return initial_dependencies(trace, pass_index) if trace.passes else {}


def node_states(trace: Trace, replay: ReplayLike, step: int) -> tuple[dict[str, str], str | None,
                                                                      dict[str, int]]:
    """Return ``({node id: state}, current node id, {node id: remaining deps})`` after ``step``.

    States: ``executed``, ``ready`` (queued or about to start a task), ``waiting`` (dependencies
    remain), ``blocked`` (a send that can never run: the replay hung), ``never`` (from the hang
    on: any other node that did not run in the hung pass); absent means untouched.
    """
    state = replay.state_at(step)
    states: dict[str, str] = {}
    remaining: dict[str, int] = {}
    for ws in state.workers.values():
        for nid, count in ws.deps.items():
            if count > 0:
                states[nid] = "waiting"
                remaining[nid] = count
        for nid in ws.pending_calls:
            states[nid] = "ready"
        for nid in ws.queue:
            states[nid] = "ready"
        for nid in ws.executed:
            states[nid] = "executed"
    hang = replay.hang
    hang_step = next((ev.step for ev in replay.events if ev.action == "hang"), None)
    if hang is not None and hang_step is not None and step >= hang_step:
        for b in hang.blocked_sends:
            states[b.node] = "blocked"
        for n in trace.nodes:
            if n.id not in states or states[n.id] == "waiting":
                states[n.id] = "never"
    ev = state.event
    current = ev.node if ev is not None else None
    return states, current, remaining


# -- building --------------------------------------------------------------------------------

@dataclass(slots=True)
class _StepView:
    """What a picture of one replay step adds: node states, the current node and message."""

    states: dict[str, str]
    remaining: dict[str, int]
    current: str | None
    event: ReplayEvent | None

    @classmethod
    def of(cls, trace: Trace, replay: ReplayLike | None, step: int | None) -> _StepView:
        if replay is None:
            return cls({}, {}, None, None)
        if step is None:
            if replay.outcome != "hang" or not replay.events:
                return cls({}, {}, None, None)
            # a hung replay's picture shows how it ends: what ran, what never runs
            states, _current, remaining = node_states(trace, replay, len(replay.events) - 1)
            return cls(states, remaining, None, None)
        states, current, remaining = node_states(trace, replay, step)
        return cls(states, remaining, current, replay.events[step] if step >= 0 else None)

    def message_id(self) -> int | None:
        m = self.event.message if self.event is not None else None
        return m.msg_id if m is not None else None


def _pass_of(replay: ReplayLike | None, step: int | None) -> int:
    """The pass a picture shows the dependency counts of: the step's (else the first)."""
    if replay is None or step is None or step < 0:
        return 0
    return replay.events[step].pass_index


DETAIL_WORDS = {"full": "every node", "folded": "chains of ops folded",
                "calls": "one box per RPC call on each worker", "summary": "the worker summary"}


def build_dot(trace: Trace, replay: ReplayLike | None = None, step: int | None = None,
              full: bool = False, node_budget: int = DEFAULT_NODE_BUDGET, *,
              detail: str | None = None, scope: Scope | None = None,
              graph: IndexedGraph | None = None, timing: Timing | None | bool = True
              ) -> DotGraph:
    """Build the DOT text and id maps; see ``to_dot`` for the picture's legend.

    ``detail`` is ``full``, ``folded``, ``calls`` or ``summary`` (``None``: ``full`` up to
    ``node_budget`` nodes, else folded or per call; ``full=True`` is ``detail="full"``);
    ``scope`` limits the picture to some nodes (``distviz.views.select_scope``); ``graph`` and
    ``timing`` (the worker summary's times) are the run's analysis's when it is made (else the
    graph is the replay's or built here, and the timing is analysed here). Raises
    ``ValueError`` when ``step`` is given without a replay or is out of range.
    """
    if step is not None:
        if replay is None:
            raise ValueError("step needs a replay")
        if not -1 <= step < len(replay.events):
            raise ValueError(f"step {step} is out of range (the replay has steps 0.."
                             f"{len(replay.events) - 1})")
    if full:
        detail = "full"
    if detail == "summary":
        from distviz.render.dot.summary import summary_dot
        return summary_dot(trace, replay, step, graph=graph, timing=timing)
    plan = plan_boxes(trace, detail, node_budget, scope, graph)
    rep, boxes = plan.rep, plan.boxes
    view = _StepView.of(trace, replay, step)
    deps = initial_deps(trace, replay, _pass_of(replay, step))
    drawn = sum(1 for b in boxes.values() if b.kind != "ghost")
    title = _title(trace, scope, plan.detail, drawn, replay, view)
    out = _header(len(boxes), title)
    g = graph if graph is not None else getattr(replay, "graph", None) or IndexedGraph(trace)
    held = {g.ids[i]: names for i, names in recv_names(trace, g).items()}
    out.extend(_clusters(trace, rep, boxes, deps, view, held))
    out.extend(_local_edges(trace, rep, plan.detail != "full"))
    message_edges, lines = _message_edges(trace, rep, view.message_id())
    out.extend(lines)
    out.extend(legend(view.states, any(b.kind == "ghost" for b in boxes.values())))
    out.append("}")
    node_ids = {n.id: rep[n.id] for n in trace.nodes if n.id in rep}
    return DotGraph(source="\n".join(out) + "\n", node_ids=node_ids, message_edges=message_edges,
                    total_nodes=len(trace.nodes), drawn_nodes=drawn, detail=plan.detail,
                    title=title)


def _title(trace: Trace, scope: Scope | None, detail: str, drawn: int,
           replay: ReplayLike | None, view: _StepView) -> str:
    """The picture's title: the step's sentence, the hang, and what the view shows."""
    lines: list[str] = []
    if view.event is not None:
        lines.append(f"step {view.event.step}: {view.event.text or view.event.action}")
    elif view.states and replay is not None and replay.hang is not None:
        lines.append(f"the replay hangs: {replay.hang.summary}")
    shown = scope.title if scope is not None and scope.kind != "all" else ""
    if detail != "full" or shown:
        what = shown or f"the whole graph ({len(trace.nodes):,} nodes)"
        lines.append(f"view: {what}, {DETAIL_WORDS[detail]} ({drawn:,} boxes)")
    return "\n".join(lines)


def _header(drawn: int, title: str) -> list[str]:
    gattrs: dict[str, str | int | float] = {
        "rankdir": "TB", "newrank": "true", "compound": "true", "fontname": "Helvetica", "fontsize": 12,
        "nodesep": 0.25, "ranksep": 0.35, "outputorder": "edgesfirst",
    }
    if drawn > NSLIMIT_ABOVE:
        gattrs["nslimit"] = 1
        gattrs["nslimit1"] = 1
    if title:
        gattrs["label"] = title
        gattrs["labelloc"] = "t"
    return ["digraph distviz {", "  graph " + attrs(gattrs) + ";",
            '  node [fontname="Helvetica", fontsize=10, style="filled", penwidth=1];',
            '  edge [color="#555555", arrowsize=0.6];']


def _clusters(trace: Trace, rep: Mapping[str, str], boxes: Mapping[str, Box],
              deps: Mapping[str, int], view: _StepView,
              held: Mapping[str, list[str]]) -> list[str]:
    """One cluster per worker (the initiator first) with its boxes, in trace order; the
    initiator's starts with the backward call that feeds the roots. ``held``: the variables
    each recv's RPC result went to (``distviz.replay.rpc_calls.recv_names``)."""
    nodes = trace.node_map()
    by_worker: dict[str, list[Box]] = {w: [] for w in ordered_workers(trace.workers,
                                                                      trace.initiator)}
    emitted: set[str] = set()
    for n in trace.nodes:
        key = rep.get(n.id)
        if key is not None and key not in emitted:
            emitted.add(key)
            by_worker.setdefault(n.worker, []).append(boxes[key])
    root_vars = _root_vars(trace)
    out: list[str] = []
    for w, wboxes in by_worker.items():
        if not wboxes:
            continue
        cid = "cluster_" + sanitize_id(w)
        rank = trace.workers.index(w) if w in trace.workers else -1
        label = f"{w} (rank {rank})" + (" · initiator" if w == trace.initiator else "")
        out.append(f"  subgraph {dot_quote(cid)} {{")
        out.append("    graph " + attrs({
            "id": cid, "label": label, "style": "rounded", "color": "#868e96",
            "fontsize": 14}) + ";")
        if w == trace.initiator:
            out.extend(_graph_root(trace, rep, root_vars))
        for box in wboxes:
            out.append("    " + dot_quote(box.key) + " " + attrs(
                _box_attrs(box, nodes, deps, view, root_vars, held)) + ";")
        out.append("  }")
    return out


def _root_vars(trace: Trace) -> dict[str, list[str]]:
    """``{root node id: [variable, ...]}`` over every pass."""
    out: dict[str, list[str]] = {}
    for bp in trace.passes:
        for root, var in zip(bp.roots, bp.root_vars, strict=False):
            if var not in out.setdefault(root, []):
                out[root].append(var)
    return out


def _graph_root(trace: Trace, rep: Mapping[str, str], root_vars: Mapping[str, list[str]]
                ) -> list[str]:
    """The backward call on the initiator, drawn first, with an edge to each drawn root."""
    roots = [r for bp in trace.passes for r in bp.roots if r in rep]
    if not roots:
        return []
    names = [v for bp in trace.passes for v in bp.root_vars] or ["roots"]
    label = f"backward([{', '.join(dict.fromkeys(names))}])"
    out = ["    " + dot_quote("graph_root") + " " + attrs({
        "id": "graph_root", "label": label, "shape": "oval", "style": "dashed",
        "color": "#495057", "fontcolor": "#495057"}) + ";"]
    for key in dict.fromkeys(rep[r] for r in roots):
        out.append(f"    {dot_quote('graph_root')} -> {dot_quote(key)} "
                   + attrs({"id": f"e_graph_root_{key}", "style": "dotted"}) + ";")
    return out


def _local_edges(trace: Trace, rep: Mapping[str, str], merge: bool) -> list[str]:
    """Gradient-flow edges (node -> next function), deduplicated after collapsing."""
    nodes = trace.node_map()
    seen_edges: set[tuple[str, str]] = set()
    out: list[str] = []
    for n in trace.nodes:
        src = rep.get(n.id)
        if src is None:
            continue
        for slot, e in enumerate(n.next):
            if e is None or e[0] not in rep:
                continue
            dst = rep[e[0]]
            if src == dst:
                continue
            if merge or src.startswith("ghost_") or dst.startswith("ghost_"):
                if (src, dst) in seen_edges:
                    continue
                seen_edges.add((src, dst))
                eid = f"e_{src}__{dst}"
            else:
                eid = f"e_{src}_{slot}"
            eattrs: dict[str, str | int | float] = {"id": eid}
            if nodes[e[0]].worker != n.worker:
                eattrs.update({"color": "#555555", "style": "bold"})
            if src.startswith("ghost_") or dst.startswith("ghost_"):
                eattrs.update({"color": "#adb5bd", "style": "dotted"})
            out.append(f"  {dot_quote(src)} -> {dot_quote(dst)} {attrs(eattrs)};")
    return out


def _message_edges(trace: Trace, rep: Mapping[str, str],
                   current_msg: int | None) -> tuple[dict[int, str], list[str]]:
    """Message edges recv -> send across clusters, dashed and labelled with the message (a
    real label, which Graphviz places without overlaps; above ``MESSAGE_LABELS_UP_TO``
    edges the send and recv boxes carry the message instead); the current one red."""
    message_edges: dict[int, str] = {}
    merged: dict[tuple[str, str], list[int]] = {}
    for p in trace.pairs():
        if p["recv"] in rep and p["send"] in rep:
            merged.setdefault((rep[p["recv"]], rep[p["send"]]), []).append(p["msg_id"])
    labelled = len(merged) <= MESSAGE_LABELS_UP_TO
    out: list[str] = []
    for (src, dst), msgs in merged.items():
        eid = "m_" + sanitize_id(message_label(msgs[0]))
        for m in msgs:
            message_edges[m] = eid
        eattrs: dict[str, str | int | float] = {
            "id": eid, "style": "dashed", "color": MESSAGE_COLOR, "fontcolor": MESSAGE_COLOR,
            "fontsize": 9, "penwidth": 1.3}
        if labelled:
            text = message_label(msgs[0])
            if len(msgs) > 1:
                text += f" (+{len(msgs) - 1})"
            eattrs["label"] = text
        if current_msg is not None and current_msg in msgs:
            eattrs.update({"penwidth": 3.5, "color": CURRENT_COLOR, "style": "bold,dashed"})
        out.append(f"  {dot_quote(src)} -> {dot_quote(dst)} {attrs(eattrs)};")
    return message_edges, out


_STATE_ORDER = ("blocked", "never", "ready", "waiting", "executed")


def _deps_line(node_id: str, deps: Mapping[str, int], view: _StepView) -> str:
    """``deps D`` (``deps D (R left)`` while waiting at a step), ``not reached`` without a count."""
    d = deps.get(node_id)
    if d is None:
        return "not reached"
    if node_id in view.remaining:
        return f"deps {d} ({view.remaining[node_id]} left)"
    return f"deps {d}"


def _single_lines(first: Node, deps: Mapping[str, int], view: _StepView,
                  root_vars: Mapping[str, list[str]], held: Mapping[str, list[str]]
                  ) -> list[str]:
    """The label of one node: title, message, variable, deps, never runs, fault."""
    lines = [node_title(first, held.get(first.id))]
    if first.msg_id is not None:
        lines.append(f"msg {message_label(first.msg_id)}")
    names = list(root_vars.get(first.id, []))
    if first.kind != NodeKind.RECV:   # a recv's title already names its variables (= t3)
        names += [v for v in first.vars if v not in names]
    if names:
        shown = ", ".join(names[:2]) + (f" +{len(names) - 2}" if len(names) > 2 else "")
        lines.append(("root: " if first.id in root_vars else "= ") + shown)
    lines.append(_deps_line(first.id, deps, view))
    if view.states.get(first.id) == "never":
        lines.append("never runs")
    if first.fault:
        lines.append(f"fault: {first.fault.get('kind', '?')}")
    return lines


def _box_attrs(box: Box, nodes: Mapping[str, Node], deps: Mapping[str, int],
               view: _StepView, root_vars: Mapping[str, list[str]],
               held: Mapping[str, list[str]]) -> dict[str, str | int | float]:
    shape, fill, color = KIND_STYLE[box.kind]
    lines = list(box.lines)
    first = nodes[box.members[0]]
    if box.kind == "ghost":
        return {"id": box.key, "label": "\n".join(lines), "shape": shape,
                "style": "dotted,filled", "fillcolor": fill, "color": color,
                "fontcolor": "#868e96"}
    if len(box.members) == 1 and box.kind not in ("chain", "group"):
        lines = _single_lines(first, deps, view, root_vars, held)
    elif box.kind == "chain":
        lines.append(_deps_line(first.id, deps, _StepView({}, {}, None, None)))
    member_states = [view.states[m] for m in box.members if m in view.states]
    style = "rounded,filled" if box.kind == NodeKind.OP else "filled"
    if member_states:
        if all(s == "executed" for s in member_states) and len(member_states) == len(box.members):
            fill = STATE_FILL["executed"]
        else:
            st = next(s for s in _STATE_ORDER if s in member_states)
            fill = STATE_FILL[st]
            if st == "blocked":
                color = BLOCKED_COLOR
            elif st == "never":
                color = NEVER_COLOR
    out: dict[str, str | int | float] = {"id": box.key, "label": "\n".join(lines), "shape": shape,
                                         "style": style, "fillcolor": fill, "color": color}
    if view.current is not None and view.current in box.members:
        out.update({"color": CURRENT_COLOR, "penwidth": 3.5, "style": style + ",bold"})
    if any(nodes[m].fault for m in box.members):
        out["style"] = str(out["style"]) + ",dashed"
    return out


def to_dot(trace: Trace, replay: ReplayLike | None = None, step: int | None = None,
           full: bool = False, node_budget: int = DEFAULT_NODE_BUDGET, *,
           detail: str | None = None, scope: Scope | None = None) -> str:
    """Return the distributed autograd graph of ``trace`` as Graphviz DOT text.

    Legend (this docstring is the picture's legend; every picture also draws it as a table):

    * **Clusters**: one rounded grey box per worker, labelled ``worker1 (rank 1)``, the
      initiator first (``· initiator``). The initiator's starts with a dashed oval
      ``backward([loss])``: the backward call, with a dotted arrow to each root.
    * **Nodes** are labelled with the PyTorch name without its C++ namespace and the
      sequence number (``MulBackward0 #2``); leaves with the variable name and shape
      (``t1 [3,3]``); a ``RecvRpcBackward`` also with the variables its RPC result was assigned
      to (``RecvRpcBackward #0 = t3``); a root with ``root: loss``, another node that is the
      ``grad_fn`` of a scenario variable with ``= h``. Every node shows its initial FAST-mode dependency count in the pass
      (``deps 2``; ``distviz.replay.graph.initial_dependencies``, the count every view shows:
      a root counts the ``GraphRoot``'s edge, so it starts at 1), or ``not reached`` when no
      root or send leads to it; send/recv nodes show their message (``msg 1:0`` = sender rank
      1, counter 0).
    * **Shapes/colours by kind**: op = white rounded box; ``SendRpcBackward`` = orange
      inverted house; ``RecvRpcBackward`` = green house; ``AccumulateGrad`` = light-blue box;
      a folded chain of ops = grey 3-D box (``7 ops: MulBackward0 … AddBackward0``); one RPC
      call's nodes on one worker = grey folder; the nodes a scoped view leaves out, one dotted
      box per worker (``12 more nodes on stage1``). A node whose recorded fault injects an error
      or crash has a dashed outline and a ``fault:`` line.
    * **Edges**: solid grey arrows are local autograd edges in gradient-flow order (node ->
      its next function; one arrow per next edge, so a node fed twice shows two arrows).
      Dashed magenta arrows go from a ``RecvRpcBackward`` to the ``SendRpcBackward`` on the
      other worker that receives its gradient, labelled with the message (``1:0``; ``(+N)``
      when N more messages were merged by collapsing; above 40 such arrows the boxes carry the
      message instead, so labels never pile up).
    * **With step=N** (state after replay step N; the graph title is the event sentence;
      ``deps`` counts are those of the step's pass): grey fill = executed in this pass; yellow
      = ready (in a ready queue or starting a task); white with ``deps D (R left)`` = waiting
      for R more gradients; red fill and red outline = a blocked send (the replay hung; shown
      from the hang step on); lilac fill, violet outline and ``never runs`` = any other node that
      does not run in the hung pass; thick red outline = the node of the current step; a thick
      red dashed arrow = the message sent or received at this step. Untouched nodes keep their
      kind colour. A collapsed node takes the most urgent state of its members (blocked, never,
      ready, waiting), or grey when all ran. Without a step, the picture of a replay that hangs
      shows how it ends (the title says why).
    * **Views**: ``detail`` ``full`` draws every node, ``folded`` folds straight chains of op
      nodes inside one worker, ``calls`` draws one box per RPC call on each worker,
      ``summary`` the workers only (``distviz.render.dot.summary``); ``None`` takes ``full``
      up to ``node_budget`` nodes, else the most detailed that fits. ``scope`` draws one worker,
      one RPC call or a neighbourhood (``distviz.views``). The title says what the view shows
      when it is not every node of the graph. Above 1000 drawn nodes ``nslimit=1`` is set so
      ``dot`` lays out in seconds.

    Every node, edge and cluster has a sanitised ``id`` attribute, so an SVG made from this text
    has ``<g id=...>`` elements. Raises ``ValueError`` when ``step`` is given without a replay
    or is out of range.
    """
    return build_dot(trace, replay, step=step, full=full, node_budget=node_budget,
                     detail=detail, scope=scope).source


def frames(trace: Trace, replay: ReplayLike, full: bool = False,
           node_budget: int = DEFAULT_NODE_BUDGET, *, detail: str | None = None,
           scope: Scope | None = None) -> Iterator[tuple[int, str]]:
    """Yield ``(step, DOT text)`` for every replay step, in order (for ``--frames DIR``)."""
    for step in range(len(replay.events)):
        yield step, to_dot(trace, replay, step=step, full=full, node_budget=node_budget,
                           detail=detail, scope=scope)
