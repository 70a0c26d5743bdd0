"""Terminal renderings of a trace and its FAST-mode replay (rich renderables, never printed here).

Everything in this module returns values: ``rich.text.Text`` lines, rich renderables or strings.
The CLI (``distviz/cli/``) and the step-through loop (``distviz/render/stepper.py``) are the
only places that print them. No ANSI codes are ever embedded: colour is carried as rich styles,
so ``Console(no_color=True)`` (``NO_COLOR``) or output to a pipe gives plain text.

Entry points:

``render_log(trace, replay, ...)``   the numbered event log, one line per event, streamed
``render_state(trace, replay, step)`` one screen of the step-through view (state after a step)
``render_graph(trace)``              each worker's graph as a tree with FAST dependency counts
``render_summary(trace)``            per worker: nodes by kind, send/recv pairs, leaves

Legend (styles; all readable without colour):

- action tags: ``execute`` plain, ``accum`` green, ``send``/``receive``/``ack`` magenta,
  ``deps``/``call``/``end`` cyan, ``done`` green, ``HANG``/``ERROR``/``CRASH`` bold red.
- worker panels: the worker of the current event has a bold border; a finished worker a green
  one; the worker in focus (stepper ``<``/``>``) is marked ``▶`` in the title.
- graph: ``deps N`` is the initial FAST dependency count (edges from nodes reached by BFS from
  the roots and every send); ``↺`` marks a node already shown above (not expanded again);
  ``[in k]`` the input number of an edge when it is not 0; ``not reached`` nodes that no root or
  send leads to.
"""

from __future__ import annotations

import textwrap
from collections import Counter, deque
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from rich.columns import Columns
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from distviz.replay.model import Event, ReplayState, WorkerState
from distviz.trace import Node, Trace, message_label, short_name

__all__ = [
    "ACTION_TAGS",
    "ReplayLike",
    "event_sentence",
    "explain_outcome",
    "initial_dependencies",
    "node_label",
    "render_graph",
    "render_log",
    "render_state",
    "render_summary",
]


class ReplayLike(Protocol):
    """What the renderers read from a replay (``distviz.replay.fast.Replay`` satisfies it)."""

    @property
    def outcome(self) -> str: ...

    @property
    def events(self) -> list[Event]: ...

    @property
    def hang(self) -> dict[str, Any] | None: ...

    @property
    def error(self) -> dict[str, Any] | None: ...

    def state_at(self, step: int) -> ReplayState: ...


#: Short tag shown in the log's action column, per event action.
ACTION_TAGS: dict[str, str] = {
    "pass_start": "pass",
    "compute_dependencies": "deps",
    "call_start": "call",
    "execute": "execute",
    "accumulate": "accum",
    "send_gradient": "send",
    "receive_gradient": "receive",
    "call_end": "end call",
    "worker_done": "done",
    "ack": "ack",
    "error": "ERROR",
    "crash": "CRASH",
    "hang": "HANG",
    "pass_end": "end pass",
}

_TAG_STYLES: dict[str, str] = {
    "compute_dependencies": "cyan",
    "call_start": "cyan",
    "call_end": "cyan",
    "accumulate": "green",
    "worker_done": "green",
    "send_gradient": "magenta",
    "receive_gradient": "magenta",
    "ack": "magenta",
    "error": "bold red",
    "crash": "bold red",
    "hang": "bold red",
    "pass_start": "bold",
    "pass_end": "bold",
}
_NODE_ACTIONS = ("execute", "accumulate", "error", "crash")  # events where ``node`` is running
_TAG_WIDTH = max(len(t) for t in ACTION_TAGS.values())
_OUTCOME_STYLES = {"completed": "bold green", "hang": "bold red", "error": "bold red"}


# -- small helpers ---------------------------------------------------------------------------

def node_label(node_id: str | None) -> str:
    """Return a node id without its worker prefix (``worker1/AddBackward0#1`` -> ``AddBackward0#1``)."""
    if node_id is None:
        return "?"
    return node_id.split("/", 1)[1] if "/" in node_id else node_id


