"""The distributed autograd graph as Graphviz DOT text (pure: no Graphviz needed to build it).

``to_dot`` draws one trace, optionally in the state after one replay step; ``frames`` yields one
DOT text per replay step; ``build_dot`` returns the DOT text together with the id maps the HTML
viewer needs (trace node id -> SVG ``<g id>``, message id -> SVG edge id).

The output is deterministic: the same trace and replay give byte-identical text. Every walk uses
explicit stacks or queues, never recursion, so graphs of any depth render.
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from distviz.replay.model import Event, ReplayState
from distviz.trace import Node, Trace, message_label, short_name

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


class ReplayLike(Protocol):
    """What the renderers read from a replay result (``distviz.replay.fast.replay``)."""

    @property
    def events(self) -> Sequence[Event]: ...

    @property
    def hang(self) -> Mapping[str, Any] | None: ...

    def state_at(self, step: int) -> ReplayState: ...


@dataclass(slots=True)
class DotGraph:
    """DOT text plus the maps a viewer needs to find trace things in the rendered SVG."""

    source: str
    node_ids: dict[str, str]        # trace node id -> DOT/SVG id of the node drawing it
    message_edges: dict[int, str]   # message id -> DOT/SVG id of the dashed message edge
    total_nodes: int                # nodes in the trace
    drawn_nodes: int                # graph nodes drawn (excluding legend and note)
    collapsed: str                  # "none" | "chains" | "groups" | "buckets"


@dataclass(slots=True)
class _Box:
    """One drawn node: a trace node or a collapsed set of them."""

    key: str
    worker: str
    kind: str
    members: list[str]
    lines: list[str] = field(default_factory=list)


# -- escaping ------------------------------------------------------------------------------

_ID_BAD = re.compile(r"[^A-Za-z0-9_.-]")


def sanitize_id(text: str) -> str:
    """Return ``text`` reduced to ``[A-Za-z0-9_.-]`` (other characters become ``_``)."""
    return _ID_BAD.sub("_", text)


def dot_quote(text: str) -> str:
    """Return ``text`` as a quoted DOT string, safe for labels.

    Backslashes and quotes are escaped, newlines become Graphviz line breaks (``\\n``), other
    control characters become spaces, and ``&`` becomes ``&amp;`` (Graphviz decodes entities in
    labels). ``<`` and ``>`` need no escaping inside a quoted string; Graphviz writes them to SVG
    as ``&lt;``/``&gt;``.
    """
    out: list[str] = []
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "&":
            out.append("&amp;")
        elif ord(ch) < 32 or ch in "\u2028\u2029\x7f":
            out.append(" ")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _attrs(attrs: Mapping[str, str | int | float]) -> str:
    """Return a DOT attribute list; every string value is quoted and escaped."""
    parts = []
    for k, v in attrs.items():
        parts.append(f"{k}={dot_quote(v) if isinstance(v, str) else v}")
    return "[" + ", ".join(parts) + "]"


# -- names ---------------------------------------------------------------------------------

def display_name(node: Node) -> str:
    """Return the short name a picture shows: ``torch::distributed::autograd::`` dropped."""
    return short_name(node.name)


def shape_text(shape: Sequence[int] | None) -> str:
    """Return ``[3,3]`` for a shape, ``[]`` for a scalar, ``""`` when unknown."""
    if shape is None:
        return ""
    return "[" + ",".join(str(s) for s in shape) + "]"


def node_title(node: Node) -> str:
    """Return the first label line of a node: ``MulBackward0 #2``, ``t1 [3,3]``."""
    if node.kind == "accumulate_grad":
        name = node.var if node.var else "AccumulateGrad"
        shp = shape_text(node.shape)
        return f"{name} {shp}" if shp else name
    return f"{display_name(node)} #{node.seq}"


# -- graph facts ---------------------------------------------------------------------------

