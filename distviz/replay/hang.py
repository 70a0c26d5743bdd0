"""Explain a FAST-mode hang in the user's terms.

FAST mode counts **every** send function of the context on a worker as part of the backward pass
(internals §2.2, fact 18). A send whose gradient never comes keeps its worker's graph task open
forever; a remote worker that never finishes never answers its first gradient message, so the
worker that sent it waits too, up to the initiator, whose ``backward()`` never returns.

``diagnose`` takes the replay state at the hang and says, for each send that never ran on a
worker that started the pass, which recv would have sent its gradient and why that recv never
ran: it is unreachable from the roots (an unused RPC result), it does not exist (an RPC made under
``torch.no_grad()``), or it is itself blocked. It names variables and source lines from the
trace's ``rpc_calls`` and ``vars`` when the recorder captured them.
"""

from __future__ import annotations

from typing import Any

from distviz.replay.fast import RECV, IndexedGraph, reachable_nodes
from distviz.replay.model import ReplayState
from distviz.trace import RpcCall, Trace, message_label

__all__ = ["diagnose"]

_PRIMARY = ("unused", "no_grad", "no_recv")


def _loss_phrase(root_vars: list[str]) -> str:
    if not root_vars:
        return "the loss"
    return "the loss (" + ", ".join(f"`{v}`" for v in root_vars) + ")"


def _call_phrase(rc: RpcCall) -> str:
    where = f" at line {rc.line}" if rc.line is not None else ""
    return f"{rc.api}({rc.func}){where}"