def _more(items: Sequence[str], limit: int) -> list[str]:
    """Return at most ``limit`` items, the last replaced by ``… N more`` when cut."""
    if len(items) <= limit:
        return list(items)
    keep = max(limit - 1, 0)
    return list(items[:keep]) + [f"… {len(items) - keep} more"]


def event_sentence(event: Event) -> str:
    """Return the one-sentence description of an event: the replay's own ``text`` when it has one,
    else a sentence made from the action, worker, node and message."""
    if event.text:
        return event.text
    who = event.worker or "?"
    node = node_label(event.node) if event.node else ""
    msg = event.message or {}
    label = msg.get("label", "")
    if event.action == "execute":
        return f"{who} runs {node}"
    if event.action == "accumulate":
        return f"{who} accumulates the gradient of {event.detail.get('var') or node}"
    if event.action == "send_gradient":
        return f"{who} sends gradient message {label} to {msg.get('to', '?')}"
    if event.action == "receive_gradient":
        return f"{who} receives gradient message {label} from {msg.get('from', '?')}"
    return " ".join(p for p in (who, event.action.replace("_", " "), node) if p)


def _wrap(prefix: Text, sentence: str, style: str, width: int | None) -> Text:
    """Return ``prefix`` + ``sentence``; with ``width``, wrapped under the sentence column."""
    line = prefix.copy()
    if width is None or width - len(prefix.plain) < 20:
        line.append(sentence, style=style)
        return line
    indent = len(prefix.plain)
    parts = textwrap.wrap(sentence, width=width - indent, break_on_hyphens=False) or [""]
    line.append(parts[0], style=style)
    for part in parts[1:]:
        line.append("\n" + " " * indent)
        line.append(part, style=style)
    return line


def _wrapped_lines(first: str, rest: str, text: str, width: int | None,
                   style: str = "") -> Iterator[Text]:
    """Yield ``first + text`` as lines no wider than ``width``; continuation lines start with
    ``rest`` (a hanging indent). Without ``width``, one line."""
    if width is None:
        line = Text(first)
        line.append(text, style=style)
        yield line
        return
    body = textwrap.wrap(text, width=max(width - len(first), 20), break_on_hyphens=False)
    if len(body) > 1:
        tail = " ".join(body[1:])
        body = body[:1] + textwrap.wrap(tail, width=max(width - len(rest), 20),
                                        break_on_hyphens=False)
    for i, part in enumerate(body or [""]):
        line = Text(first if i == 0 else rest)
        line.append(part, style=style)
        yield line


# -- outcome explanation ---------------------------------------------------------------------

