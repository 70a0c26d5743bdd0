"""The verdict on one recorded context, in words (pure, torch-free).

``row`` makes the ``ContextRow`` the summary and ``index.json`` show from the one verdict on
the replay against what PyTorch did (``distviz.judge.verdict``, which every command uses). ``hang_text`` and ``error_text`` explain a hang and a backward error in
the program's own file names, lines and variable names (from the trace's call sites).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from distviz import torch_errors
from distviz.analyses.timing import Timing, analyze
from distviz.frames import display, is_own
from distviz.judge.verdict import judge
from distviz.torch_errors import ErrorKind
from distviz.trace import NodeKind, Trace, short_name
from distviz.trace.sections import Real
from distviz.tracing.shared.journal import ContextRow, RealState, VerdictStatus
from distviz.words import first_line, plural

if TYPE_CHECKING:  # pragma: no cover
    from distviz.replay.result import Replay
    from distviz.replay.values import Hang


def not_recorded(context_id: int, exc: BaseException,
                 entry: str = "dist_autograd.backward") -> str:
    """Why a ``dist_autograd.backward`` call (or another ``entry``: ``RRef.backward``) was not
    recorded, in one line."""
    text = first_line(str(exc))
    if torch_errors.classify(exc).kind in (ErrorKind.NO_CONTEXT, ErrorKind.NO_CURRENT_CONTEXT):
        return (f"{entry}({context_id}, ...) was called outside a dist_autograd "
                f"context (PyTorch: {text}); call it inside `with dist_autograd.context() as "
                "context_id:`")
    return f"{entry}({context_id}, ...) was not recorded: {text}"


def hang_text(trace: Trace, replay: Replay) -> str:
    """The hang explanation: the cause, who waits for whom, and the usual fixes."""
    hang: Hang | None = replay.hang
    if hang is None:
        return "no worker can make progress"
    lines = [hang.summary]
    lines.extend(f"  {step}" for step in hang.chain)
    fixes = [f for f in hang.fixes if "--mode smart" not in f]
    if fixes:
        lines.append("fixes: " + "; or ".join(fixes[:3]))
    return "\n".join(lines)


def _pass_site(trace: Trace, k: int) -> str | None:
    """Where the program called the backward of pass ``k`` (0-based), when known."""
    sites = (trace.meta.traced or {}).get("backward_sites") or []
    return sites[k] if k < len(sites) else None


def freed_text(trace: Trace, replay: Replay) -> str | None:
    """Why a pass meets saved tensors an earlier pass freed, in the program's terms (``None``
    for any other error): the node, and the pass without ``retain_graph`` that ran it."""
    err = replay.error
    if err is None or not err.freed or err.node is None:
        return None
    node = trace.node_map().get(err.node)
    what = f"{short_name(node.name) if node is not None else err.node} on {err.worker}"
    if node is not None and node.vars:
        what += f" (`{'`, `'.join(node.vars)}`)"
    site = _pass_site(trace, err.pass_index)
    head = (f"pass {err.pass_index + 1}" + (f" ({site})" if site else "")
            + f" goes through the graph a second time: {what} needs its saved tensors, but ")
    order = replay.order
    freer = next((k for k in range(err.pass_index) if not trace.passes[k].retain_graph
                  and err.node in order[k].get(err.worker, [])), None)
    if freer is None:
        return head + ("an earlier pass without retain_graph=True freed them; fix: pass "
                       "retain_graph=True to that backward")
    site = _pass_site(trace, freer)
    return head + (f"pass {freer + 1} freed them: it ran without retain_graph=True; fix: pass "
                   f"retain_graph=True to {f'the backward at {site}' if site else 'it'}")


def new_rpcs(before: Trace, after: Trace) -> str | None:
    """Why ``after`` (the context recorded again for a later pass) cannot hold the passes of
    ``before``: RPCs made since added send functions, which take part in every pass of a trace
    (FAST mode), though the earlier passes ran without them. ``None`` when there are none."""
    old = {n.id for n in before.nodes if n.kind == NodeKind.SEND}
    added = {n.msg_id for n in after.nodes if n.kind == NodeKind.SEND and n.id not in old}
    if not added:
        return None
    calls = [c for c in after.rpc_calls if added & set(c.msg_ids)]
    first = (f"{calls[0].api}({calls[0].func})" + (f" at {calls[0].site}" if calls[0].site
                                                    else "")) if calls else "an RPC"
    k = len(before.passes)
    kept = f"passes 1 to {k}" if k > 1 else "pass 1"
    more = ", ..." if len(calls) > 1 else ""
    return (f"the program made {plural(max(len(calls), 1), 'RPC')} in the context since pass "
            f"{k} ({first}{more}); a trace's passes share one graph, in which every send takes "
            f"part in each pass, so the trace keeps {kept}")


def predicted_error(trace: Trace, replay: Replay) -> str:
    """The error the replay predicts, explained (``freed_text``) or as PyTorch will say it."""
    freed = freed_text(trace, replay)
    if freed is not None:
        return freed
    err = replay.error
    if err is None:
        return "the backward raises"
    where = f" ({err.node.split('/', 1)[-1]} on {err.worker})" if err.node else ""
    return f"{first_line(err.message)}{where}"


def program_site(text: str) -> str | None:
    """The innermost frame of the program's own files in a (remote) traceback text."""
    found = [f for f in torch_errors.remote_frames(text) if is_own(f[0])]
    if not found:
        return None
    path, line, fn = found[-1]
    return f"{display(os.path.abspath(path))}:{line} in {fn}"