def initial_deps(trace: Trace, replay: ReplayLike | None = None) -> dict[str, int]:
    """Return the FAST-mode dependency count of every node at the start of the first pass.

    Taken from the replay's ``compute_dependencies`` events when a replay is given; otherwise
    counted the same way (one per next edge from a node reachable from the worker's roots and
    sends). Nodes no root or send reaches are absent.
    """
    deps: dict[str, int] = {}
    if replay is not None:
        seen: set[str] = set()
        for ev in replay.events:
            if ev.action == "compute_dependencies" and ev.worker not in seen:
                seen.add(ev.worker or "")
                for nid, count in (ev.detail.get("deps") or {}).items():
                    deps[str(nid)] = int(count)
        if seen:
            return deps
    nodes = trace.node_map()
    starts: list[str] = []
    if trace.passes:
        starts.extend(r for r in trace.passes[0].roots)
    starts.extend(n.id for n in trace.nodes if n.kind == "send")
    visited: set[str] = set()
    stack = [s for s in reversed(starts)]
    while stack:
        nid = stack.pop()
        if nid in visited or nid not in nodes:
            continue
        visited.add(nid)
        for edge in nodes[nid].next:
            if edge is None:
                continue
            deps[edge[0]] = deps.get(edge[0], 0) + 1
            if edge[0] not in visited:
                stack.append(edge[0])
    return deps


def _message_pairs(trace: Trace) -> list[tuple[str, str, int]]:
    """Return ``(recv id, send id, message id)`` for every complete pair, by message id."""
    return [(p["recv"], p["send"], p["msg_id"]) for p in trace.pairs()
            if p["recv"] is not None and p["send"] is not None]


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
    if hang and hang_step is not None and step >= hang_step:
        for b in hang.get("blocked_sends") or []:
            nid = b.get("node")
            if isinstance(nid, str):
                states[nid] = "blocked"
    ev = state.event
    current = ev.node if ev is not None else None
    return states, current, remaining


# -- collapsing ----------------------------------------------------------------------------

def _fold_chains(trace: Trace, rep: dict[str, str], boxes: dict[str, _Box]) -> None:
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
        boxes[key] = _Box(key=key, worker=first.worker, kind="chain", members=chain,
                          lines=[f"{len(chain)} ops: {display_name(first)} … {display_name(last)}"])
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
    parts = [f"{counts['op']} ops"]
    if counts["send"]:
        parts.append(f"{counts['send']} send")
    if counts["recv"]:
        parts.append(f"{counts['recv']} recv")
    if counts["accumulate_grad"]:
        parts.append(f"{counts['accumulate_grad']} leaves")
    return [title, f"{len(members)} nodes: " + ", ".join(parts)]


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


def _collapse_groups(trace: Trace, budget: int) -> tuple[dict[str, str], dict[str, _Box], str]:
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
    boxes: dict[str, _Box] = {}
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
            boxes[key] = _Box(key=key, worker=w, kind="group", members=mem,
                              lines=_summary_lines(nodes, title, mem))
            for m in mem:
                rep[m] = key
    return rep, boxes, mode


