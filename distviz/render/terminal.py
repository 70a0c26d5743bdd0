"""Terminal renderings of a trace and its FAST-mode replay (rich renderables, never printed here).

Everything in this module returns values: ``rich.text.Text`` lines, rich renderables or strings.
The CLI (``distviz/cli/``) and the step-through loop (``distviz/render/stepper.py``) are the
only places that print them. No ANSI codes are ever embedded: colour is carried as rich styles,
so ``Console(no_color=True)`` (``NO_COLOR``) or output to a pipe gives plain text.

Entry points:

``render_log(trace, replay, ...)``   the numbered event log, one line per event, streamed
``render_state(trace, replay, step)`` one screen of the step-through view (state after a step)

Each worker's graph as a tree and the per-worker summary are ``distviz.render.tree``'s
(``render_graph``, ``render_summary``); how the replay ended is ``distviz.render.explain``'s.

Legend (styles; all readable without colour):

- action tags: ``execute`` plain, ``accum`` green, ``send``/``receive``/``ack`` magenta,
  ``deps``/``task``/``end task`` cyan, ``done`` green, ``HANG``/``ERROR``/``CRASH`` bold red.
- worker panels: the worker of the current event has a bold border; a finished worker a green
  one; the worker in focus (stepper ``<``/``>``) is marked ``▶`` in the title. ``pending`` lists
  the nodes still waiting with their remaining dependency count.
- graph: see ``distviz.render.tree``.
"""

from __future__ import annotations

from collections.abc import Iterator

from rich.columns import Columns
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from distviz.judge.findings import Agreement
from distviz.render.explain import agreement_lines, explain_outcome
from distviz.render.terminal_text import leaf_name, more, node_label, wrap, wrapped_lines
from distviz.replay.values import ReplayEvent, ReplayLike, ReplayState, WorkerState
from distviz.trace import Node, Trace, message_label
from distviz.words import plural

__all__ = [
    "ACTION_TAGS",
    "event_sentence",
    "render_log",
    "render_state",
    ]

