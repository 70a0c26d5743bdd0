"""Explain a FAST-mode hang in the user's terms (called once the engine has stopped).

FAST mode counts **every** send function of the context on a worker as part of the backward pass
(internals §2.2, fact 18). A send whose gradient never comes keeps its worker's graph task open
forever; a remote worker that never finishes never answers its first gradient message, so the
worker that sent it waits too, up to the initiator, whose ``backward()`` never returns.

``diagnose`` takes the replay state at the hang and says, for each send that never ran on a
worker that started the pass, which recv would have sent its gradient and why that recv never
ran: it is unreachable from the roots (an unused RPC result, or one overwritten by a later call,
as in a loop), it does not exist (an RPC made under ``torch.no_grad()``), or it is itself
blocked. It names variables and source lines from the trace's ``rpc_calls`` and ``vars``. The
recorder cannot see the message ids of an RPC made under ``torch.no_grad()`` (the caller attaches
nothing), so that call is found from the request the callee received (``rpc_calls.infer_call``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from distviz.outcome import Mode
from distviz.replay.dropped import Drop, Lines
from distviz.replay.events import ordinal
from distviz.replay.graph import RECV, SEND, IndexedGraph, reachable_nodes
from distviz.replay.rpc_calls import CallIndex
from distviz.replay.values import (
    BlockedKind,
    BlockedSend,
    BlockedWorker,
    Hang,
    ReplayState,
    UnreachableRecv,
)
from distviz.trace import RpcCall, Trace, message_label
from distviz.words import plural, word_for

__all__ = ["diagnose", "starved_send"]

_PRIMARY = ("unused", "no_grad", "no_recv")


def _call_phrase(rc: RpcCall) -> str:
    where = f" at {rc.site}" if rc.site else (f" at line {rc.line}" if rc.line is not None else "")
    return f"{rc.api}({rc.func}){where}"


def _vars_phrase(names: list[str]) -> str:
    return ", ".join(f"`{v}`" for v in names)


@dataclass
class _Hung:
    """What every part of the diagnosis reads: the trace, the state at the hang, reachability."""

    trace: Trace
    g: IndexedGraph
    state: ReplayState
    reach: bytearray
    loss: str
    calls: CallIndex
    #: the program's lines of the initiator's calls (``distviz.replay.dropped``)
    lines: Lines
    #: a recv the roots do not reach but a send does only feeds results that never get a
    #: gradient themselves: by node, the recv without a gradient that is the cause (the first,
    #: in the program's order, whose send reaches it), or -1 (a send without a recv)
    origin: dict[int, int]
    #: whether the trace names its calls' sites (a traced program): its sentences then name
    #: calls and lines, not message ids, which depend on the order threads ran in
    sited: bool
    overwritten: set[str] = field(default_factory=set)   # blocked sends whose result was
                                                         # overwritten by a later call
    drops: dict[str, Drop] = field(default_factory=dict)  # blocked send -> its program line

    def rpc(self, c: int | None) -> RpcCall | None:
        return self.trace.rpc_calls[c] if c is not None else None

    def result(self, c: int | None, r: int) -> tuple[str, list[str], str | None]:
        """The RPC result behind recv ``r`` (made by call ``c``): ``(what, names, overwritten)``.

        ``what`` names the result for a sentence; ``names`` the variables that hold it (or held
        it); ``overwritten`` a phrase when a later call assigned the same variable.
        """
        rc = self.rpc(c)
        held = list(self.trace.nodes[r].vars)
        over = self.calls.overwritten_by(c, held) if c is not None else None
        if over is not None and rc is not None and rc.site is not None:
            drop = self.lines.drop_of(c) if c is not None else None
            over = over if drop is not None and drop.assigns_result else None
        names = self.calls.result_names(c, held)
        if rc is None:
            return "", names, None
        if over is not None:
            k, n = self.calls.iteration(c) if c is not None else (1, 1)
            nth = f"the {ordinal(k)} of {n} results of" if n > 1 else "the result of"
            return f"{nth} {_call_phrase(rc)}", names, over
        return f"the result of {_call_phrase(rc)}", names, None


def diagnose(trace: Trace, state: ReplayState, *, graph: IndexedGraph | None = None,
             mode: Mode = Mode.FAST, pass_index: int | None = None) -> Hang:
    """Return why the pass hangs at ``state`` (the replay state once the engine stopped).

    ``Hang.blocked_sends`` says for each blocked send why its gradient never comes (``kind``:
    ``unused``/``no_grad``/``no_recv``/``blocked``); ``unreachable_recvs`` the recvs the roots
    never reach; ``blocked_workers`` who waits for what; ``chain`` the wait from the cause up to
    the initiator; ``fixes`` what to do; ``summary`` one line. ``graph`` reuses an
    ``IndexedGraph`` of ``trace``; ``pass_index`` defaults to the state's. Raises
    ``IndexError`` when the pass does not exist.
    """
    g = graph if graph is not None else IndexedGraph(trace)
    p = state.pass_index if pass_index is None else pass_index
    hung = _hung(trace, g, state, p)
    blocked = _blocked_sends(hung)
    workers = _blocked_workers(hung, blocked)
    return Hang(pass_index=p, mode=mode, blocked_sends=tuple(blocked),
                unreachable_recvs=tuple(_unreachable_recvs(hung, blocked)),
                blocked_workers=tuple(workers), chain=tuple(_chain(hung, blocked, workers)),
                fixes=tuple(_fixes(hung, blocked, mode)), summary=_summary(hung, blocked))


# -- 1. every send that never ran on a worker that started the pass ---------------------------------

def _hung(trace: Trace, g: IndexedGraph, state: ReplayState, p: int) -> _Hung:
    """What the diagnosis of pass ``p`` reads, computed once."""
    root_vars = trace.passes[p].root_vars
    loss = "the loss" + (f" ({_vars_phrase(root_vars)})" if root_vars else "")
    reach = reachable_nodes(g, g.roots[p])
    calls = CallIndex(trace, g)
    return _Hung(trace, g, state, reach, loss, calls, Lines(trace, g, reach, p, calls),
                 _origins(trace, g, reach, calls),
                 any(rc.site is not None for rc in trace.rpc_calls))


def _origins(trace: Trace, g: IndexedGraph, reach: bytearray, calls: CallIndex
             ) -> dict[int, int]:
    """``_Hung.origin``: from each send that never gets a gradient because its recv is
    unreachable and reached by no send (the causes), or because it has no recv, every node it
    reaches is labelled with that cause, causes in a stable order (the initiator's calls in
    the order the program made them, then by site and message)."""
    fed = reachable_nodes(g, [i for i, k in enumerate(g.kind) if k == SEND])
    causes: list[tuple[tuple[int, str, int], int, int]] = []
    for i, k in enumerate(g.kind):
        if k != SEND or reach[i]:
            continue
        r = g.recv_by_msg.get(g.msg[i], -1)
        if r >= 0 and (reach[r] or fed[r]):
            continue
        c = calls.call_of(r if r >= 0 else i)
        rc = trace.rpc_calls[c] if c is not None else None
        if rc is not None and rc.caller != trace.initiator and not _answered(g, rc):
            continue    # a nested call still in flight: the outer call waits for its answer
        first = c if c is not None and rc is not None and rc.caller == trace.initiator else 1 << 30
        causes.append(((first, (rc.site or "") if rc is not None else "", g.msg[i]), i, r))
    origin: dict[int, int] = {}
    for _key, s, r in sorted(causes):
        stack = [s]
        while stack:
            x = stack.pop()
            for t in g.targets[x]:
                if t >= 0 and not reach[t] and t not in origin:
                    origin[t] = r
                    stack.append(t)
            if g.kind[x] == RECV and x != r:
                _to, nxt = g.target_send(g.msg[x])
                if nxt >= 0 and not reach[nxt] and nxt not in origin:
                    origin[nxt] = r
                    stack.append(nxt)
    return origin


def _answered(g: IndexedGraph, rc: RpcCall) -> bool:
    """Whether the callee sent a result with gradients back (a send of the call's on the
    callee): a call still in flight, as in a snapshot of a stuck forward, has none."""
    for m in rc.msg_ids:
        s = g.send_by_msg.get(m, -1)
        if s >= 0 and g.workers[g.worker[s]] == rc.callee:
            return True
    return False


def _blocked_sends(h: _Hung) -> list[BlockedSend]:
    """Every blocked send, per worker in a stable order: the program's calls in the order it
    made them, then by message (not the order threads happened to number them in)."""
    out: list[BlockedSend] = []
    for w in h.trace.workers:
        ws = h.state.workers[w]
        if ws.initialized:
            mine = [_why_blocked(h, w, h.g.index[sid]) for sid in ws.waiting_sends]
            out.extend(sorted(mine, key=lambda b: _stable_key(h, b)))
    return out


def _stable_key(h: _Hung, b: BlockedSend) -> tuple[int, int, str, int]:
    """Causes first; then the call's place among its caller's calls where the program made it
    in one thread (the initiator's), then its site; then the message id."""
    primary = 0 if b.kind in _PRIMARY else 1
    rc = h.rpc(b.call)
    if rc is None:
        return primary, 1 << 30, "", b.msg_id
    order = b.call if rc.caller == h.trace.initiator and b.call is not None else 1 << 29
    return primary, order, rc.site or "", b.msg_id


def _why_blocked(h: _Hung, w: str, s: int) -> BlockedSend:
    """Why send ``s`` on ``w`` never gets its gradient."""
    g = h.g
    m = g.msg[s]
    label = message_label(m)
    r = g.recv_by_msg.get(m, -1)
    c = h.calls.call_of(s)
    if c is None and r >= 0:
        c = h.calls.call_of(r)
    recv_worker = g.workers[g.worker[r]] if r >= 0 else None
    var: str | None = None
    kind: BlockedKind
    if r < 0:
        if c is None:
            c = h.calls.infer_call(s)
        kind, reason, var = _no_recv(h, s, c, label)
    elif not h.reach[r] and h.origin.get(r, r) < 0:
        kind = "blocked"
        reason = _feeds_blocked(h, r, c, recv_worker)
    elif not h.reach[r]:
        kind = "unused"
        cause, sender = h.origin.get(r, r), w
        if cause != r:    # it only feeds a result that is itself unused: that one is the cause
            c = h.calls.call_of(cause)
            sent = g.send_by_msg.get(g.msg[cause], -1)
            sender = g.workers[g.worker[sent]] if sent >= 0 else w
        reason, var, over, drop = _unused(h, sender, cause, c, g.workers[g.worker[cause]])
        if over:
            h.overwritten.add(g.ids[s])
        elif drop is not None:
            h.drops[g.ids[s]] = drop
    else:
        kind = "blocked"
        reason = _held_up(h, r, recv_worker)
    rc = h.rpc(c)
    return BlockedSend(node=g.ids[s], worker=w, msg_id=m, label=label,
                       recv=g.ids[r] if r >= 0 else None, recv_worker=recv_worker, kind=kind,
                       reason=reason, var=var, line=rc.line if rc is not None else None, call=c)


def _no_recv(h: _Hung, s: int, c: int | None, label: str
             ) -> tuple[BlockedKind, str, str | None]:
    """A send without a recv: ``(kind, reason, var)``."""
    rc = h.rpc(c)
    if rc is not None and c is not None and not rc.grad_enabled:
        held = f", assigned to `{rc.result_var}`," if rc.result_var else ""
        k, n = h.calls.iteration(c)
        which = f"the {ordinal(k)} of {n} RPCs" if n > 1 else "the RPC"
        drop = h.lines.drop_of(c)
        if drop is not None:
            h.drops[h.g.ids[s]] = drop
            which = drop.which(rc).replace("results of", "RPCs").replace("the result of",
                                                                         "the RPC")
            held = f", made through {drop.line()},"
        message = "" if h.sited else f" for message {label}"
        reason = (f"{which} {_call_phrase(rc) if drop is None else ''}".rstrip()
                  + f" from {rc.caller}{held} was made under torch.no_grad(), so "
                  f"{rc.caller} attached no RecvRpcBackward for its result and nothing will "
                  f"ever send a gradient{message}")
        return "no_grad", reason, rc.result_var
    caller = rc.caller if rc is not None else h.calls.caller_of(s)
    by = f" (the caller {caller} attached none)" if caller is not None else ""
    return ("no_recv", f"no worker holds a RecvRpcBackward for message {label}{by}, so nothing "
            "will ever send its gradient", None)


def _unused(h: _Hung, w: str, r: int, c: int | None,
            recv_worker: str | None) -> tuple[str, str | None, bool, Drop | None]:
    """A recv the roots never reach: ``(reason, var, overwritten, the program's line that
    dropped it)``."""
    rc = h.rpc(c)
    what, names, over = h.result(c, r)
    var = names[0] if names else None
    if rc is not None and rc.api == "remote" and rc.caller == w:
        holder = f" (the RRef `{rc.result_var}`)" if rc.result_var else ""
        return (f"the arguments sent by {_call_phrase(rc)}{holder} never get a gradient: the "
                f"remote value is not fetched with to_here() into {h.loss}, so {recv_worker}'s "
                "RecvRpcBackward for them is never reached"), var, False, None
    drop = h.lines.drop_of(c) if c is not None and over is None else None
    if drop is not None and rc is not None:
        return drop.reason(rc), var, False, drop
    assigned = f", assigned to {_vars_phrase(names)}," if names else ""
    if rc is None:
        what = (f"the RPC result behind {h.g.disp(r)} on {recv_worker} (message "
                f"{message_label(h.g.msg[r])})")
    if over is not None:
        return (f"{what}{assigned} was overwritten by {over}, so {h.loss} never uses it", var,
                True, None)
    return f"{what}{assigned} is not used by {h.loss}", var, False, None


def _feeds_blocked(h: _Hung, r: int, c: int | None, recv_worker: str | None) -> str:
    """A recv the roots never reach but a send does: it only feeds results that never get a
    gradient themselves (the cause is theirs, named by their own blocked sends)."""
    rc = h.rpc(c)
    what = f" (the result of {_call_phrase(rc)})" if rc is not None else ""
    return (f"{h.g.disp(r)} on {recv_worker}{what} only feeds what {recv_worker} sends on "
            "through RPCs whose gradients never come themselves, so it never runs")


def _held_up(h: _Hung, r: int, recv_worker: str | None) -> str:
    """A recv the roots reach but that never runs: it waits behind other blocked sends."""
    rws = h.state.workers[recv_worker] if recv_worker else None
    name = h.g.disp(r)
    if rws is None or not rws.initialized:
        return f"{name} on {recv_worker} is needed by {h.loss}, but {recv_worker} never started this pass"
    left = rws.deps.get(h.g.ids[r], 0)
    return (f"{name} on {recv_worker} is needed by {h.loss} but still waits for "
            f"{plural(left, 'gradient')} that {word_for(left, 'depends', 'depend')} on other "
            "blocked sends")


# -- 2. recvs the roots never reach ---------------------------------------------------------------

def _unreachable_recvs(h: _Hung, blocked: list[BlockedSend]) -> list[UnreachableRecv]:
    g = h.g
    starved = {b.msg_id: b.node for b in blocked}
    out: list[UnreachableRecv] = []
    for r, k in enumerate(g.kind):
        if k != RECV or h.reach[r]:
            continue
        m = g.msg[r]
        _what, names, over = h.result(h.calls.call_of(r), r)
        held = f" ({_vars_phrase(names)})" if names else ""
        if over is not None:
            held = f" ({_vars_phrase(names)}, overwritten by {over})"
        out.append(UnreachableRecv(
            node=g.ids[r], worker=g.workers[g.worker[r]], vars=tuple(names),
            reason=(f"not reachable from the roots: nothing in {h.loss} uses this RPC "
                    f"result{held}, so it never sends a gradient for message {message_label(m)}"),
            blocks=starved.get(m)))
    return out


# -- 3. who waits for whom ------------------------------------------------------------------------

def _blocked_workers(h: _Hung, blocked: list[BlockedSend]) -> list[BlockedWorker]:
    out: list[BlockedWorker] = []
    for w in h.trace.workers:
        ws = h.state.workers[w]
        if not ws.initialized:
            continue
        acks = tuple(ws.unacked)
        if not ws.done and ws.waiting_sends:
            sends = [b for b in blocked if b.worker == w]
            what = ", ".join(f"message {b.label}" for b in sends[:4])
            more = f" and {len(sends) - 4} more" if len(sends) > 4 else ""
            out.append(BlockedWorker(
                worker=w, sends=tuple(b.node for b in sends), acks=acks,
                waiting_for=(f"gradients for {plural(len(sends), 'send')} "
                             f"({what}{more})")))
        elif ws.unacked and not ws.acked_first:
            out.append(BlockedWorker(
                worker=w, sends=(), acks=acks,
                waiting_for=(f"the acknowledgement of {word_for(len(acks), 'message')} "
                             + ", ".join(acks))))
        elif not ws.done:
            out.append(BlockedWorker(worker=w, sends=(), acks=acks,
                                     waiting_for="queued work that never finishes"))
    return out


def _chain(h: _Hung, blocked: list[BlockedSend], workers: list[BlockedWorker]) -> list[str]:
    """Sentences from each cause up to the initiator, root causes first."""
    g, initiator = h.g, h.trace.initiator
    causes = {b.worker for b in blocked if b.kind in _PRIMARY}
    chain: list[str] = []
    for bw in sorted(workers, key=lambda bw: 0 if bw.worker in causes else 1):
        if not bw.sends:
            continue
        w = bw.worker
        mine = [b for b in blocked if b.worker == w]
        first = next((b for b in mine if b.kind in _PRIMARY), mine[0])
        name = g.disp(g.index[first.node])
        if not h.sited:
            name += f" (message {first.label})"
        if first.kind in _PRIMARY:
            text = f"{w} waits for a gradient for {name} that never comes"
        else:
            text = f"{w} also waits for a gradient for {name}, held up behind the sends above"
        if len(bw.sends) > 1:
            text += f" (and {plural(len(bw.sends) - 1, 'more send')})"
        for line in [text, *_first_message_hops(h, w)]:
            if line not in chain:
                chain.append(line)
    if chain:
        chain.append(f"so backward() on {initiator} never returns")
    return chain


def _first_message_hops(h: _Hung, w: str) -> list[str]:
    """Each worker up the first-message chain from ``w`` waits for the one below it."""
    hops: list[str] = []
    cur = w
    while cur != h.trace.initiator and len(hops) <= len(h.trace.workers):
        fm = h.state.workers[cur].first_message
        if fm is None:
            break
        which = "its first gradient message" if h.sited else \
            f"message {fm.label} (its first gradient message)"
        hops.append(f"{fm.sender} waits for {cur} to acknowledge {which}, which {cur} sends "
                    "only when its own backward is done")
        cur = fm.sender
    return hops


# -- 4. what to do --------------------------------------------------------------------------------

def _fixes(h: _Hung, blocked: list[BlockedSend], mode: Mode) -> list[str]:
    fixes: list[str] = []
    unused = [b for b in blocked if b.kind == "unused"]
    over = [b for b in unused if b.node in h.overwritten]
    dropped = [b for b in unused if b.node in h.drops]
    plain = [b for b in unused if b.node not in h.overwritten and b.node not in h.drops]
    for b in dropped:
        fix = h.drops[b.node].fix()
        if fix not in fixes:
            fixes.append(fix)
    if over:
        b = over[0]
        rc = h.rpc(b.call)
        where = f" at line {rc.line}" if rc is not None and rc.line is not None else ""
        held = f"`{b.var}`" if b.var else "the result"
        fixes.append(f"keep every result of the RPC{where} instead of overwriting {held} (for "
                     "example append each one to a list) and use them all in the loss, so each "
                     "one's gradient flows back")
    if plain:
        fixes.extend(_use_it(plain[0], h.rpc(plain[0].call), h.trace.initiator))
    if over or plain:
        fixes.append("move the RPC outside the dist_autograd context, or into a separate "
                     "context, if its result needs no gradient")
        fixes.append("use a new dist_autograd.context() for every forward/backward iteration, "
                     "so sends left over from an earlier forward do not join this pass")
    for b in blocked:
        if b.kind == "no_grad" and b.node in h.drops:
            fix = (f"run `{h.drops[b.node].statement}` outside the `with dist_autograd.context()` "
                   "block (after the backward): torch.no_grad() inside the context does not "
                   "help, since the callee's forward runs with grad enabled and leaves a send "
                   "that FAST mode waits for")
            if fix not in fixes:
                fixes.append(fix)
    if any(b.kind in ("no_grad", "no_recv") and b.node not in h.drops for b in blocked):
        fixes.append("don't make Python-UDF or TorchScript RPCs under torch.no_grad() inside a "
                     "dist_autograd context: make the call outside the context, or detach the "
                     "tensors in the callee so no response send is created")
    if mode == Mode.FAST:
        fixes.append("run the replay with --mode smart to see what SMART mode (RFC #23110, "
                     "never implemented in PyTorch) would do: only the sends in the roots' "
                     "lineage take part")
    return fixes


def _use_it(b: BlockedSend, rc: RpcCall | None, initiator: str) -> list[str]:
    """How to use the unused result of ``b``'s call: in the loss, or as another root; for a
    call made on another worker than the initiator (a nested RPC, inside the function that
    worker runs), in what that function returns, since the initiator cannot reach it."""
    v = f"`{b.var}`" if b.var else "the RPC result"
    if rc is not None and rc.caller != initiator:
        function = rc.site.split(" <- ", 1)[0].rsplit(" in ", 1)[-1] if rc.site else None
        inside = f"`{function}` returns on {rc.caller}" if function else \
            f"{rc.caller}'s function returns"
        return [f"use {v} in what {inside} (or in another result that reaches the loss), so "
                "its gradient flows back"]
    root = f"{b.var}.sum()" if b.var else "result.sum()"
    return [f"use {v} in the loss, so its gradient flows back",
            f"pass it to backward as another root: dist_autograd.backward(context_id, [loss, "
            f"{root}])"]


def starved_send(trace: Trace, g: IndexedGraph, s: int, pass_index: int = 0) -> BlockedSend:
    """Why send ``s``, whose recv the roots of pass ``pass_index`` never reach (or which has no
    recv), never gets a gradient in that pass, in the words of a hang's explanation: a
    ``BlockedSend`` of kind ``unused`` (an RPC result the loss does not use, or overwritten),
    ``no_grad`` or ``no_recv``, whether or not the pass hangs (``distviz why`` asks it for a
    leaf behind ``s``). Raises ``IndexError`` when the pass does not exist."""
    state = ReplayState(step=-1, pass_index=pass_index, workers={})
    return _why_blocked(_hung(trace, g, state, pass_index), g.workers[g.worker[s]], s)


def _summary(h: _Hung, blocked: list[BlockedSend]) -> str:
    g = h.g
    primary = [b for b in blocked if b.kind in _PRIMARY]
    # a send whose own recv is the unused result before one that only waits behind it
    direct = [b for b in primary if b.recv is None or h.origin.get(g.index[b.recv], -2) == -2]
    head = (direct or primary or blocked)[0] if blocked else None
    if head is None:
        return "no worker can make progress, but the pass is not complete"
    label = "" if h.sited else f" for message {head.label}"
    summary = (f"{head.worker}'s {g.disp(g.index[head.node])}{label} never gets a gradient: "
               f"{head.reason}")
    if len(primary) > 1:
        summary += f" ({plural(len(primary) - 1, 'more such send')})"
    return summary