def error_text(trace: Trace, detail: str | None) -> str:
    """Explain a backward that raised: where the error came from and the node that ran last
    there."""
    real = trace.real if trace.real is not None else Real()
    message = real.error or "the backward raised"
    parts = [f"the backward raised: {message}"]
    ranks = trace.ranks if trace.ranks is not None else list(range(len(trace.workers)))
    nodes = torch_errors.error_nodes(detail or message)
    origin = None
    if nodes and nodes[-1] in ranks:
        origin = trace.workers[ranks.index(nodes[-1])]
    if origin is not None:
        last = [e for e in real.observed() if e.worker == origin]
        where = f"on {origin}"
        site = None
        if last:
            node = last[-1].node
            where += f" while running {node.split('/', 1)[1]}"
            site = (trace.meta.functions or {}).get(node)
        parts.append(where + (f" ({site})" if site else ""))
    site = program_site(detail or "")
    if site:
        parts.append(f"at {site}")
    gone = [u["worker"] for u in real.unreachable]
    if gone:
        parts.append(f"{', '.join(gone)} did not answer afterwards (the process died?)")
    return "; ".join(parts)


def zero_notes(trace: Trace, replay: Replay) -> list[str]:
    """The leaves whose gradient PyTorch's context holds as all zeros in a completed
    backward, grouped by why (``distviz why``'s fact: the RPC output the loss does not use,
    or a custom Function), one sentence each: ``ps.aux.weight, ps.aux.bias got an all-zero
    gradient: output 1 (`aux`) of rpc_sync(forward) to ps at ... is not used by the loss
    ...``."""
    real = trace.real
    if real is None or real.outcome != "completed":
        return []
    zero = [n for n in trace.nodes_of_kind(NodeKind.ACCUMULATE_GRAD)
            if bool((real.gradients.get(n.id) or {}).get("zero"))]
    if not zero:    # most contexts: ``why`` (and what it loads) is not needed
        return []
    from distviz.analyses.why import why

    grouped: dict[str, list[str]] = {}
    for n in zero:
        answer = why(trace, n.id, replay)
        fact = next((d for d in answer.details if d.startswith(ZERO_FACT)), None)
        if fact is not None:
            grouped.setdefault(fact[len(ZERO_FACT):].lstrip(": "), []).append(n.var or n.id)
    out = []
    for fact, names in grouped.items():
        one = len(names) == 1
        fix = (". Fix: use that result in the loss, or leave it out of what the RPC returns "
               "if it needs no gradient" if "FAST mode sends zeros" in fact else "")
        got = "an all-zero gradient" if one else "all-zero gradients"
        out.append(f"{', '.join(names)} got {got} in the context: {fact}{fix}")
    return out


