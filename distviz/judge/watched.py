"""What a watched context is, and the sentences the judge says of it (pure, torch-free).

A watched context (``distviz.tracing.watch.watcher``) is recorded only when something happened in it:
its backward passed ``--hang-timeout`` (``hang``), returned after that (``returned``) or
raised (``raised``). Its graph was recorded while (or after) PyTorch's backward ran, with no
hooks on it: the trace has no per-node order, only the graph, the gradients accumulated when
it was recorded (``meta.traced.watched.gradients``) and how PyTorch's backward ended
(``Watched``). The judge (``distviz.judge.verdict.judge`` with ``watched=``) compares only the
outcome; the sentences it needs from the trace and the replay are here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from distviz.replay.result import Replay
from distviz.trace import Node, NodeKind, Trace, message_label, short_name
from distviz.words import plural

__all__ = ["Watched", "WatchedState", "answered_sends", "returned_sentence", "seconds_text",
           "slow_text"]

#: What happened in a watched context: past its deadline, returned after it, or raised.
WatchedState = Literal["hang", "returned", "raised"]


@dataclass(frozen=True, slots=True)
class Watched:
    """How PyTorch's backward of a watched context ended, as the watch saw it: ``state``;
    ``seconds`` it had run when recorded (``hang``) or when it ended; ``timeout``, the
    ``--hang-timeout``; ``error``, PyTorch's error text (``raised``); ``hung``: the watch had
    recorded it as a hang before it raised (an RPC time-out after the hang)."""

    state: WatchedState
    seconds: float
    timeout: float
    error: str | None = None
    hung: bool = False


def seconds_text(s: float) -> str:
    """``2.5 s``, or ``400 ms`` under a second."""
    return f"{s:.1f} s" if s >= 1 else f"{s * 1000:.0f} ms"


def _leaves(trace: Trace) -> tuple[list[str], list[str]]:
    """``(with a gradient so far, without)``: the leaves, by name, from the watch's record."""
    grads = (trace.meta.traced or {}).get("watched", {}).get("gradients") or {}
    have: list[str] = []
    lack: list[str] = []
    for n in trace.nodes:
        if n.kind == NodeKind.ACCUMULATE_GRAD:
            (have if n.id in grads else lack).append(n.var or f"{short_name(n.name)} on "
                                                     f"{n.worker}")
    return have, lack


_MANY = ""     # more than one origin reaches a node


def _origins(trace: Trace, roots: list[str]) -> dict[str, str]:
    """For each node, the one origin (a send node, or a root of the backward) whose gradient
    alone can reach it, or ``_MANY``: labels only go from unset to one origin to many, so the
    work list ends after at most two visits of each edge."""
    nodes = trace.node_map()
    label: dict[str, str] = {n.id: n.id for n in trace.nodes if n.kind == NodeKind.SEND}
    label.update((r, r) for r in roots if r in nodes)
    work = list(label)
    while work:
        nid = work.pop()
        mine = label[nid]
        for edge in nodes[nid].next:
            if edge is None or edge[0] not in nodes:
                continue
            have = label.get(edge[0])
            new = mine if have is None or have == mine else _MANY
            if new != have:
                label[edge[0]] = new
                work.append(edge[0])
    return label


def answered_sends(trace: Trace) -> list[str] | None:
    """The send nodes of a watched context whose gradient has arrived, as far as the
    gradients accumulated so far prove it: a leaf with a gradient that only one send's
    gradient can reach proves that send ran, a send that ran proves its recv's worker sent
    that gradient, and so on back. ``None`` when it cannot be told (a context of several
    passes: a gradient may come from an earlier one). A send not listed may still wait, or
    have run with nothing below it to show it."""
    if len(trace.passes) != 1:
        return None
    nodes = trace.node_map()
    grads = (trace.meta.traced or {}).get("watched", {}).get("gradients") or {}
    label = _origins(trace, trace.passes[0].roots)
    recv_of = {n.msg_id: n.id for n in trace.nodes if n.kind == NodeKind.RECV}
    ran: set[str] = set()
    work = [nid for nid in grads if nid in nodes]
    while work:
        origin = label.get(work.pop(), _MANY)
        if origin == _MANY or origin in ran:
            continue
        ran.add(origin)
        node = nodes[origin]
        if node.kind == NodeKind.SEND and node.msg_id in recv_of:
            work.append(recv_of[node.msg_id])   # the recv ran: it sent this gradient
    return sorted(n for n in ran if nodes[n].kind == NodeKind.SEND)