def explain_outcome(trace: Trace, replay: ReplayLike, *, width: int | None = None) -> list[Text]:
    """Return the lines that explain how the replay ended.

    ``completed``: the leaves each worker accumulated (``zeros`` marks an all-zero gradient).
    ``hang``: each blocked send, why it gets no gradient, its recv with the variable and scenario
    line to fix, the blocked workers, the recvs that never run, the wait chain and the fixes.
    ``error``: the worker, node and message, the chain the error travelled and the workers never
    told. Tolerates missing keys (older traces, other modes).
    """
    out: list[Text] = []
    outcome = replay.outcome
    style = _OUTCOME_STYLES.get(outcome, "bold")
    word = outcome if outcome == "completed" else outcome.upper()
    if outcome == "completed":
        out.extend(_styled_head(word, "every worker finished its backward", style, width))
        if replay.events:
            final = replay.state_at(len(replay.events) - 1)
            nodes = trace.node_map()
            extra = getattr(replay, "accumulated", None)
            info: dict[str, Any] = extra if isinstance(extra, dict) else {}
            for w in trace.workers:
                ws = final.workers.get(w)
                if ws is None or not ws.accumulated:
                    continue
                names = []
                for nid, times in sorted(ws.accumulated.items()):
                    name = _leaf_name(nodes.get(nid), nid, times)
                    meta = info.get(nid)
                    if isinstance(meta, dict) and meta.get("zero"):
                        name += " (zeros)"
                    names.append(name)
                out.extend(_wrapped_lines(f"  {w} gradients: ", "    ", ", ".join(names), width))
        return out
    if outcome == "hang":
        hang = replay.hang or {}
        summary = str(hang.get("summary") or "the backward never completes")
        out.extend(_styled_head(word, summary, style, width))
        for b in hang.get("blocked_sends") or []:
            label = b.get("label") or (message_label(b["msg_id"])
                                       if b.get("msg_id") is not None else "?")
            out.extend(_wrapped_lines("  blocked send: ", "    ",
                                      f"{b.get('node', '?')} (message {label}) never gets a "
                                      "gradient", width, style="red"))
            if b.get("reason"):
                out.extend(_wrapped_lines("    why: ", "      ", str(b["reason"]), width))
            where = [str(b["recv"])] if b.get("recv") else ["no recv in the trace"]
            if b.get("var"):
                where.append(f"variable `{b['var']}`")
            if b.get("line") is not None:
                where.append(f"line {b['line']}")
            out.extend(_wrapped_lines("    its recv: ", "      ", " · ".join(where), width))
        for bw in hang.get("blocked_workers") or []:
            if isinstance(bw, dict):
                text = f"{bw.get('worker', '?')} waits for {bw.get('waiting_for') or 'ever'}"
            else:
                text = str(bw)
            out.extend(_wrapped_lines("  blocked: ", "    ", text, width))
        for r in hang.get("unreachable_recvs") or []:
            if isinstance(r, dict):
                text = f"{r.get('node', '?')}: {r.get('reason') or 'never runs'}"
            else:
                text = str(r)
            out.extend(_wrapped_lines("  never runs: ", "    ", text, width))
        chain = hang.get("chain") or []
        if chain:
            out.append(Text("  chain:"))
            for c in chain:
                out.extend(_wrapped_lines("    ", "      ", str(c), width))
        for fix in hang.get("fixes") or []:
            out.extend(_wrapped_lines("  fix: ", "    ", str(fix), width, style="yellow"))
        return out
    if outcome == "error":
        err = replay.error or {}
        what = "crashed" if err.get("crash") else "raised"
        out.extend(_styled_head(word, f"{err.get('worker', '?')} {what} in "
                                f"{err.get('node') or '?'}", style, width))
        out.extend(_wrapped_lines("  message: ", "    ", str(err.get("message", "")), width,
                                  style="red"))
        chain = err.get("chain") or []
        if chain:
            out.extend(_wrapped_lines("  travelled: ", "    ",
                                      " → ".join(str(c) for c in chain), width))
        unnotified = err.get("unnotified") or []
        if unnotified:
            out.extend(_wrapped_lines("  never told: ", "    ",
                                      ", ".join(str(u) for u in unnotified)
                                      + " (off the first-message chain; their state stays stale)",
                                      width))
        return out
    out.extend(_styled_head(word, "", style, width))
    return out


def _styled_head(word: str, rest: str, style: str, width: int | None) -> list[Text]:
    """Return ``outcome: WORD — rest``, wrapped with a hanging indent."""
    lines = list(_wrapped_lines("outcome: ", " " * 9, f"{word} — {rest}" if rest else word, width))
    lines[0].stylize("bold", 0, len("outcome: "))
    lines[0].stylize(style, len("outcome: "), len("outcome: ") + len(word))
    return lines


def _leaf_name(node: Node | None, node_id: str, times: int = 1) -> str:
    name = (node.var if node is not None and node.var else None) or node_label(node_id)
    return f"{name} ×{times}" if times > 1 else name


# -- the log ---------------------------------------------------------------------------------