def absent_notes(trace: Trace) -> list[str]:
    """The parameters on the context's workers that require grad and that no node of its
    graph accumulates into (``trace.absent_leaves``: ``not_reached``), one sentence per
    worker, with ``distviz why``'s answer for the first (the one fact): ``2 parameters on
    shard1 got no gradient (shard1.fc.weight, shard1.fc.bias): the parameter ...``."""
    by_worker: dict[str, list[str]] = {}
    for a in trace.absent_leaves:
        if a.parameter and a.why == "not_reached":
            by_worker.setdefault(a.worker, []).append(a.var)
    if not by_worker:
        return []
    from distviz.analyses.why import why

    out = []
    for worker, names in by_worker.items():
        shown = ", ".join(names[:NAMED]) + (f", {len(names) - NAMED} more"
                                            if len(names) > NAMED else "")
        answer = why(trace, names[0])
        out.append(f"{plural(len(names), 'parameter')} on {worker} got no gradient "
                   f"({shown}): {answer.summary}"
                   + (f". Fix: {answer.fixes[0]}" if answer.fixes else ""))
    return out


#: How many parameters a note names before it says how many more there are.
NAMED = 8
#: How ``distviz why`` states that PyTorch's gradient of a leaf is all zeros.
ZERO_FACT = "PyTorch's gradient is all zeros"


def _time_line(timing: Timing | None) -> str | None:
    """Where a real backward spent its time (``distviz replay``'s ``time:`` line, unprefixed):
    ``backward 2.9 ms (measured); critical path 30 nodes, 3 messages: compute ...``."""
    return timing.summary()[0].removeprefix("time: ") if timing is not None else None


def row(trace: Trace, replay: Replay, path: str, index: int, pid: int,
        seconds: dict[str, float], detail: str | None = None) -> ContextRow:
    """The summary row of one recorded context (``detail``: the full error text, if any)."""
    v = judge(trace, replay)
    outcome, label, text = v.outcome, v.status, v.text
    real = trace.real if trace.real is not None else Real()
    explanation: str | None = None
    if outcome == "unfinished":
        explanation = ("the process ended during the real backward (it was killed, or a "
                       "worker died); the trace holds the recorded graph")
    elif outcome == "hang":
        if replay.outcome == "hang" and replay.hang is not None:
            explanation = replay.hang.summary
        else:
            explanation = text     # the verdict's: not compared, a time-out is no proof
    elif outcome == "error":
        explanation = error_text(trace, detail)
        freed = freed_text(trace, replay) if replay.outcome == "error" else None
        if freed is not None:
            explanation = freed + "; " + torch_errors.shorten_freed(explanation)
    elif label == "differs":
        explanation = text
    timing = analyze(trace) if real.outcome == "completed" else None
    return ContextRow(
        file=path, initiator=trace.initiator, index=index, context_id=trace.context_id, pid=pid,
        workers=list(trace.workers), nodes=len(trace.nodes), messages=len(trace.pairs()),
        outcome=outcome, predicted=replay.outcome,
        real=RealState(real.outcome) if trace.real is not None else RealState.RUNNING,
        agreement=VerdictStatus(label), agreement_text=text, exit_code=v.exit_code,
        category=v.category,
        violations=len(v.violations),
        explanation=explanation, time=_time_line(timing), passes=len(trace.passes),
        shape=trace.shape(), seconds=dict(seconds))
