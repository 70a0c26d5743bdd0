"""Which RPC call of the program made a send or recv, and what became of its result.

The recorder logs every RPC the program makes (``trace.rpc_calls``: caller, callee, function,
source line, the variable it was assigned to, grad mode, and the message ids the call created
on the caller). Nodes carry their call when the recorder could match a message id. Two cases
need more:

* An RPC made under ``torch.no_grad()`` attaches nothing on the caller, so its ``msg_ids`` is
  empty, yet the callee still records the request's recv and, when its result requires grad, a
  response send that will never get a gradient. Message ids are ``(sender << 48) | counter``
  with one counter per worker, so the request's id tells the caller and where the call sits
  among that caller's other calls (``CallIndex.infer_call``).
* A result the program never used (``side = rpc.rpc_sync(...)``, then nothing reads ``side``)
  is held by no variable once the graph is recorded, so its recv names none; the variable the
  call was assigned to still names it (``CallIndex.result_names``, which every picture and the
  hang's explanation read).
* A call inside a loop (``for i in range(3): t3 = rpc.rpc_sync(...)``) assigns the same
  variable each time: every result but the last is overwritten (``CallIndex.overwritten_by``).
"""

from __future__ import annotations

from distviz.replay.events import ordinal
from distviz.replay.graph import RECV, SEND, IndexedGraph
from distviz.trace import RpcCall, Trace
from distviz.trace.compact import NodeColumns

__all__ = ["CallIndex", "recv_names"]

_COUNTER = (1 << 48) - 1


