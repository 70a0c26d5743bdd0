"""The engine's log helper and its error steps: a node raises, a worker dies, an RPC fails.

``EngineErrors`` is the part of ``distviz.replay.engine.Engine`` that ends a pass in an error
(internals §2.7): the failing worker's graph task aborts (its current task stops) and the error
travels back only along the first-message chain, each hop prefixing ``Error on Node <rank>: ``.
It also logs the events that keep their payload tuple (``_event``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from distviz.replay.event_log import CODE, EventLog
from distviz.replay.graph import IndexedGraph
from distviz.replay.model import PassError
from distviz.replay.state import QUEUE_CAP, ErrorHop, PassEnd, PassState, RaiseError, RunState

__all__ = ["FREED_MESSAGE", "EngineErrors"]

#: The error of a node whose saved tensors a pass without ``retain_graph`` freed (PyTorch's words).
FREED_MESSAGE = (
    "Trying to backward through the graph a second time (or directly access saved tensors after "
    "they have already been freed). Saved intermediate values of the graph are freed when you "
    "call .backward() or autograd.grad(). Specify retain_graph=True if you need to backward "
    "through the graph a second time or if you need to access saved tensors after calling "
    "backward.")


class EngineErrors:
    """The error steps of ``Engine`` (which sets every attribute named here)."""

    g: IndexedGraph
    p: PassState
    s: RunState
    emit: bool
    log: EventLog | None
    _msg_base: int

    def _event(self, action: str, worker: int | None, payload: tuple[Any, ...], *,
               node: int | None = None, call: int | None = None, msg: int = -1) -> None:
        """Log an event that keeps its payload tuple (``msg``: the pass's message index)."""
        assert self.log is not None
        self.log.add(CODE[action], self.s.pass_index, -1 if worker is None else worker,
                     -1 if node is None else node, -1 if call is None else call,
                     self._msg_base + msg if msg >= 0 else -1, payload)

    def _abort(self, w: int) -> list[int]:
        """Abort ``w``'s graph task: its current call stops; returns the skipped nodes."""
        p = self.p
        p.w_failed[w] = True
        skipped: list[int] = []
        if p.cur_w == w and p.heap is not None:
            skipped = p.heap.pop_order(QUEUE_CAP)
            p.heap = None
            p.cur_call, p.cur_w = None, -1
        return skipped

    def _fail(self, w: int, error: PassError, text: str) -> None:
        """``w``'s graph task fails with ``text``: the error travels towards the initiator."""
        s = self.s
        s.err_text = text
        s.err_chain = [w]
        s.error = error
        s.agenda.append(PassEnd("error") if w == self.g.initiator else ErrorHop(w))

    def _fault(self, i: int, w: int) -> None:
        """Node ``i`` has a recorded fault: it raises, or its worker crashes."""
        fault = self.g.fault[i]
        if fault.get("kind") == "crash":
            return self._crash(i, w)
        return self._node_error(i, w, str(fault.get("message", "error in backward")))

    def _node_error(self, i: int, w: int, msg: str, freed: bool = False) -> None:
        g = self.g
        call = self.p.cur_call
        skipped = self._abort(w)
        text_err = f"Error on Node {g.ranks[w]}: {msg}"
        self._fail(w, PassError(worker=g.workers[w], node=g.ids[i], message=text_err,
                                pass_index=self.s.pass_index, origin=msg, freed=freed),
                   text_err)
        if not self.emit:
            return None
        return self._event("error", w, ("node", i, msg, text_err, tuple(skipped)), node=i,
                           call=call)

    def _crash(self, i: int, w: int) -> None:
        g = self.g
        call = self.p.cur_call
        self._abort(w)
        name = g.workers[w]
        who = f"rank {w}, the initiator" if w == g.initiator else f"rank {w}"
        msg = f"{name} ({who}) died during the backward pass"
        text = msg if w == g.initiator else ""   # the sender's RPC fails: see _error_hop
        self._fail(w, PassError(worker=name, node=g.ids[i], message=msg,
                                pass_index=self.s.pass_index, origin=msg, crash=True), text)
        if not self.emit:
            return None
        return self._event("crash", w, (i, msg), node=i, call=call)

    def _raise(self, item: RaiseError) -> None:
        """An outstanding RPC of ``w`` failed (missing send): ``w``'s graph task errors."""
        g, w, text_err, node = self.g, item.worker, item.error, item.node
        self._abort(w)
        self._fail(w, PassError(worker=g.workers[w], node=g.ids[node] if node >= 0 else None,
                                message=text_err, pass_index=self.s.pass_index,
                                origin=text_err.split(": ", 1)[1]), text_err)
        if not self.emit:
            return None
        return self._event("error", w, ("raise", text_err), node=node if node >= 0 else None)

    def _error_hop(self, item: ErrorHop) -> None:
        """The error reaches the sender of ``child``'s first message (its outstanding RPC)."""
        g, p, s, child = self.g, self.p, self.s, item.child
        mi = p.w_first[child]
        parent = p.m_from[mi]
        crashed = s.error is not None and s.error.crash and not s.err_text
        if crashed:
            inner = (f"RPC to {g.workers[child]} failed: {g.workers[child]} (rank {g.ranks[child]}) "
                     "died during the backward pass")
            s.err_text = f"Error on Node {g.ranks[parent]}: {inner}"
        else:
            s.err_text = f"Error on Node {g.ranks[parent]}: {s.err_text}"
        s.err_chain.append(parent)
        self._abort(parent)
        if s.error is not None:
            s.error = replace(s.error, message=s.err_text)
        s.agenda.append(PassEnd("error") if parent == g.initiator else ErrorHop(parent))
        if not self.emit:
            return None
        return self._event("error", parent, ("hop", crashed, g.workers[child], s.err_text),
                           msg=mi)