def _send_text(trace: Trace, node: Node) -> str:
    """A send by the program's words: its call and which way it goes."""
    if node.call is not None and 0 <= node.call < len(trace.rpc_calls):
        c = trace.rpc_calls[node.call]
        what = "arguments" if node.worker == c.caller else "result"
        return (f"{c.api}({c.func})'s {what} from {node.worker}"
                + (f" at {c.site}" if c.site else ""))
    label = f", message {message_label(node.msg_id)}" if node.msg_id is not None else ""
    return f"{short_name(node.name)} on {node.worker}{label}"


def _sends(trace: Trace, limit: int = 3) -> str:
    """Which sends got their gradient, and which may still wait."""
    sends = [n.id for n in trace.nodes if n.kind == NodeKind.SEND]
    if not sends:
        return "it has no sends"
    got = answered_sends(trace)
    if got is None:
        return (f"{plural(len(sends), 'send')}, of which the gradients cannot tell which got "
                "theirs (a context of several passes)")
    nodes = trace.node_map()
    wait = [_send_text(trace, nodes[n]) for n in sends if n not in got]
    done = [_send_text(trace, nodes[n]) for n in got]

    def some(texts: list[str]) -> str:
        more = f" and {plural(len(texts) - limit, 'more')}" if len(texts) > limit else ""
        return "; ".join(texts[:limit]) + more if texts else "none"

    return (f"sends whose gradient arrived (a leaf only they reach has one): {some(done)}; "
            f"sends that may still wait: {some(wait)}")


def slow_text(trace: Trace, timeout: float) -> str:
    """A backward past its deadline whose graph does not hang in FAST mode: what the watch's
    recording can tell."""
    have, lack = _leaves(trace)
    grads = (f"leaves with a gradient so far: {', '.join(have[:6]) or 'none'}; still without: "
             f"{', '.join(lack[:6]) or 'none'}")
    running = _running(trace)
    cause = (f"the program's own backward code is still running: {running}" if running else
             "a worker is slow or a message is lost")
    return (f"PyTorch's backward has not returned after {timeout:g} s, and the graph does not "
            f"hang in FAST mode (the replay of its graph, recorded then, completes): {cause}; "
            f"workers: {', '.join(trace.workers)}; {grads}; {_sends(trace)}")


def _running(trace: Trace, limit: int = 3) -> str | None:
    """The custom backwards the workers' threads were in when the watch recorded
    (``meta.traced.watched.busy``): ``worker1 is in Slow.backward at slow.py:13 in backward``."""
    busy = ((trace.meta.traced or {}).get("watched") or {}).get("busy") or {}
    found = [f"{worker} is in {b.get('function', '?')} at {b.get('where', '?')}"
             for worker, rows in sorted(busy.items()) if isinstance(rows, list)
             for b in rows if isinstance(b, dict)]
    more = f" (and {len(found) - limit} more)" if len(found) > limit else ""
    return "; ".join(found[:limit]) + more if found else None


def returned_sentence(seconds: float, timeout: float, replay: Replay) -> str:
    """A backward the watch took at its deadline returned: slow, not a hang (or a hang some
    worker got out of, said as it is)."""
    if replay.outcome == "hang":
        return (f"PyTorch's backward returned after {seconds_text(seconds)}, although the replay "
                "of its graph, recorded after the time-out, hangs; the graph was recorded while "
                "the backward ran (not compared)")
    return (f"PyTorch's backward returned after {seconds_text(seconds)}, later than "
            f"--hang-timeout ({timeout:g} s): slow, not a hang")