class CallIndex:
    """The trace's RPC calls, indexed by message id, caller and source line."""

    def __init__(self, trace: Trace, g: IndexedGraph) -> None:
        self.trace = trace
        self.g = g
        self.by_msg: dict[int, int] = {}
        for k, call in enumerate(trace.rpc_calls):
            for m in call.msg_ids:
                self.by_msg.setdefault(m, k)

    def call_of(self, i: int) -> int | None:
        """The call that created send/recv ``i`` (its index in ``trace.rpc_calls``), if known."""
        nodes = self.trace.nodes
        c = nodes.call.get(i) if isinstance(nodes, NodeColumns) else nodes[i].call
        if c is not None and 0 <= c < len(self.trace.rpc_calls):
            return c
        return self.by_msg.get(self.g.msg[i])

    def result_names(self, c: int | None, held: list[str]) -> list[str]:
        """The variables that hold (or held) the result of call ``c``: ``held`` (those the
        recorder found holding it at its recv), else the variable the call was assigned to (a
        result never used, or overwritten by a later call)."""
        if held or c is None:
            return list(held)
        rc = self.trace.rpc_calls[c]
        return [rc.result_var] if rc.result_var else []

    # -- a response send whose caller attached no recv ----------------------------------------------
    def request_recvs(self, s: int) -> list[int]:
        """The recvs on ``s``'s worker that ``s`` leads to: the requests the callee received."""
        g = self.g
        seen = {s}
        stack = [s]
        out: list[int] = []
        while stack:
            x = stack.pop()
            for t in g.targets[x]:
                if t >= 0 and t not in seen and g.worker[t] == g.worker[s]:
                    seen.add(t)
                    stack.append(t)
                    if g.kind[t] == RECV and g.msg[t] >= 0:
                        out.append(t)
        return sorted(out, key=lambda r: g.msg[r])

    def caller_of(self, s: int) -> str | None:
        """The worker whose request produced the response send ``s``, when the graph tells."""
        g = self.g
        for r in self.request_recvs(s):
            w = g.rank_index.get(g.msg[r] >> 48, -1)
            if w >= 0 and w != g.worker[s]:
                return g.workers[w]
        return None

    def infer_call(self, s: int) -> int | None:
        """The call behind response send ``s`` when no message id names it (see the module
        docstring): a call from the request's sender to ``s``'s worker whose own message ids
        are unknown, placed by the request's counter among that caller's known ids."""
        g = self.g
        callee = g.workers[g.worker[s]]
        for r in self.request_recvs(s):
            rank = g.msg[r] >> 48
            w = g.rank_index.get(rank, -1)
            if w < 0:
                continue
            c = self._call_by_request(g.workers[w], rank, callee, g.msg[r] & _COUNTER)
            if c is not None:
                return c
        return self._no_grad_by_order(s)

    def _no_grad_by_order(self, s: int) -> int | None:
        """When no request names the caller (the request carried no tensor that requires grad,
        an RRef): the calls to ``s``'s worker made under ``torch.no_grad()``, whose results
        got no recv, matched in order with that worker's sends that have none."""
        g, calls = self.g, self.trace.rpc_calls
        callee = g.workers[g.worker[s]]
        orphans = sorted((i for i, k in enumerate(g.kind) if k == SEND and
                          g.worker[i] == g.worker[s] and g.msg[i] not in g.recv_by_msg),
                         key=lambda i: g.msg[i])
        unseen = [k for k, c in enumerate(calls) if c.callee == callee and not c.grad_enabled
                  and not c.msg_ids and c.api in ("rpc_sync", "rpc_async")]
        if not unseen or s not in orphans:
            return None
        return unseen[min(orphans.index(s), len(unseen) - 1)]

    def _call_by_request(self, caller: str, rank: int, callee: str, counter: int) -> int | None:
        calls = self.trace.rpc_calls
        mine = [k for k, c in enumerate(calls) if c.caller == caller]
        # the counters of the caller's own message ids each call is known to have used
        own = {k: sorted(m & _COUNTER for m in calls[k].msg_ids if m >> 48 == rank) for k in mine}
        lo = max((k for k in mine if own[k] and own[k][0] < counter), default=-1)
        hi = min((k for k in mine if own[k] and own[k][0] > counter), default=len(calls))
        unknown = [k for k in mine if lo < k < hi and not own[k]]
        # the k-th unknown call between the two known ones used the k-th unclaimed counter
        used = {m for k in mine for m in own[k]}
        start = own[lo][-1] + 1 if lo >= 0 else 0
        k = sum(1 for m in range(start, counter) if m not in used)
        if k < len(unknown) and calls[unknown[k]].callee == callee:
            return unknown[k]
        fits = [k for k in unknown if calls[k].callee == callee]
        no_grad = [k for k in fits if not calls[k].grad_enabled]
        best = no_grad or fits
        return best[0] if best else None

    # -- a result overwritten by a later call ---------------------------------------------------------
    def iteration(self, c: int) -> tuple[int, int]:
        """``(k, n)``: call ``c`` is the ``k``-th of ``n`` calls made by the same line of the
        program (a loop makes several)."""
        rc = self.trace.rpc_calls[c]
        same = [k for k, o in enumerate(self.trace.rpc_calls)
                if (o.caller, _where(o), o.api, o.func) == (rc.caller, _where(rc), rc.api, rc.func)]
        if _where(rc) is None or c not in same:
            return 1, 1
        return same.index(c) + 1, len(same)

    def overwritten_by(self, c: int, holders: list[str]) -> str | None:
        """A phrase naming the later call whose result replaced call ``c``'s in its variable,
        or ``None``. ``holders`` are the variables that hold ``c``'s result at recording time:
        the variable ``c`` was assigned to is overwritten when it is not among them and a later
        call of the same worker assigned it again."""
        calls = self.trace.rpc_calls
        rc = calls[c]
        if not rc.result_var or rc.api == "remote" or rc.result_var in holders:
            return None
        later = next((k for k in range(c + 1, len(calls))
                      if calls[k].caller == rc.caller and calls[k].result_var == rc.result_var),
                     None)
        if later is None:
            return None
        lc = calls[later]
        if (_where(lc), lc.api, lc.func) == (_where(rc), rc.api, rc.func) and \
                _where(rc) is not None:
            return f"the {ordinal(self.iteration(later)[0])}"
        where = f" at line {lc.line}" if lc.line is not None else ""
        return f"the result of {lc.api}({lc.func}){where}"


def _where(rc: RpcCall) -> int | str | None:
    """Where the program made a call: its scenario line, else its traced site."""
    return rc.line if rc.line is not None else rc.site


def recv_names(trace: Trace, g: IndexedGraph) -> dict[int, list[str]]:
    """``{recv index: variables}`` for every recv that got an RPC result a variable holds or
    held (``CallIndex.result_names``; the recv on the caller, not the callee's recv of the
    arguments): the ``= side`` of the pictures."""
    calls = CallIndex(trace, g)
    nodes = trace.nodes
    out: dict[int, list[str]] = {}
    for i, k in enumerate(g.kind):
        if k != RECV:
            continue
        held = list(nodes[i].vars)
        c = None if held else calls.call_of(i)
        if c is not None:
            rc = trace.rpc_calls[c]
            if rc.api == "remote" or g.workers[g.worker[i]] != rc.caller:
                continue
        names = calls.result_names(c, held)
        if names:
            out[i] = names
    return out