def render_log(trace: Trace, replay: ReplayLike, *, worker: str | None = None,
               start: int | None = None, end: int | None = None,
               agreement: dict[str, Any] | None = None,
               width: int | None = None) -> Iterator[Text]:
    """Yield the replay as a numbered log, one ``Text`` line per event, then the outcome.

    Each event line is ``<step> <worker> <tag> <sentence>`` (step right-aligned); a blank line and
    a heading mark each pass; the outcome lines follow (the hang or error explanation), then the
    agreement sentence when ``agreement`` (``distviz.replay.agreement.compare``) is given.
    ``worker`` keeps only that worker's events; ``start``/``end`` keep steps ``start..end``
    inclusive. With ``width``, long sentences wrap under the sentence column (print the lines
    with ``soft_wrap=True`` so rich does not wrap them again); without it, one event is one line.

    Streams: O(1) work per event, so a huge trace prints at constant speed per step.
    Raises ``ValueError`` for an unknown ``worker``.
    """
    if worker is not None and worker not in trace.workers:
        raise ValueError(f"unknown worker {worker!r} (workers: {', '.join(trace.workers)})")
    events = replay.events
    last = len(events) - 1
    lo = 0 if start is None else max(start, 0)
    hi = last if end is None else min(end, last)
    step_w = max(4, len(str(max(last, 0))))
    worker_w = max((len(w) for w in trace.workers), default=6)
    n_passes = max(len(trace.passes), 1)
    title = Text(f"FAST-mode replay: {len(trace.workers)} workers, {len(trace.nodes)} nodes, "
                 f"{len(trace.passes)} pass{'es' if len(trace.passes) != 1 else ''}, "
                 f"{len(events)} steps", style="bold")
    if worker is not None or start is not None or end is not None:
        shown = [f"worker {worker}"] if worker is not None else []
        if start is not None or end is not None:
            shown.append(f"steps {lo}..{hi}")
        title.append(" (showing " + ", ".join(shown) + ")", style="dim")
    yield title
    current_pass: int | None = None
    for i in range(lo, hi + 1):
        ev = events[i]
        if worker is not None and ev.worker is not None and ev.worker != worker:
            continue
        if ev.pass_index != current_pass:
            current_pass = ev.pass_index
            yield Text("")
            yield from _pass_heading(trace, ev.pass_index, n_passes, width)
        tag = ACTION_TAGS.get(ev.action, ev.action)
        tag_style = _TAG_STYLES.get(ev.action, "")
        prefix = Text(f"{ev.step:>{step_w}} ", style="dim")
        prefix.append(f"{(ev.worker or '-'):<{worker_w}}", style="bold" if ev.worker else "dim")
        prefix.append("  ")
        prefix.append(f"{tag:<{_TAG_WIDTH}}", style=tag_style)
        prefix.append("  ")
        sentence_style = "red" if ev.action in ("error", "crash", "hang") else ""
        yield _wrap(prefix, event_sentence(ev), sentence_style, width)
    yield Text("")
    yield from explain_outcome(trace, replay, width=width)
    if agreement is not None:
        yield from _agreement_lines(agreement, width)


def _pass_heading(trace: Trace, index: int, n_passes: int, width: int | None) -> Iterator[Text]:
    text = ""
    if 0 <= index < len(trace.passes):
        p = trace.passes[index]
        roots = ", ".join(p.root_vars) if p.root_vars else ", ".join(p.roots)
        text = (f"backward from {roots} on {trace.initiator} · "
                f"retain_graph={p.retain_graph}")
    head = f"pass {index + 1}/{n_passes}"
    lines = list(_wrapped_lines(f"{head} · " if text else head, "  ", text, width))
    lines[0].stylize("bold underline", 0, len(head))
    yield from lines


def _agreement_lines(agreement: dict[str, Any], width: int | None) -> Iterator[Text]:
    text = str(agreement.get("text") or "")
    exact = agreement.get("exact")
    status = agreement.get("status")
    style = {"match": "green", "mismatch": "red"}.get(str(status), "yellow")
    if isinstance(agreement.get("smart"), dict):
        yield from _wrapped_lines("SMART prediction (no PyTorch to check against): ", "  ",
                                  text, width, style="yellow")
        return
    if not text:
        text = {True: "matches the real run exactly", False: "differs from the real run",
                None: "no real run to compare with"}.get(exact, "")
    yield from _wrapped_lines("agreement with the real run: ", "  ", text, width, style=style)


# -- one screen of the step-through -----------------------------------------------------------

