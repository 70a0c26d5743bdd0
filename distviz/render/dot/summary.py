"""The worker-level summary as DOT: one box per worker, the gradient messages between them.

Legend (this docstring is the picture's legend; the picture repeats it as a table):

* **Boxes**: one per worker, the initiator first (``· initiator``): its nodes by kind, the RPC
  calls it made and served, and, when the trace holds a measured real backward, how long it was
  busy (computing or in the engine) and waiting for gradient messages.
* **Dashed magenta arrows**: gradient messages from one worker (its ``RecvRpcBackward`` nodes)
  to another (the ``SendRpcBackward`` nodes they feed), one arrow per direction, labelled with
  the number of messages and the bytes of their gradients.
* **With a step**: the title is the step's sentence; a worker that finished its backward is
  grey, one with nodes still waiting white with ``N waiting``, the worker of the step has a
  thick red outline and the message of the step a thick red arrow; after a hang the workers
  that never finish are red.
"""

from __future__ import annotations

from distviz.analyses.timing import Timing, fmt_us
from distviz.render.dot.style import BLOCKED_COLOR, CURRENT_COLOR, MESSAGE_COLOR, STATE_FILL
from distviz.render.dot.text import DotGraph, attrs, dot_quote, sanitize_id
from distviz.replay.graph import IndexedGraph
from distviz.replay.values import ReplayLike, ReplayState
from distviz.trace import Trace
from distviz.views.view import WorkerStats, WorkerSummary
from distviz.views.worker_summary import worker_summary
from distviz.words import plural

__all__ = ["summary_dot", "summary_lines"]


def fmt_bytes(n: int) -> str:
    """``512 B``, ``12.8 kB``, ``3.4 MB``, ``1.2 GB`` (powers of 1000)."""
    value = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.3g} {unit}"
        value /= 1000
    return f"{n} B"


def _count(n: int, noun: str, many: str | None = None) -> str:
    return f"{n:,} {noun if n == 1 else (many or noun + 's')}"


def summary_lines(ws: WorkerStats) -> list[str]:
    """The lines of one worker's box."""
    kinds = [_count(ws.ops, "op"), _count(ws.sends, "send"), _count(ws.recvs, "recv"),
             _count(ws.leaves, "leaf", "leaves")]
    lines = [f"{ws.worker} (rank {ws.rank})" + (" · initiator" if ws.initiator else ""),
             f"{ws.nodes:,} nodes: " + ", ".join(kinds)]
    calls = []
    if ws.calls_made:
        calls.append(f"made {_count(ws.calls_made, 'RPC call')}")
    if ws.calls_served:
        calls.append(f"served {_count(ws.calls_served, 'RPC call')}")
    if calls:
        lines.append(", ".join(calls))
    if ws.busy_us is not None:
        lines.append(f"real run: busy {fmt_us(ws.busy_us)}, waiting {fmt_us(ws.waiting_us or 0)}")
    return lines


def summary_dot(trace: Trace, replay: ReplayLike | None = None, step: int | None = None,
                summary: WorkerSummary | None = None, graph: IndexedGraph | None = None,
                timing: Timing | None | bool = True) -> DotGraph:
    """Return the summary picture as a ``DotGraph`` (every trace node maps to its worker's box).
    See the module docstring for the legend. ``timing``: the real run's timing analysis when
    it is already made (``distviz.judge.analysis``), ``True`` to make it here."""
    g = graph if graph is not None else getattr(replay, "graph", None) or IndexedGraph(trace)
    summary = summary if summary is not None else worker_summary(g, timing)
    state = replay.state_at(step) if replay is not None and step is not None else None
    event = state.event if state is not None else None
    title = [f"step {event.step}: {event.text or event.action}"] if event is not None else []
    title.append(f"view: the workers of the whole graph ({summary.total_nodes:,} nodes)"
                 + (f"; real backward {fmt_us(summary.wall_us)}" if summary.wall_us else ""))
    out = ["digraph distviz {",
           "  graph " + attrs({"rankdir": "LR", "fontname": "Helvetica", "fontsize": 12,
                               "nodesep": 0.6, "ranksep": 1.6, "label": "\n".join(title),
                               "labelloc": "t"}) + ";",
           '  node [fontname="Helvetica", fontsize=11, shape=box, style="rounded,filled", '
           'fillcolor="#f8f9fa", color="#495057", penwidth=1.5];',
           f'  edge [color="{MESSAGE_COLOR}", fontcolor="{MESSAGE_COLOR}", style=dashed, '
           "fontsize=10, fontname=\"Helvetica\", arrowsize=0.8];"]
    for ws in summary.workers:
        out.append("  " + dot_quote(_key(ws.worker)) + " " + attrs(_worker_attrs(ws, state, replay))
                   + ";")
    current = event.message.sender if event is not None and event.message is not None else None
    for link in summary.links:
        eattrs: dict[str, str | int | float] = {
            "id": f"m_{sanitize_id(link.sender)}__{sanitize_id(link.receiver)}",
            "label": f"{_count(link.messages, 'gradient message')}\n{fmt_bytes(link.bytes)}"}
        if (event is not None and event.message is not None and current == link.sender
                and event.message.to == link.receiver):
            eattrs.update({"color": CURRENT_COLOR, "penwidth": 3.5, "style": "bold,dashed"})
        out.append(f"  {dot_quote(_key(link.sender))} -> {dot_quote(_key(link.receiver))} "
                   + attrs(eattrs) + ";")
    out.append("}")
    node_ids = {nid: _key(w) for nid, w in zip(g.ids, (g.workers[x] for x in g.worker),
                                               strict=True)}
    return DotGraph(source="\n".join(out) + "\n", node_ids=node_ids, message_edges={},
                    total_nodes=g.n, drawn_nodes=len(summary.workers), detail="summary",
                    title="\n".join(title))


def _key(worker: str) -> str:
    return "w_" + sanitize_id(worker)


def _worker_attrs(ws: WorkerStats, state: ReplayState | None, replay: ReplayLike | None
                  ) -> dict[str, str | int | float]:
    lines = summary_lines(ws)
    out: dict[str, str | int | float] = {"id": _key(ws.worker)}
    if ws.initiator:
        out["penwidth"] = 2.5
    if state is not None:
        st = state.workers.get(ws.worker)
        if st is not None:
            waiting = sum(1 for c in st.deps.values() if c > 0)
            if st.done:
                lines.append("done")
                out["fillcolor"] = STATE_FILL["executed"]
            elif waiting:
                lines.append(f"{plural(waiting, 'node')} waiting, {len(st.executed):,} executed")
                out["fillcolor"] = STATE_FILL["waiting"]
            hang = replay.hang if replay is not None else None
            if hang is not None and any(b.worker == ws.worker for b in hang.blocked_workers) \
                    and state.event is not None and state.event.action in ("hang", "pass_end"):
                out.update({"fillcolor": STATE_FILL["blocked"], "color": BLOCKED_COLOR})
        ev = state.event
        if ev is not None and ev.worker == ws.worker:
            out.update({"color": CURRENT_COLOR, "penwidth": 3.5})
    out["label"] = "\n".join(lines)
    return out