# -- building --------------------------------------------------------------------------------

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
    nodes = trace.node_map()
    deps = initial_deps(trace, replay)
    pairs = _message_pairs(trace)

    # 1. Decide what each drawn node stands for.
    rep: dict[str, str] = {}
    boxes: dict[str, _Box] = {}
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
            boxes[key] = _Box(key=key, worker=n.worker, kind=n.kind, members=[n.id])

    # 2. Step state.
    states: dict[str, str] = {}
    remaining: dict[str, int] = {}
    current: str | None = None
    event: Event | None = None
    if replay is not None and step is not None:
        states, current, remaining = node_states(trace, replay, step)
        if step >= 0:
            event = replay.events[step]

    # 3. Emit.
    drawn = len(boxes)
    out: list[str] = ["digraph distviz {"]
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
    out.append("  graph " + _attrs(gattrs) + ";")
    out.append('  node [fontname="Helvetica", fontsize=10, style="filled", penwidth=1];')
    out.append('  edge [color="#555555", arrowsize=0.6];')

    by_worker: dict[str, list[_Box]] = {w: [] for w in trace.workers}
    emitted: set[str] = set()
    for n in trace.nodes:
        key = rep[n.id]
        if key in emitted:
            continue
        emitted.add(key)
        by_worker.setdefault(n.worker, []).append(boxes[key])
    for w, wboxes in by_worker.items():
        cid = "cluster_" + sanitize_id(w)
        rank = trace.workers.index(w) if w in trace.workers else -1
        out.append(f"  subgraph {dot_quote(cid)} {{")
        out.append("    graph " + _attrs({
            "id": cid, "label": f"{w} (rank {rank})", "style": "rounded", "color": "#868e96",
            "fontsize": 14}) + ";")
        for box in wboxes:
            out.append("    " + dot_quote(box.key) + " " + _attrs(
                _box_attrs(box, nodes, deps, states, remaining, current)) + ";")
        out.append("  }")

    # Local edges (gradient flow: node -> next function), deduplicated after collapsing.
    seen_edges: set[tuple[str, str]] = set()
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
            out.append(f"  {dot_quote(src)} -> {dot_quote(dst)} {_attrs(eattrs)};")

    # Message edges: recv -> send, across clusters, dashed, xlabel only.
    message_edges: dict[int, str] = {}
    merged: dict[tuple[str, str], list[int]] = {}
    for recv, send, msg in pairs:
        merged.setdefault((rep[recv], rep[send]), []).append(msg)
    current_msg: int | None = None
    if event is not None and event.message is not None:
        raw = event.message.get("msg_id")
        current_msg = int(raw) if isinstance(raw, int) else None
    for (src, dst), msgs in merged.items():
        eid = "m_" + sanitize_id(message_label(msgs[0]))
        for m in msgs:
            message_edges[m] = eid
        xl = message_label(msgs[0])
        if len(msgs) > 1:
            xl += f" (+{len(msgs) - 1})"
        eattrs = {"id": eid, "style": "dashed", "color": MESSAGE_COLOR, "fontcolor": MESSAGE_COLOR,
                  "xlabel": xl, "fontsize": 9, "penwidth": 1.3}
        if current_msg is not None and current_msg in msgs:
            eattrs.update({"penwidth": 3.5, "color": CURRENT_COLOR, "style": "bold,dashed"})
        out.append(f"  {dot_quote(src)} -> {dot_quote(dst)} {_attrs(eattrs)};")

    if step is not None:
        out.extend(_legend())
    if collapsed != "none":
        note = (f"collapsed: {len(trace.nodes):,} nodes shown as {drawn:,}"
                f" ({'chains folded' if collapsed == 'chains' else 'grouped per RPC call'});"
                " use --full")
        out.append("  " + dot_quote("collapsed_note") + " " + _attrs({
            "id": "collapsed_note", "label": note, "shape": "note", "fillcolor": "#fff3bf",
            "fontsize": 12}) + ";")
    out.append("}")
    node_ids = {n.id: rep[n.id] for n in trace.nodes}
    return DotGraph(source="\n".join(out) + "\n", node_ids=node_ids, message_edges=message_edges,
                    total_nodes=len(trace.nodes), drawn_nodes=drawn, collapsed=collapsed)


_STATE_ORDER = ("blocked", "ready", "waiting", "executed")


def _box_attrs(box: _Box, nodes: Mapping[str, Node], deps: Mapping[str, int],
               states: Mapping[str, str], remaining: Mapping[str, int],
               current: str | None) -> dict[str, str | int | float]:
    shape, fill, color = KIND_STYLE[box.kind]
    lines = list(box.lines)
    first = nodes[box.members[0]]
    if len(box.members) == 1:
        lines = [node_title(first)]
        if first.msg_id is not None:
            lines.append(f"msg {message_label(first.msg_id)}")
        d = deps.get(first.id, 0)
        if first.id in remaining:
            lines.append(f"deps {d} ({remaining[first.id]} left)")
        else:
            lines.append(f"deps {d}")
        if first.fault:
            lines.append(f"fault: {first.fault.get('kind', '?')}")
    elif box.kind == "chain":
        lines.append(f"deps {deps.get(first.id, 0)}")
    member_states = [states[m] for m in box.members if m in states]
    style = "filled"
    if box.kind == "op":
        style = "rounded,filled"
    if states or current is not None:
        if member_states:
            if all(s == "executed" for s in member_states) and len(member_states) == len(box.members):
                fill = STATE_FILL["executed"]
            else:
                st = next(s for s in _STATE_ORDER if s in member_states)
                fill = STATE_FILL[st]
                if st == "blocked":
                    color = BLOCKED_COLOR
    attrs: dict[str, str | int | float] = {"id": box.key, "label": "\n".join(lines), "shape": shape,
                                           "style": style, "fillcolor": fill, "color": color}
    if current is not None and current in box.members:
        attrs.update({"color": CURRENT_COLOR, "penwidth": 3.5, "style": style + ",bold"})
    if any(nodes[m].fault for m in box.members):
        attrs["style"] = str(attrs["style"]) + ",dashed"
    return attrs


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
            "    graph " + _attrs({"id": "cluster_legend", "label": "legend", "style": "rounded",
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
      (``t1 [3,3]``). Every node shows its initial FAST-mode dependency count (``deps 2``);
      send/recv nodes show their message (``msg 1:0`` = sender rank 1, counter 0).
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
    * **With step=N** (state after replay step N; the graph title is the event sentence):
      grey fill = executed in this pass; yellow = ready (in a ready queue or starting a call);
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