def render_state(trace: Trace, replay: ReplayLike, step: int, *, focus: str | None = None,
                 max_items: int = 8) -> RenderableType:
    """Return one screen: the state of every worker after ``step`` (``-1``: before any step).

    Shows a header ``step 5/23 · pass 1/1``, the event sentence, one panel per worker
    (dependency counts of pending nodes, ready queue in pop order, current call, calls waiting,
    sends still waiting for a gradient, accumulated leaves, done flag), the messages in flight,
    and on a final hang or error step a panel that explains it. ``focus`` marks one worker's
    panel. Lists longer than ``max_items`` end with ``… N more``.
    Raises ``IndexError`` when ``step`` is outside ``-1 .. len(events) - 1``.
    """
    events = replay.events
    last = len(events) - 1
    if step < -1 or step > last:
        raise IndexError(f"step {step} is outside -1..{last}")
    state = replay.state_at(step)
    event = events[step] if step >= 0 else None
    n_passes = max(len(trace.passes), 1)
    nodes = trace.node_map()

    header = Text()
    if event is None:
        header.append(f"step -/{last}", style="bold")
        header.append(" · before the first event")
    else:
        header.append(f"step {step}/{last}", style="bold")
        header.append(f" · pass {event.pass_index + 1}/{n_passes}")
        header.append(f" · {event.worker or '-'} · ")
        header.append(ACTION_TAGS.get(event.action, event.action),
                      style=_TAG_STYLES.get(event.action, ""))
    sentence = Text(event_sentence(event) if event else "nothing has run yet",
                    style="red" if event and event.action in ("error", "crash", "hang") else "")

    panels = [_worker_panel(trace, nodes, w, state.workers.get(w, WorkerState()), event,
                            focus == w, max_items) for w in trace.workers]
    if len(panels) <= 4:
        grid = Table.grid(expand=True, padding=(0, 1))
        for _ in panels:
            grid.add_column(ratio=1)
        grid.add_row(*panels)
        body: RenderableType = grid
    else:
        body = Columns(panels, equal=True)

    parts: list[RenderableType] = [header, sentence, body, _in_flight_line(state, max_items)]
    final_bad = step == last and replay.outcome in ("hang", "error")
    if final_bad or (event is not None and event.action in ("hang", "error", "crash")):
        title = "why it hangs" if replay.outcome == "hang" else "why it failed"
        parts.append(Panel(_Explanation(trace, replay), title=title, border_style="red",
                           title_align="left"))
    return Group(*parts)


class _Explanation:
    """``explain_outcome`` wrapped at render time to the width it is given (hanging indents)."""

    def __init__(self, trace: Trace, replay: ReplayLike) -> None:
        self.trace = trace
        self.replay = replay

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from explain_outcome(self.trace, self.replay, width=options.max_width)


def _worker_panel(trace: Trace, nodes: dict[str, Node], worker: str, ws: WorkerState,
                  event: Event | None, focused: bool, max_items: int) -> Panel:
    current = event.node if (event is not None and event.worker == worker
                              and event.action in _NODE_ACTIONS) else None
    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column()

    if ws.done:
        status = Text("done", style="green")
    elif not ws.initialized:
        status = Text("not started", style="dim")
    elif ws.current_call is not None:
        status = Text(f"running call {ws.current_call}")
    else:
        status = Text("waiting")
    status.append(f" · outstanding {ws.outstanding}", style="dim")
    grid.add_row("status", status)
    if current is not None:
        grid.add_row("now", Text(node_label(current), style="bold"))

    def listing(items: list[str]) -> Text:
        if not items:
            return Text("—", style="dim")
        return Text("\n".join(_more(items, max_items)))

    deps = sorted(ws.deps.items(), key=lambda kv: (nodes[kv[0]].seq if kv[0] in nodes else 0,
                                                     kv[0]), reverse=True)
    grid.add_row("pending", listing([f"{node_label(n)} ({c})" for n, c in deps]))
    grid.add_row("queue", listing([node_label(n) for n in ws.queue]))
    if ws.pending_calls:
        grid.add_row("calls", listing([node_label(n) for n in ws.pending_calls]))
    sends = []
    for s in ws.waiting_sends:
        node = nodes.get(s)
        label = f" {message_label(node.msg_id)}" if node is not None and node.msg_id is not None \
            else ""
        sends.append(f"{node_label(s)}{label}")
    grid.add_row("sends", listing(sends))
    acc = [_leaf_name(nodes.get(nid), nid, times) for nid, times in sorted(ws.accumulated.items())]
    grid.add_row("grads", listing(acc))
    ran = Text(str(len(ws.executed)))
    if ws.executed:
        ran.append(f" (last {node_label(ws.executed[-1])})", style="dim")
    grid.add_row("ran", ran)

    border = "green" if ws.done else ""
    if event is not None and event.worker == worker:
        border = "bold " + (border or "blue")
    title = f"▶ {worker}" if focused else worker
    return Panel(grid, title=title, title_align="left", border_style=border or "none",
                 padding=(0, 1))