#: Short tag shown in the log's action column, per event action.
ACTION_TAGS: dict[str, str] = {
    "pass_start": "pass",
    "compute_dependencies": "deps",
    "call_start": "task",
    "execute": "execute",
    "accumulate": "accum",
    "send_gradient": "send",
    "receive_gradient": "receive",
    "call_end": "end task",
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


def event_sentence(event: ReplayEvent) -> str:
    """Return the one-sentence description of an event: the replay's own ``text`` when it has one,
    else a sentence made from the action, worker, node and message."""
    if event.text:
        return event.text
    who = event.worker or "?"
    node = node_label(event.node) if event.node else ""
    msg = event.message
    label = msg.label if msg is not None else ""
    if event.action == "execute":
        return f"{who} runs {node}"
    if event.action == "accumulate":
        return f"{who} accumulates the gradient of {event.detail.get('var') or node}"
    if event.action == "send_gradient":
        return f"{who} sends gradient message {label} to {(msg.to if msg else None) or '?'}"
    if event.action == "receive_gradient":
        return f"{who} receives gradient message {label} from {msg.sender if msg else '?'}"
    return " ".join(p for p in (who, event.action.replace("_", " "), node) if p)


# -- the log ---------------------------------------------------------------------------------

def render_log(trace: Trace, replay: ReplayLike, *, worker: str | None = None,
               start: int | None = None, end: int | None = None,
               agreement: Agreement | None = None,
               width: int | None = None, limit: int | None = None) -> Iterator[Text]:
    """Yield the replay as a numbered log, one ``Text`` line per event, then the outcome.

    Each event line is ``<step> <worker> <tag> <sentence>`` (step right-aligned); a blank line and
    a heading mark each pass; the outcome lines follow (the hang or error explanation), then the
    agreement sentence when ``agreement`` (``distviz.judge.agreement.compare``) is given.
    ``worker`` keeps only that worker's events; ``start``/``end`` keep steps ``start..end``
    inclusive. With ``width``, long sentences wrap under the sentence column (print the lines
    with ``soft_wrap=True`` so rich does not wrap them again); without it, one event is one line.
    With ``limit``, a range of more steps shows its first and last ``limit // 2`` and a line
    that says how many are left out and how to see them.

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
    yield _log_title(trace, len(events), worker, start, end, lo, hi)
    current_pass: int | None = None
    for i in _shown_steps(lo, hi, limit):
        if i < 0:
            yield Text(f"… {plural(-i, 'step', grouped=True)} not shown: pick any range with --from and --to "
                       "(or read them all with --json)", style="dim")
            current_pass = None
            continue
        ev = events[i]
        if worker is not None and ev.worker is not None and ev.worker != worker:
            continue
        if ev.pass_index != current_pass:
            current_pass = ev.pass_index
            yield Text("")
            yield from _pass_heading(trace, ev.pass_index, n_passes, width)
        tag = ACTION_TAGS.get(ev.action, ev.action)
        prefix = Text(f"{ev.step:>{step_w}} ", style="dim")
        prefix.append(f"{(ev.worker or '-'):<{worker_w}}", style="bold" if ev.worker else "dim")
        prefix.append("  ")
        prefix.append(f"{tag:<{_TAG_WIDTH}}", style=_TAG_STYLES.get(ev.action, ""))
        prefix.append("  ")
        sentence_style = "red" if ev.action in ("error", "crash", "hang") else ""
        yield wrap(prefix, event_sentence(ev), sentence_style, width)
    yield Text("")
    yield from explain_outcome(trace, replay, width=width)
    if agreement is not None:
        yield from agreement_lines(agreement, width)


def _shown_steps(lo: int, hi: int, limit: int | None) -> Iterator[int]:
    """The steps ``lo..hi``, or with ``limit`` and more steps than that, the first and last
    ``limit // 2`` with ``-(how many are left out)`` between them."""
    if limit is None or hi - lo + 1 <= limit:
        yield from range(lo, hi + 1)
        return
    half = max(limit // 2, 1)
    yield from range(lo, lo + half)
    yield -(hi - lo + 1 - 2 * half)
    yield from range(hi - half + 1, hi + 1)


def _log_title(trace: Trace, n_events: int, worker: str | None, start: int | None,
               end: int | None, lo: int, hi: int) -> Text:
    title = Text(f"FAST-mode replay: {plural(len(trace.workers), 'worker')}, "
                 f"{plural(len(trace.nodes), 'node')}, "
                 f"{plural(len(trace.passes), 'pass', 'passes')}, {plural(n_events, 'step')}",
                 style="bold")
    if worker is not None or start is not None or end is not None:
        shown = [f"worker {worker}"] if worker is not None else []
        if start is not None or end is not None:
            shown.append(f"steps {lo}..{hi}")
        title.append(" (showing " + ", ".join(shown) + ")", style="dim")
    return title


def _pass_heading(trace: Trace, index: int, n_passes: int, width: int | None) -> Iterator[Text]:
    text = ""
    if 0 <= index < len(trace.passes):
        p = trace.passes[index]
        roots = ", ".join(p.root_vars) if p.root_vars else ", ".join(p.roots)
        text = (f"backward from {roots} on {trace.initiator} · "
                f"retain_graph={p.retain_graph}")
    head = f"pass {index + 1}/{n_passes}"
    lines = list(wrapped_lines(f"{head} · " if text else head, "  ", text, width))
    lines[0].stylize("bold underline", 0, len(head))
    yield from lines


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
    nodes = trace.node_map()
    sentence = Text(event_sentence(event) if event else "nothing has run yet",
                    style="red" if event and event.action in ("error", "crash", "hang") else "")
    panels = [_worker_panel(nodes, w, state.workers.get(w, WorkerState()), event,
                            focus == w, max_items) for w in trace.workers]
    if len(panels) <= 4:
        grid = Table.grid(expand=True, padding=(0, 1))
        for _ in panels:
            grid.add_column(ratio=1)
        grid.add_row(*panels)
        body: RenderableType = grid
    else:
        body = Columns(panels, equal=True)
    parts: list[RenderableType] = [_state_header(trace, step, last, event), sentence, body,
                                   _in_flight_line(state, max_items)]
    final_bad = step == last and replay.outcome in ("hang", "error")
    if final_bad or (event is not None and event.action in ("hang", "error", "crash")):
        title = "why it hangs" if replay.outcome == "hang" else "why it failed"
        parts.append(Panel(_Explanation(trace, replay), title=title, border_style="red",
                           title_align="left"))
    return Group(*parts)


def _state_header(trace: Trace, step: int, last: int, event: ReplayEvent | None) -> Text:
    header = Text()
    if event is None:
        header.append(f"step -/{last}", style="bold")
        header.append(" · before the first event")
        return header
    header.append(f"step {step}/{last}", style="bold")
    header.append(f" · pass {event.pass_index + 1}/{max(len(trace.passes), 1)}")
    header.append(f" · {event.worker or '-'} · ")
    header.append(ACTION_TAGS.get(event.action, event.action),
                  style=_TAG_STYLES.get(event.action, ""))
    return header


class _Explanation:
    """``explain_outcome`` wrapped at render time to the width it is given (hanging indents)."""

    def __init__(self, trace: Trace, replay: ReplayLike) -> None:
        self.trace = trace
        self.replay = replay

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from explain_outcome(self.trace, self.replay, width=options.max_width)


def _worker_panel(nodes: dict[str, Node], worker: str, ws: WorkerState, event: ReplayEvent | None,
                  focused: bool, max_items: int) -> Panel:
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
        status = Text(f"running task {ws.current_call}")
    else:
        status = Text("waiting")
    status.append(f" · outstanding {ws.outstanding}", style="dim")
    grid.add_row("status", status)
    if current is not None:
        grid.add_row("now", Text(node_label(current), style="bold"))

    def listing(items: list[str]) -> Text:
        if not items:
            return Text("—", style="dim")
        return Text("\n".join(more(items, max_items)))

    deps = sorted(ws.deps.items(), key=lambda kv: (nodes[kv[0]].seq if kv[0] in nodes else 0,
                                                     kv[0]), reverse=True)
    grid.add_row("pending", listing([f"{node_label(n)} ({c})" for n, c in deps]))
    grid.add_row("queue", listing([node_label(n) for n in ws.queue]))
    if ws.pending_calls:   # messages in flight to this worker: each starts a call on arrival
        grid.add_row("incoming", listing([f"{node_label(n)}{_message_of(nodes, n)} (in flight)"
                                          for n in ws.pending_calls]))
    sends = [f"{node_label(s)}{_message_of(nodes, s)}" for s in ws.waiting_sends]
    grid.add_row("sends", listing(sends))
    grid.add_row("grads", listing([leaf_name(nodes.get(nid), nid, times)
                                   for nid, times in sorted(ws.accumulated.items())]))
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


def _message_of(nodes: dict[str, Node], nid: str) -> str:
    """`` message 0:1`` for a send, ``""`` for a node without a message."""
    node = nodes.get(nid)
    return f" {message_label(node.msg_id)}" if node is not None and node.msg_id is not None \
        else ""


def _in_flight_line(state: ReplayState, max_items: int) -> Text:
    line = Text("messages in flight: ", style="bold")
    if not state.in_flight:
        line.append("none", style="dim")
        return line
    items = [f"{m.label} {m.sender} → {m.to or '?'}" for m in state.in_flight]
    line.append(", ".join(more(items, max_items)), style="magenta")
    return line
