"""The engine's gradient states: what a send and a captured AccumulateGrad do with a gradient.

``EngineGrads`` is the part of ``distviz.replay.engine.Engine`` that passes gradients on where
they are not plain C++ backwards (those are the engine's hot loop). Each node's gradient in a
pass is undefined, all zeros or values (``PassState.grad``, ``distviz.replay.undefined``): a
send passes on its message's gradients, every one defined (zeros in the slots its recv had no
gradient for, undefined ones included: ``RecvRpcBackward::apply``); an AccumulateGrad
accumulates into the context only a defined gradient (``DistAccumulateGradCaptureHook``).
"""

from __future__ import annotations

from distviz.replay.event_log import CODE, EventLog, pack_event
from distviz.replay.graph import RECV, IndexedGraph
from distviz.replay.heap import StdPriorityQueue
from distviz.replay.state import PassState, RunState, queue_payload
from distviz.replay.undefined import GradState

__all__ = ["IN_EVENT", "UNDEFINED", "VALUE", "ZERO", "EngineGrads"]

#: a node's gradient state in ``PassState.grad``, as ints (the hot loop compares them)
UNDEFINED, ZERO, VALUE = (int(s) for s in GradState)
#: what an execute or accumulate event says of its input, by state: 2 undefined, 1 all zeros,
#: 0 values
IN_EVENT = (2, 1, 0)
ACCUMULATE = CODE["accumulate"]


class EngineGrads:
    """The gradient steps of ``Engine`` (which sets every attribute named here)."""

    g: IndexedGraph
    p: PassState
    s: RunState
    emit: bool
    log: EventLog | None

    def _run_send(self, i: int, w: int, heap: StdPriorityQueue[int]) -> tuple[list[int], int]:
        """A send's next edges get the message's gradients (zeros in unused slots: every one is
        defined); the ready ones are pushed. Returns ``(each target's remaining count, all
        zero)``."""
        g, p = self.g, self.p
        a = g.next_at[i]
        deps, grad, kinds, nrs = self.s.deps, p.grad, g.kind, g.next_nr
        p.w_left[w] -= 1
        p.send_ran[i] = 1
        mask = p.send_mask.get(i, 0)
        counts: list[int] = []
        for j, t in enumerate(g.next[a:g.next_at[i + 1]]):
            if t >= 0:
                d = deps[t] - 1
                deps[t] = d
                if (mask >> j) & 1:
                    grad[t] = VALUE
                    if kinds[t] == RECV:
                        nr = nrs[a + j] if nrs is not None else 0
                        p.recv_slots[t] = p.recv_slots.get(t, 0) | (1 << nr)
                elif not grad[t]:
                    grad[t] = ZERO
                if d == 0:
                    heap.push(t, g.key[t])
                counts.append(d)
        return counts, int(mask == 0)

    def _accumulate(self, i: int, w: int, call: int | None) -> None:
        """A captured AccumulateGrad: the gradient goes into the context, never into .grad; an
        undefined one is not accumulated (``DistAccumulateGradCaptureHook``)."""
        s = self.s
        state = self.p.grad[i]
        zero = IN_EVENT[state]       # 0 values, 1 all zeros, 2 undefined
        if state == UNDEFINED:
            count = s.acc_count.get(i, 0)
        else:
            count = s.acc_count.get(i, 0) + 1
            s.acc_count[i] = count
            s.acc_nonzero[i] = s.acc_nonzero.get(i, False) or state == VALUE
        if not self.emit:
            return None
        q, qlen = queue_payload(self.p.heap)
        log = self.log
        assert log is not None
        log.rec.frombytes(pack_event(ACCUMULATE, s.pass_index, w, i,
                                     -1 if call is None else call, -1, len(log.pool)))
        log.pool.fromlist([zero, count, qlen, *q])