def _in_flight_line(state: ReplayState, max_items: int) -> Text:
    line = Text("messages in flight: ", style="bold")
    if not state.in_flight:
        line.append("none", style="dim")
        return line
    items = []
    for m in state.in_flight:
        label = m.get("label") or (message_label(m["msg_id"]) if "msg_id" in m else "?")
        items.append(f"{label} {m.get('from', '?')} → {m.get('to', '?')}")
    line.append(", ".join(_more(items, max_items)), style="magenta")
    return line


# -- the graph -------------------------------------------------------------------------------

def initial_dependencies(trace: Trace, pass_index: int = 0) -> dict[str, int | None]:
    """Return FAST mode's initial dependency count of every node (``None``: not reached).

    Per worker, a BFS from that worker's sends (plus the pass roots on the initiator) counts one
    per edge from each reached node, as ``computeDependencies`` does. Roots and sends that no
    edge reaches have 0. Raises ``IndexError`` for a pass that does not exist (when any do).
    """
    nodes = trace.node_map()
    roots = list(trace.passes[pass_index].roots) if trace.passes else []
    deps: dict[str, int | None] = {n.id: None for n in trace.nodes}
    start = [r for r in roots] + [n.id for n in trace.nodes if n.kind == "send"]
    seen: set[str] = set()
    queue: deque[str] = deque()
    for s in start:
        if s not in seen:
            seen.add(s)
            deps[s] = 0
            queue.append(s)
    while queue:
        nid = queue.popleft()
        for e in nodes[nid].next:
            if e is None:
                continue
            tgt = e[0]
            deps[tgt] = (deps[tgt] or 0) + 1
            if tgt not in seen:
                seen.add(tgt)
                queue.append(tgt)
    return deps


def _pair_ends(trace: Trace) -> dict[str, str | None]:
    """Return ``{send or recv id: id of the other end or None}``."""
    out: dict[str, str | None] = {}
    for p in trace.pairs():
        if p["send"] is not None:
            out[p["send"]] = p["recv"]
        if p["recv"] is not None:
            out[p["recv"]] = p["send"]
    return out