def diagnose(trace: Trace, state: ReplayState, *, graph: IndexedGraph | None = None,
             mode: str = "fast", pass_index: int | None = None) -> dict[str, Any]:
    """Return why the pass hangs at ``state``.

    The dict has ``blocked_sends`` (``node``, ``worker``, ``msg_id``, ``label``, ``recv``,
    ``recv_worker``, ``kind``: ``unused``/``no_grad``/``no_recv``/``blocked``, ``reason``: a
    sentence, ``var``, ``line``, ``call``: index into ``trace.rpc_calls``), ``unreachable_recvs``
    (``node``, ``worker``, ``vars``, ``reason``, ``blocks``), ``blocked_workers`` (``worker``,
    ``waiting_for``, ``sends``, ``acks``), ``chain`` (sentences from the cause up to the
    initiator), ``fixes`` (sentences), ``summary`` (one line), ``pass`` and ``mode``.
    ``graph`` reuses an ``IndexedGraph`` of ``trace``; ``pass_index`` defaults to the state's.
    Raises ``IndexError`` when the pass does not exist.
    """
    g = graph if graph is not None else IndexedGraph(trace)
    p = state.pass_index if pass_index is None else pass_index
    bp = trace.passes[p]
    reach = reachable_nodes(g, g.roots[p])
    nodes = trace.nodes
    ids = g.ids
    calls_by_msg: dict[int, int] = {}
    for k, call in enumerate(trace.rpc_calls):
        for m in call.msg_ids:
            calls_by_msg.setdefault(m, k)
    loss = _loss_phrase(bp.root_vars)

    def call_of(i: int) -> int | None:
        c = nodes[i].call
        if c is not None and 0 <= c < len(trace.rpc_calls):
            return c
        return calls_by_msg.get(g.msg[i])

    # -- 1. every send that never ran on a worker that started the pass ------------------------
    blocked: list[dict[str, Any]] = []
    blocked_send_of_msg: dict[int, str] = {}
    for w in trace.workers:
        ws = state.workers[w]
        if not ws.initialized:
            continue
        for sid in ws.waiting_sends:
            s = g.index[sid]
            m = g.msg[s]
            label = message_label(m)
            r = g.recv_by_msg.get(m, -1)
            c = call_of(s)
            if c is None and r >= 0:
                c = call_of(r)
            rc = trace.rpc_calls[c] if c is not None else None
            var: str | None = None
            src_line = rc.line if rc is not None else None
            recv_worker = g.workers[g.worker[r]] if r >= 0 else None
            if r < 0:
                if rc is not None and not rc.grad_enabled:
                    kind = "no_grad"
                    reason = (f"the RPC {_call_phrase(rc)} from {rc.caller} was made under "
                              f"torch.no_grad(), so the caller attached no RecvRpcBackward and "
                              f"nothing will ever send a gradient for message {label}")
                    var = rc.result_var
                else:
                    kind = "no_recv"
                    caller = rc.caller if rc is not None else f"worker rank {m >> 48}"
                    reason = (f"no worker holds a RecvRpcBackward for message {label} (the "
                              f"caller {caller} attached none), so nothing will ever send its "
                              "gradient")
            elif not reach[r]:
                kind = "unused"
                names = list(nodes[r].vars) or ([rc.result_var] if rc and rc.result_var else [])
                var = names[0] if names else None
                assigned = (", assigned to " + ", ".join(f"`{v}`" for v in names) + ",") \
                    if names else ""
                if rc is not None and rc.api == "remote" and rc.caller == w:
                    holder = f" (the RRef `{rc.result_var}`)" if rc.result_var else ""
                    reason = (f"the arguments sent by {_call_phrase(rc)}{holder} never get a "
                              f"gradient: the remote value is not fetched with to_here() into "
                              f"{loss}, so {recv_worker}'s RecvRpcBackward for them is never "
                              "reached")
                else:
                    if rc is not None:
                        what = f"the result of {_call_phrase(rc)}{assigned}"
                    else:
                        what = (f"the RPC result behind {g.disp(r)} on {recv_worker} (message "
                                f"{label}){assigned}")
                    reason = f"{what} is not used by {loss}"
            else:
                kind = "blocked"
                rws = state.workers[recv_worker] if recv_worker else None
                if rws is None or not rws.initialized:
                    reason = (f"{g.disp(r)} on {recv_worker} is needed by {loss}, but "
                              f"{recv_worker} never started this pass")
                else:
                    left = rws.deps.get(ids[r], 0)
                    reason = (f"{g.disp(r)} on {recv_worker} is needed by {loss} but still waits "
                              f"for {left} gradient{'s' if left != 1 else ''} that "
                              f"depend{'s' if left == 1 else ''} on other blocked sends")
            blocked.append({"node": sid, "worker": w, "msg_id": m, "label": label,
                            "recv": ids[r] if r >= 0 else None, "recv_worker": recv_worker,
                            "kind": kind, "reason": reason, "var": var, "line": src_line,
                            "call": c})
            blocked_send_of_msg[m] = sid

    # -- 2. recvs the roots never reach ---------------------------------------------------------
    unreachable: list[dict[str, Any]] = []
    for r, k in enumerate(g.kind):
        if k != RECV or reach[r]:
            continue
        m = g.msg[r]
        vs = list(nodes[r].vars)
        rcall = call_of(r)
        rc2 = trace.rpc_calls[rcall] if rcall is not None else None
        if not vs and rc2 is not None and rc2.result_var:
            vs = [rc2.result_var]
        held = (" (" + ", ".join(f"`{v}`" for v in vs) + ")") if vs else ""
        unreachable.append({
            "node": ids[r], "worker": g.workers[g.worker[r]], "vars": vs,
            "reason": (f"not reachable from the roots: nothing in {loss} uses this RPC "
                       f"result{held}, so it never sends a gradient for message "
                       f"{message_label(m)}"),
            "blocks": blocked_send_of_msg.get(m)})

    # -- 3. who waits for whom ------------------------------------------------------------------
    blocked_workers: list[dict[str, Any]] = []
    for w in trace.workers:
        ws = state.workers[w]
        if not ws.initialized:
            continue
        if not ws.done and ws.waiting_sends:
            sends = [b for b in blocked if b["worker"] == w]
            what = ", ".join(f"message {b['label']}" for b in sends[:4])
            more = f" and {len(sends) - 4} more" if len(sends) > 4 else ""
            blocked_workers.append({
                "worker": w, "sends": [b["node"] for b in sends], "acks": list(ws.unacked),
                "waiting_for": (f"gradients for {len(sends)} send"
                                f"{'s' if len(sends) != 1 else ''} ({what}{more})")})
        elif ws.unacked and not ws.acked_first:
            blocked_workers.append({
                "worker": w, "sends": [], "acks": list(ws.unacked),
                "waiting_for": ("the acknowledgement of message"
                                f"{'s' if len(ws.unacked) > 1 else ''} "
                                + ", ".join(ws.unacked))})
        elif not ws.done:
            blocked_workers.append({"worker": w, "sends": [], "acks": list(ws.unacked),
                                    "waiting_for": "queued work that never finishes"})

    chain: list[str] = []
    initiator = trace.initiator
    def is_cause(bw: dict[str, Any]) -> bool:
        return any(b["kind"] in _PRIMARY for b in blocked if b["worker"] == bw["worker"])

    # root causes first, then workers only held up behind them (a stable order)
    for bw in sorted(blocked_workers, key=lambda bw: 0 if is_cause(bw) else 1):
        if not bw["sends"]:
            continue
        w = bw["worker"]
        mine = [b for b in blocked if b["worker"] == w]
        first = next((b for b in mine if b["kind"] in _PRIMARY), mine[0])
        if first["kind"] in _PRIMARY:
            text = (f"{w} waits for a gradient for {g.disp(g.index[first['node']])} "
                    f"(message {first['label']}) that never comes")
        else:
            text = (f"{w} also waits for a gradient for {g.disp(g.index[first['node']])} "
                    f"(message {first['label']}), held up behind the sends above")
        if len(bw["sends"]) > 1:
            text += f" (and {len(bw['sends']) - 1} more send{'s' if len(bw['sends']) > 2 else ''})"
        if text not in chain:
            chain.append(text)
        cur = w
        hops = 0
        while cur != initiator and hops <= len(trace.workers):
            fm = state.workers[cur].first_message
            if fm is None:
                break
            parent = fm["from"]
            hop = (f"{parent} waits for {cur} to acknowledge message {fm['label']} (its first "
                   f"gradient message), which {cur} sends only when its own backward is done")
            if hop not in chain:
                chain.append(hop)
            cur = parent
            hops += 1
    if chain:
        chain.append(f"so backward() on {initiator} never returns")

    # -- 4. what to do --------------------------------------------------------------------------
    kinds = [b["kind"] for b in blocked]
    fixes: list[str] = []
    if "unused" in kinds:
        b = next(b for b in blocked if b["kind"] == "unused")
        v = f"`{b['var']}`" if b["var"] else "the RPC result"
        fixes.append(f"use {v} in the loss, so its gradient flows back")
        root = f"{b['var']}.sum()" if b["var"] else "result.sum()"
        fixes.append("pass it to backward as another root: "
                     f"dist_autograd.backward(context_id, [loss, {root}])")
        fixes.append("move the RPC outside the dist_autograd context, or into a separate "
                     "context, if its result needs no gradient")
        fixes.append("use a new dist_autograd.context() for every forward/backward iteration, "
                     "so sends left over from an earlier forward do not join this pass")
    if "no_grad" in kinds or "no_recv" in kinds:
        fixes.append("don't make Python-UDF or TorchScript RPCs under torch.no_grad() inside a "
                     "dist_autograd context: make the call outside the context, or detach the "
                     "tensors in the callee so no response send is created")
    if mode == "fast":
        fixes.append("run the replay with --mode smart to see what SMART mode (RFC #23110, "
                     "never implemented in PyTorch) would do: only the sends in the roots' "
                     "lineage take part")

    primary = [b for b in blocked if b["kind"] in _PRIMARY]
    head = primary[0] if primary else (blocked[0] if blocked else None)
    if head is not None:
        summary = (f"{head['worker']}'s {g.disp(g.index[head['node']])} for message "
                   f"{head['label']} never gets a gradient: {head['reason']}")
        if len(primary) > 1:
            summary += f" ({len(primary) - 1} more such send{'s' if len(primary) > 2 else ''})"
    else:
        summary = "no worker can make progress, but the pass is not complete"
    return {"pass": p, "mode": mode, "blocked_sends": blocked, "unreachable_recvs": unreachable,
            "blocked_workers": blocked_workers, "chain": chain, "fixes": fixes,
            "summary": summary}
