"""The distributed autograd graph as Graphviz DOT text (pure: no Graphviz needed to build it).

``to_dot`` draws one trace, optionally in the state after one replay step; ``frames`` yields one
DOT text per replay step; ``build_dot`` returns the DOT text together with the id maps the HTML
viewer needs (trace node id -> SVG ``<g id>``, message id -> SVG edge id).

The output is deterministic: the same trace and replay give byte-identical text. Every walk uses
explicit stacks or queues, never recursion, so graphs of any depth render. Collapsing large
graphs is in ``dot_collapse.py``, quoting and names in ``dot_text.py``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from distviz.render.dot_collapse import Box, plan_boxes
from distviz.render.dot_text import attrs, dot_quote, node_title, sanitize_id
from distviz.replay.graph import initial_dependencies
from distviz.replay.model import Event, ReplayLike
from distviz.trace import Node, Trace, message_label
from distviz.words import plural

__all__ = ["DEFAULT_NODE_BUDGET", "DotGraph", "build_dot", "dot_quote", "frames",
           "initial_deps", "node_states", "node_title", "to_dot"]

DEFAULT_NODE_BUDGET = 1500
NSLIMIT_ABOVE = 1000  # drawn nodes above which the x-coordinate network simplex is capped

# Kind styles: (shape, fill colour, outline colour).
KIND_STYLE: dict[str, tuple[str, str, str]] = {
    "op": ("box", "#ffffff", "#333333"),
    "send": ("invhouse", "#ffd8a8", "#d9480f"),
    "recv": ("house", "#b2f2bb", "#2b8a3e"),
    "accumulate_grad": ("box", "#add8e6", "#1864ab"),
    "chain": ("box3d", "#f1f3f5", "#495057"),
    "group": ("folder", "#e9ecef", "#495057"),
}
# Step-state fills (``step=N``).
STATE_FILL: dict[str, str] = {
    "executed": "#bdbdbd",
    "ready": "#fff176",
    "waiting": "#ffffff",
    "blocked": "#ff8a80",
}
CURRENT_COLOR = "#e03131"
MESSAGE_COLOR = "#c2255c"
BLOCKED_COLOR = "#c92a2a"


@dataclass(slots=True)
class DotGraph:
    """DOT text plus the maps a viewer needs to find trace things in the rendered SVG."""

    source: str
    node_ids: dict[str, str]        # trace node id -> DOT/SVG id of the node drawing it
    message_edges: dict[int, str]   # message id -> DOT/SVG id of the dashed message edge
    total_nodes: int                # nodes in the trace
    drawn_nodes: int                # graph nodes drawn (excluding legend and note)
    collapsed: str                  # "none" | "chains" | "groups" | "buckets"


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

    States: ``executed``, ``ready`` (queued or about to start a call), ``waiting`` (dependencies
    remain), ``blocked`` (a send that can never run: the replay hung); absent means untouched.
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
    event: Event | None

    @classmethod
    def of(cls, trace: Trace, replay: ReplayLike | None, step: int | None) -> _StepView:
        if replay is None or step is None:
            return cls({}, {}, None, None)
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


def build_dot(trace: Trace, replay: ReplayLike | None = None, step: int | None = None,
              full: bool = False, node_budget: int = DEFAULT_NODE_BUDGET) -> DotGraph:
    """Build the DOT text and id maps; see ``to_dot`` for the picture's legend.

    Raises ``ValueError`` when ``step`` is given without a replay or is out of range.
    """
    if step is not None:
        if replay is None:
            raise ValueError("step needs a replay")
        if not -1 <= step < len(replay.events):
            raise ValueError(f"step {step} is out of range (the replay has steps 0.."
                             f"{len(replay.events) - 1})")
    rep, boxes, collapsed = plan_boxes(trace, full, node_budget)
    view = _StepView.of(trace, replay, step)
    deps = initial_deps(trace, replay, _pass_of(replay, step))
    out = _header(len(boxes), view.event)
    out.extend(_clusters(trace, rep, boxes, deps, view))
    out.extend(_local_edges(trace, rep, collapsed))
    message_edges, lines = _message_edges(trace, rep, view.message_id())
    out.extend(lines)
    if step is not None:
        out.extend(_legend())
    if collapsed != "none":
        note = (f"collapsed: {plural(len(trace.nodes), 'node', grouped=True)} shown as "
                f"{len(boxes):,}"
                f" ({'chains folded' if collapsed == 'chains' else 'grouped per RPC call'});"
                " use --full")
        out.append("  " + dot_quote("collapsed_note") + " " + attrs({
            "id": "collapsed_note", "label": note, "shape": "note", "fillcolor": "#fff3bf",
            "fontsize": 12}) + ";")
    out.append("}")
    return DotGraph(source="\n".join(out) + "\n", node_ids={n.id: rep[n.id] for n in trace.nodes},
                    message_edges=message_edges, total_nodes=len(trace.nodes),
                    drawn_nodes=len(boxes), collapsed=collapsed)


def _header(drawn: int, event: Event | None) -> list[str]:
    gattrs: dict[str, str | int | float] = {
        "rankdir": "TB", "compound": "true", "fontname": "Helvetica", "fontsize": 12,
        "nodesep": 0.25, "ranksep": 0.35, "outputorder": "edgesfirst",
    }
    if drawn > NSLIMIT_ABOVE:
        gattrs["nslimit"] = 1
        gattrs["nslimit1"] = 1
    if event is not None:
        gattrs["label"] = f"step {event.step}: {event.text or event.action}"
        gattrs["labelloc"] = "t"
    return ["digraph distviz {", "  graph " + attrs(gattrs) + ";",
            '  node [fontname="Helvetica", fontsize=10, style="filled", penwidth=1];',
            '  edge [color="#555555", arrowsize=0.6];']


def _clusters(trace: Trace, rep: Mapping[str, str], boxes: Mapping[str, Box],
              deps: Mapping[str, int], view: _StepView) -> list[str]:
    """One cluster per worker with its boxes, in trace order."""
    nodes = trace.node_map()
    by_worker: dict[str, list[Box]] = {w: [] for w in trace.workers}
    emitted: set[str] = set()
    for n in trace.nodes:
        key = rep[n.id]
        if key not in emitted:
            emitted.add(key)
            by_worker.setdefault(n.worker, []).append(boxes[key])
    out: list[str] = []
    for w, wboxes in by_worker.items():
        cid = "cluster_" + sanitize_id(w)
        rank = trace.workers.index(w) if w in trace.workers else -1
        out.append(f"  subgraph {dot_quote(cid)} {{")
        out.append("    graph " + attrs({
            "id": cid, "label": f"{w} (rank {rank})", "style": "rounded", "color": "#868e96",
            "fontsize": 14}) + ";")
        for box in wboxes:
            out.append("    " + dot_quote(box.key) + " " + attrs(
                _box_attrs(box, nodes, deps, view)) + ";")
        out.append("  }")
    return out


def _local_edges(trace: Trace, rep: Mapping[str, str], collapsed: str) -> list[str]:
    """Gradient-flow edges (node -> next function), deduplicated after collapsing."""
    nodes = trace.node_map()
    seen_edges: set[tuple[str, str]] = set()
    out: list[str] = []
    for n in trace.nodes:
        src = rep[n.id]
        for slot, e in enumerate(n.next):
            if e is None:
                continue
            dst = rep[e[0]]
            if src == dst:
                continue
            if collapsed != "none":
                if (src, dst) in seen_edges:
                    continue
                seen_edges.add((src, dst))
                eid = f"e_{src}__{dst}"
            else:
                eid = f"e_{src}_{slot}"
            eattrs: dict[str, str | int | float] = {"id": eid}
            if nodes[e[0]].worker != n.worker:
                eattrs.update({"color": "#555555", "style": "bold"})
            out.append(f"  {dot_quote(src)} -> {dot_quote(dst)} {attrs(eattrs)};")
    return out


def _message_edges(trace: Trace, rep: Mapping[str, str],
                   current_msg: int | None) -> tuple[dict[int, str], list[str]]:
    """Message edges recv -> send across clusters, dashed, xlabel only; the current one red."""
    message_edges: dict[int, str] = {}
    merged: dict[tuple[str, str], list[int]] = {}
    for p in trace.pairs():
        if p["recv"] is not None and p["send"] is not None:
            merged.setdefault((rep[p["recv"]], rep[p["send"]]), []).append(p["msg_id"])
    out: list[str] = []
    for (src, dst), msgs in merged.items():
        eid = "m_" + sanitize_id(message_label(msgs[0]))
        for m in msgs:
            message_edges[m] = eid
        xl = message_label(msgs[0])
        if len(msgs) > 1:
            xl += f" (+{len(msgs) - 1})"
        eattrs: dict[str, str | int | float] = {
            "id": eid, "style": "dashed", "color": MESSAGE_COLOR, "fontcolor": MESSAGE_COLOR,
            "xlabel": xl, "fontsize": 9, "penwidth": 1.3}
        if current_msg is not None and current_msg in msgs:
            eattrs.update({"penwidth": 3.5, "color": CURRENT_COLOR, "style": "bold,dashed"})
        out.append(f"  {dot_quote(src)} -> {dot_quote(dst)} {attrs(eattrs)};")
    return message_edges, out


_STATE_ORDER = ("blocked", "ready", "waiting", "executed")


def _deps_line(node_id: str, deps: Mapping[str, int], view: _StepView) -> str:
    """``deps D`` (``deps D (R left)`` while waiting at a step), ``not reached`` without a count."""
    d = deps.get(node_id)
    if d is None:
        return "not reached"
    if node_id in view.remaining:
        return f"deps {d} ({view.remaining[node_id]} left)"
    return f"deps {d}"


def _box_attrs(box: Box, nodes: Mapping[str, Node], deps: Mapping[str, int],
               view: _StepView) -> dict[str, str | int | float]:
    shape, fill, color = KIND_STYLE[box.kind]
    lines = list(box.lines)
    first = nodes[box.members[0]]
    if len(box.members) == 1:
        lines = [node_title(first)]
        if first.msg_id is not None:
            lines.append(f"msg {message_label(first.msg_id)}")
        lines.append(_deps_line(first.id, deps, view))
        if first.fault:
            lines.append(f"fault: {first.fault.get('kind', '?')}")
    elif box.kind == "chain":
        lines.append(_deps_line(first.id, deps, _StepView({}, {}, None, None)))
    member_states = [view.states[m] for m in box.members if m in view.states]
    style = "rounded,filled" if box.kind == "op" else "filled"
    if member_states and (view.states or view.current is not None):
        if all(s == "executed" for s in member_states) and len(member_states) == len(box.members):
            fill = STATE_FILL["executed"]
        else:
            st = next(s for s in _STATE_ORDER if s in member_states)
            fill = STATE_FILL[st]
            if st == "blocked":
                color = BLOCKED_COLOR
    out: dict[str, str | int | float] = {"id": box.key, "label": "\n".join(lines), "shape": shape,
                                         "style": style, "fillcolor": fill, "color": color}
    if view.current is not None and view.current in box.members:
        out.update({"color": CURRENT_COLOR, "penwidth": 3.5, "style": style + ",bold"})
    if any(nodes[m].fault for m in box.members):
        out["style"] = str(out["style"]) + ",dashed"
    return out


def _legend() -> list[str]:
    """Return the legend cluster: one HTML-like table node (our own fixed text only)."""
    rows = [
        (STATE_FILL["executed"], "#333333", 1, "executed"),
        ("#ffffff", CURRENT_COLOR, 3, "current step"),
        (STATE_FILL["ready"], "#333333", 1, "ready (queued)"),
        (STATE_FILL["waiting"], "#333333", 1, "waiting: deps D (R left)"),
        (STATE_FILL["blocked"], BLOCKED_COLOR, 1, "blocked send"),
        (KIND_STYLE["send"][1], KIND_STYLE["send"][2], 1, "SendRpcBackward"),
        (KIND_STYLE["recv"][1], KIND_STYLE["recv"][2], 1, "RecvRpcBackward"),
        (KIND_STYLE["accumulate_grad"][1], KIND_STYLE["accumulate_grad"][2], 1, "AccumulateGrad"),
    ]
    cells = "".join(
        f'<TR><TD BGCOLOR="{fill}" COLOR="{color}" BORDER="{border}" WIDTH="18"> </TD>'
        f'<TD ALIGN="LEFT" BORDER="0">{text}</TD></TR>' for fill, color, border, text in rows)
    cells += (f'<TR><TD BORDER="0"><FONT COLOR="{MESSAGE_COLOR}">- - &gt;</FONT></TD>'
              '<TD ALIGN="LEFT" BORDER="0">message recv -&gt; send</TD></TR>')
    table = f'<<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="3" CELLPADDING="2">{cells}</TABLE>>'
    return ['  subgraph "cluster_legend" {',
            "    graph " + attrs({"id": "cluster_legend", "label": "legend", "style": "rounded",
                                   "color": "#adb5bd", "fontsize": 11}) + ";",
            f'    "legend" [id="legend", shape=plaintext, style="", fontsize=9, label={table}];',
            "  }"]


def to_dot(trace: Trace, replay: ReplayLike | None = None, step: int | None = None,
           full: bool = False, node_budget: int = DEFAULT_NODE_BUDGET) -> str:
    """Return the distributed autograd graph of ``trace`` as Graphviz DOT text.

    Legend (this docstring is the picture's legend):

    * **Clusters**: one rounded grey box per worker, labelled ``worker1 (rank 1)``.
    * **Nodes** are labelled with the PyTorch name without its C++ namespace and the
      sequence number (``MulBackward0 #2``); leaves with the variable name and shape
      (``t1 [3,3]``); a ``RecvRpcBackward`` also with the variables its RPC result was assigned
      to (``RecvRpcBackward #0 = t3``). Every node shows its initial FAST-mode dependency count in the pass
      (``deps 2``; ``distviz.replay.graph.initial_dependencies``, the count every view shows:
      a root counts the ``GraphRoot``'s edge, so it starts at 1), or ``not reached`` when no
      root or send leads to it; send/recv nodes show their message (``msg 1:0`` = sender rank
      1, counter 0).
    * **Shapes/colours by kind**: op = white rounded box; ``SendRpcBackward`` = orange
      inverted house; ``RecvRpcBackward`` = green house; ``AccumulateGrad`` = light-blue box;
      a folded chain of ops = grey 3-D box (``7 ops: MulBackward0 … AddBackward0``); a
      per-RPC-call group = grey folder. A node whose recorded fault injects an error or crash has
      a dashed outline and a ``fault:`` line.
    * **Edges**: solid grey arrows are local autograd edges in gradient-flow order (node ->
      its next function; one arrow per next edge, so a node fed twice shows two arrows).
      Dashed magenta arrows go from a ``RecvRpcBackward`` to the ``SendRpcBackward`` on the
      other worker that receives its gradient; their external label (``xlabel``) is the message
      label (``1:0``; ``(+N)`` when N more messages were merged by collapsing).
    * **With step=N** (state after replay step N; the graph title is the event sentence;
      ``deps`` counts are those of the step's pass): grey fill = executed in this pass; yellow = ready (in a ready queue or starting a call);
      white with ``deps D (R left)`` = waiting for R more gradients; red fill and red outline =
      a blocked send (the replay hung; shown from the hang step on); thick red outline = the
      node of the current step; a thick red dashed arrow = the message sent or received at this
      step. Untouched nodes keep their kind colour. A legend cluster repeats this key. A
      collapsed node takes the most urgent state of its members (blocked, ready, waiting),
      or grey when all ran.
    * **Large graphs**: above ``node_budget`` nodes (unless ``full``), linear chains of op
      nodes inside one worker are folded; if still above budget, each worker is drawn as one
      summary node per RPC call (or per group of calls), and a yellow note says
      ``collapsed: N nodes shown as M; use --full``. Above 1000 drawn nodes ``nslimit=1`` is set
      so ``dot`` lays out in seconds.

    Every node, edge and cluster has a sanitised ``id`` attribute, so an SVG made from this text
    has ``<g id=...>`` elements that the HTML viewer highlights. Raises ``ValueError`` when
    ``step`` is given without a replay or is out of range.
    """
    return build_dot(trace, replay, step=step, full=full, node_budget=node_budget).source


def frames(trace: Trace, replay: ReplayLike, full: bool = False,
           node_budget: int = DEFAULT_NODE_BUDGET) -> Iterator[tuple[int, str]]:
    """Yield ``(step, DOT text)`` for every replay step, in order (for ``--frames DIR``)."""
    for step in range(len(replay.events)):
        yield step, to_dot(trace, replay, step=step, full=full, node_budget=node_budget)