def _graph_label(node: Node, deps: int | None, ends: dict[str, str | None]) -> Text:
    t = Text()
    if node.kind == "accumulate_grad":
        t.append(short_name(node.name), style="green")
        if node.var:
            t.append(f" {node.var}", style="bold green")
        if node.shape is not None:
            t.append(f" {list(node.shape)}", style="dim")
        if node.dtype:
            t.append(f" {node.dtype}", style="dim")
    elif node.kind in ("send", "recv"):
        t.append(node_label(node.id), style="magenta")
        label = message_label(node.msg_id) if node.msg_id is not None else "?"
        other = ends.get(node.id)
        arrow = "←" if node.kind == "send" else "→"
        t.append(f" {label} {arrow} ")
        if other is None:
            t.append("(no recv: never gets a gradient)" if node.kind == "send"
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


def render_graph(trace: Trace, max_nodes: int = 200, *, pass_index: int = 0) -> RenderableType:
    """Return each worker's graph as a rich ``Tree`` (one per worker), or a summary when big.

    Tree roots are the pass roots (initiator) then the sends by message id, then nodes nothing
    reaches. Children follow next edges in PyTorch's order; a node reached again is shown as a
    ``↺`` reference, not expanded. Labels carry the initial FAST ``deps`` count, send/recv pairs
    with both ends (``SendRpcBackward#2 1:0 ← worker0/RecvRpcBackward#0``) and leaves with their
    variable, shape and dtype. Walks with an explicit stack (no recursion), so deep graphs are
    fine. Above ``max_nodes`` nodes it returns per-worker counts by kind and a note.
    """
    if len(trace.nodes) > max_nodes:
        table = Table(title=f"graph: {len(trace.nodes)} nodes", title_justify="left")
        table.add_column("worker")
        for k in ("op", "send", "recv", "accumulate_grad"):
            table.add_column(k, justify="right")
        for w in trace.workers:
            counts = Counter(n.kind for n in trace.nodes if n.worker == w)
            table.add_row(w, *(str(counts.get(k, 0)) for k in
                               ("op", "send", "recv", "accumulate_grad")))
        note = Text(f"{len(trace.nodes)} nodes is more than max_nodes={max_nodes}; showing counts "
                    "by kind. Use `distviz export TRACE --format svg|html` for the whole graph.",
                    style="dim")
        return Group(table, note)

    nodes = trace.node_map()
    deps = initial_dependencies(trace, pass_index) if trace.passes else \
        {n.id: None for n in trace.nodes}
    ends = _pair_ends(trace)
    roots = set(trace.passes[pass_index].roots) if trace.passes else set()
    trees: list[RenderableType] = []
    for w in trace.workers:
        mine = [n for n in trace.nodes if n.worker == w]
        tree = Tree(Text(f"{w} ({len(mine)} nodes)", style="bold"), guide_style="dim")
        starts = [n.id for n in mine if n.id in roots]
        starts += [n.id for n in sorted((n for n in mine if n.kind == "send"),
                                        key=lambda n: n.msg_id or 0)]
        shown: set[str] = set()
        # explicit stack of (parent tree, node id, input_nr); reversed so edge order is kept
        stack: list[tuple[Tree, str, int]] = [(tree, s, 0) for s in reversed(starts)]
        pending_unreached = [n.id for n in mine if deps[n.id] is None]
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
            branch = parent.add(prefix + _graph_label(node, deps[nid], ends))
            for e in reversed(node.next):
                if e is not None:
                    stack.append((branch, e[0], e[1]))
        trees.append(tree)
    return Group(*trees)


# -- summary after recording -------------------------------------------------------------------

def render_summary(trace: Trace, *, max_items: int = 20) -> RenderableType:
    """Return a summary of a recorded trace: per worker its nodes by kind and its leaves
    (variable, shape, dtype), then every send/recv pair with both ends. Lists longer than
    ``max_items`` end with ``… N more``."""
    parts: list[RenderableType] = []
    head = Text(f"{len(trace.nodes)} nodes on {len(trace.workers)} workers", style="bold")
    head.append(f" · initiator {trace.initiator} · context {trace.context_id}"
                f" · {len(trace.passes)} backward pass{'es' if len(trace.passes) != 1 else ''}")
    parts.append(head)
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    table.add_column("worker")
    table.add_column("nodes by kind")
    table.add_column("leaves (var shape dtype)")
    for w in trace.workers:
        mine = [n for n in trace.nodes if n.worker == w]
        counts = Counter(n.kind for n in mine)
        kinds = ", ".join(f"{k} {counts[k]}" for k in ("op", "send", "recv", "accumulate_grad")
                          if counts.get(k))
        leaves = []
        for n in mine:
            if n.kind != "accumulate_grad":
                continue
            shape = "" if n.shape is None else " " + (str(list(n.shape)) if n.shape else "[]")
            leaves.append(f"{n.var or node_label(n.id)}{shape} {n.dtype or ''}".rstrip())
        table.add_row(w, f"{len(mine)}: {kinds}" if mine else "0",
                      "\n".join(_more(leaves, max_items)) or "—")
    parts.append(table)
    pairs = trace.pairs()
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
    if pairs:
        parts.append(msgs)
    else:
        parts.append(Text("no send/recv pairs (no RPC in the context)", style="dim"))
    return Group(*parts)
