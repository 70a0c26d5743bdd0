"""Replay PyTorch's FAST-mode distributed backward, one engine event at a time.

This is a pure simulation of ``DistEngine`` (internals §2 and the reference simulator in §3.6)
with the sequential policy that PyTorch follows when every worker has one inter-op thread:

1. Only the initiator starts a pass. It computes its dependencies by BFS from the ``GraphRoot``
   (the roots, in order) **plus all of its send functions**, counted per edge; ``outstanding``
   starts at ``#sends + 1``. Call 0 runs the ``GraphRoot``.
2. Every incoming gradient message and the ``GraphRoot`` start a *call* with a private
   ``StdPriorityQueue`` (largest ``sequence_nr`` first, libstdc++ ties). Calls run one at a time
   from one global FIFO. A node runs in the call that made its last dependency decrement;
   children are pushed in next-edge order.
3. ``AccumulateGrad`` is captured into the context (``accumulate``); ``RecvRpcBackward`` sends its
   gradients (zeros for unused slots) to worker ``msg_id >> 48``, to the send with the same id.
   Each node's gradient is undefined, all zeros or values (section 8 below).
4. A remote worker's *first* message computes its dependencies from all its sends only; that
   message is acknowledged when the worker is done and all gradients it sent were acknowledged.
   Later messages are acknowledged at once. A worker is done when every send ran and its queues
   are empty. The pass completes when the initiator is done and all its messages are acknowledged.
5. Nothing left to run and the pass not complete: the pass **hangs** (FAST mode's best known
   surprise); once the engine has stopped, ``hang.diagnose`` explains it. A failing node aborts
   its worker's graph task and the error travels back only along the first-message chain, each
   hop prefixing ``Error on Node <rank>: ``.

``mode="smart"`` replays the never-implemented SMART mode of RFC #23110: only sends in the
roots' lineage (whose paired recv is reachable from the roots, across workers) take part.

The engine's state is two dataclasses that copy themselves field by field (``state.py``);
pending work is a queue of typed steps, each run by its handler from ``_STEPS``.

Gradient states (section 8): where gradients pass on outside the plain C++ backwards of the hot
loop, each node's gradient in a pass is undefined, all zeros or values (``PassState.grad``,
``distviz.replay.undefined``): a send passes on its message's gradients, every one defined
(zeros in the slots its recv had no gradient for: ``RecvRpcBackward::apply``); an
AccumulateGrad accumulates into the context only a defined gradient
(``DistAccumulateGradCaptureHook``). Errors (section 9, internals §2.7): the failing worker's
graph task aborts (its current task stops) and the error travels back along the first-message
chain. PyTorch's texts come from ``distviz.torch_errors``.

One class, one file: the engine's steps share its state and its hot loop, and are read
together (more than 600 lines for that reason).

Scope and caveats: with more than one inter-op thread per worker, real calls on one worker
overlap and this replay is one legal schedule among several.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from distviz.outcome import Mode
from distviz.replay.event_log import CODE, PACK, EventLog, execute_payload, pack_event
from distviz.replay.graph import (
    ACC,
    FAULT,
    PYTHON,
    RECV,
    SAVED,
    SEND,
    IndexedGraph,
    count_dependencies,
    dependency_sources,
    participating_sends,
)
from distviz.replay.heap import StdPriorityQueue
from distviz.replay.state import (
    QUEUE_CAP,
    Ack,
    ComputeDeps,
    ErrorHop,
    MessageCall,
    PassEnd,
    PassStart,
    PassState,
    RaiseError,
    RootCall,
    RunState,
    SendGradient,
    WorkerDone,
    queue_payload,
    replay_state,
    unnotified,
    waiting_sends,
)
from distviz.replay.undefined import GradState
from distviz.replay.values import Message, PassError, ReplayEvent, ReplayState
from distviz.torch_errors import FREED_MESSAGE, no_send_function, on_node
from distviz.trace import message_label

__all__ = ["IN_EVENT", "UNDEFINED", "VALUE", "ZERO", "Engine"]

#: a node's gradient state in ``PassState.grad``, as ints (the hot loop compares them)
UNDEFINED, ZERO, VALUE = (int(s) for s in GradState)
#: what an execute or accumulate event says of its input, by state: 2 undefined, 1 all zeros,
#: 0 values
IN_EVENT = (2, 1, 0)
_IN, _VALUE, _ZERO = IN_EVENT, VALUE, ZERO

_EXECUTE, _ACCUMULATE, _CALL_START, _CALL_END, _ACK, _SEND_GRADIENT, _RECEIVE = (
    CODE[a] for a in ("execute", "accumulate", "call_start", "call_end", "ack", "send_gradient",
                      "receive_gradient"))
_step = tuple.__new__    # _step(Ack, (mi,)) == Ack(mi), minus NamedTuple's Python-level __new__


# -- the engine -----------------------------------------------------------------------------------

class Engine:
    """The step function over a ``RunState`` and a ``PassState``.

    ``emit=False`` skips event building (used to re-simulate for ``Replay.state_at``); the state
    transitions are identical. ``arrival`` optionally fixes, per ``(pass, worker index)``, the
    order in which that worker's sends start their calls (the observed arrival order).
    """

    def __init__(self, g: IndexedGraph, mode: Mode, emit: bool,
                 arrival: dict[tuple[int, int], list[int]] | None = None) -> None:
        self.g = g
        self.mode = mode
        self.emit = emit
        #: the events, when ``emit`` is on (``replay`` hands it to the ``Replay``)
        self.log: EventLog | None = EventLog(g) if emit else None
        self._msg_base = 0   # log.messages index of this pass's first message
        self.arrival = arrival or {}
        nw = len(g.workers)
        self.s = RunState(deps=[0] * g.n, freed=bytearray(g.n), finished=not g.trace.passes)
        self.p = PassState.start(g, [[] for _ in range(nw)])
        if not self.s.finished:
            self._reset_pass()
            self.s.agenda.append(PassStart())

    def clone(self) -> Engine:
        """Return an independent copy that builds no events (the graph is shared)."""
        c = Engine.__new__(Engine)
        c.g, c.mode, c.emit, c.log, c.arrival = self.g, self.mode, False, None, self.arrival
        c._msg_base = 0
        c.s, c.p = self.s.copy(), self.p.copy()
        return c

    def state(self, step: int, event: ReplayEvent | None) -> ReplayState:
        """Build a fresh ``ReplayState`` from the current simulation state."""
        return replay_state(self.g, self.s, self.p, step, event)

    def _reset_pass(self) -> None:
        g, s = self.g, self.s
        part = participating_sends(g, s.pass_index, self.mode)
        if self.mode == Mode.SMART:
            taking = {x for sends in part for x in sends}
            s.excluded.append([x for sends in g.sends_of for x in sends if x not in taking])
        else:
            s.excluded.append([])
        self.p = PassState.start(g, part)
        if self.log is not None:
            self._msg_base = len(self.log.messages)

    # -- the step function ------------------------------------------------------------------------
    def advance(self) -> None:
        """Run one step; with ``emit`` on, its event goes to ``log``. Does nothing once the
        replay has ended."""
        s = self.s
        if s.finished:
            return None
        p = self.p
        heap = p.heap
        if heap and not s.agenda:
            return self._drain(1)
        s.step += 1
        if s.agenda:
            item = s.agenda.popleft()
            return _STEPS[type(item)](self, item)
        if heap is not None:
            return self._call_end()
        if p.fifo:
            return self._receive(self._next_message())
        return self._hang()

    def run(self) -> None:
        """Run to the end: the steps ``advance`` takes, in one loop (no call per step), with a
        task's nodes run in one ``_drain`` (the same steps and events, fewer calls)."""
        s = self.s
        agenda, steps, drain = s.agenda, _STEPS, self._drain
        while not s.finished:
            if agenda:
                s.step += 1
                item = agenda.popleft()
                steps[type(item)](self, item)
                continue
            heap = self.p.heap
            if heap:
                drain(-1)
                continue
            s.step += 1
            if heap is not None:
                self._call_end()
            elif self.p.fifo:
                self._receive(self._next_message())
            else:
                self._hang()

    def _next_message(self) -> int:
        """The message received next: the FIFO head, or with an observed schedule the first
        message in FIFO order that is next in its receiver's arrival order."""
        p, s = self.p, self.s
        if not self.arrival:
            return p.fifo.popleft()
        for k, mi in enumerate(p.fifo):
            key = (s.pass_index, p.m_to[mi])
            order = self.arrival.get(key)
            if order is None:
                break
            ptr = s.arr_ptr.get(key, 0)
            if ptr < len(order) and order[ptr] == p.m_send[mi]:
                s.arr_ptr[key] = ptr + 1
                del p.fifo[k]
                return mi
        mi = p.fifo.popleft()  # not in the schedule (or it is inconsistent): FIFO
        key = (s.pass_index, p.m_to[mi])
        s.arr_ptr[key] = s.arr_ptr.get(key, 0) + 1
        return mi

    def _check_complete(self, w: int) -> None:
        """Worker ``w`` is done and owes no ack: answer its first message or end the pass."""
        p = self.p
        if not p.w_done[w] or p.w_unacked[w] or p.w_failed[w]:
            return
        if w == self.g.initiator:
            self.s.agenda.appendleft(PassEnd("completed"))
        elif p.w_first[w] >= 0 and not p.w_acked_first[w]:
            p.w_acked_first[w] = True
            self.s.agenda.appendleft(_step(Ack, (p.w_first[w],)))

    # -- 1. the pass starts on the initiator ------------------------------------------------------
    def _pass_start(self, _item: PassStart) -> None:
        s = self.s
        s.agenda.append(ComputeDeps(self.g.initiator))
        s.agenda.append(RootCall())
        if not self.emit:
            return None
        excluded = tuple(s.excluded[s.pass_index]) if self.mode == Mode.SMART else None
        return self._event("pass_start", self.g.initiator, (self.mode, excluded))

    # -- 2. computeDependencies: BFS from the GraphRoot (initiator) and all local sends -----------
    def _compute_dependencies(self, item: ComputeDeps) -> None:
        g, p, w = self.g, self.p, item.worker
        pi = self.s.pass_index
        deps = self.s.deps
        sends = p.part[w]
        order = count_dependencies(g, dependency_sources(g, w, pi, sends), deps)
        is_ini = w == g.initiator
        p.visited[w] = order
        p.w_init[w] = True
        p.w_out[w] = len(sends) + (1 if is_ini else 0)
        if is_ini:
            p.w_keep[w] = g.trace.passes[pi].retain_graph
        if not self.emit:
            return None
        # the counts change as the pass runs: keep a compact copy for the event
        counts = tuple([deps[i] for i in order])
        roots = tuple(g.roots[pi]) if is_ini else ()
        part = set(sends)
        excluded = (tuple(x for x in g.sends_of[w] if x not in part)
                    if self.mode == Mode.SMART else None)
        return self._event("compute_dependencies", w, (roots, tuple(sends), order, counts,
                                                       p.w_out[w], p.w_keep[w], excluded))

    # -- 3. call 0: the GraphRoot seeds ones into the roots ---------------------------------------
    def _root_call(self, _item: RootCall) -> None:
        g, p = self.g, self.p
        w = g.initiator
        call = p.calls
        p.calls += 1
        p.cur_call, p.cur_w = call, w
        heap: StdPriorityQueue[int] = StdPriorityQueue()
        p.heap = heap
        deps, key = self.s.deps, g.key
        pushed: list[int] = []
        decs: list[int] = []
        spec = g.trace.passes[self.s.pass_index]
        for k, r in enumerate(g.roots[self.s.pass_index]):
            d = deps[r] - 1
            deps[r] = d
            p.grad[r] = _VALUE
            if g.kind[r] == RECV:   # the ones go into the root's own output of the RPC result
                p.recv_slots[r] = p.recv_slots.get(r, 0) | (1 << spec.root_nr(k))
            if d == 0:
                heap.push(r, key[r])
                pushed.append(r)
            decs.append(r)
            decs.append(d)
        # GraphRoot task: +1 counted at compute_dependencies, processed now
        p.w_out[w] += len(pushed) - 1
        if not self.emit:
            return None
        q, qlen = queue_payload(self.p.heap)
        return self._event("call_start", w, (tuple(decs), tuple(pushed), q, qlen), call=call)

    # -- 4. pop and run the nodes of the current task ---------------------------------------------
    # An op's and a send's evaluate_function: decrement each next edge's target in order, then
    # push the ready ones. This is the replay's hot loop: what it reads is looked up once, and the
    # rare paths are calls (AccumulateGrad, recvs and failing nodes: ``_drain_other``; an event
    # with a queue of several nodes or many edges: ``event_log.execute_payload``).
    def _drain(self, limit: int) -> None:
        """Pop and run up to ``limit`` nodes of the current task, a step each, while no other
        step is scheduled (``advance`` runs one, ``run`` as many as it can)."""
        g, p, s = self.g, self.p, self.s
        heap, agenda = p.heap, s.agenda
        assert heap is not None
        key, kinds, workers, nxt, at, flags_of = (g.key, g.kind, g.worker, g.next, g.next_at,
                                                  g.flags)
        deps, freed = s.deps, s.freed
        grad, order, w_out, w_keep = p.grad, p.order, p.w_out, p.w_keep
        python_out = g.python_out
        call, pi = -1 if p.cur_call is None else p.cur_call, s.pass_index
        log = self.log
        rec, pool = (log.rec, log.pool) if log is not None else (None, None)
        packs, npacks = PACK, len(PACK) - 3
        pop_last = list.pop
        step = s.step      # counted here, written back before anything else reads it
        held = -1          # the one node an op made ready into an empty queue: it runs next
        while limit and (heap or held >= 0) and not agenda:
            limit -= 1
            step += 1
            if held >= 0:
                i, held = held, -1
            else:
                i = pop_last(heap)[1] if len(heap) == 1 else heap.pop()
            k, flags = kinds[i], flags_of[i]
            if k == ACC or k == RECV or (flags and (flags & FAULT or freed[i])):
                s.step = step
                ran = self._drain_other(i, heap, limit)
                if ran < 0:                # the task aborted
                    return
                limit -= ran
                step += ran
                continue
            w = workers[i]
            order[w].append(i)
            nz = grad[i]
            zero_in = _IN[nz]
            if flags:
                if flags & SAVED and not w_keep[w]:
                    freed[i] = 1    # release_variables() after apply without retain_graph
                if flags & PYTHON:  # a custom Function's backward the replay knows
                    nz = python_out[i][nz]
            if k == SEND:
                counts, zero_in = self._run_send(i, w, heap)
            else:
                counts = []
                for t in nxt[at[i]:at[i + 1]]:
                    if t < 0:
                        continue
                    d = deps[t] - 1
                    deps[t] = d
                    counts.append(d)
                    if nz == _VALUE:
                        grad[t] = _VALUE
                        if kinds[t] == RECV:
                            p.recv_slots[t] = p.recv_slots.get(t, 0) | g.slot_bits(i, t)
                    elif nz and not grad[t]:
                        grad[t] = _ZERO     # all zeros, unless values come too
                    if d == 0:          # ready: pushed in next-edge order
                        if held >= 0:   # a second one: the first goes into the queue too
                            heap.append((key[held], held))
                            heap.pushes += 1
                            held = -1
                        if heap:
                            heap.push(t, key[t])
                        else:           # the only node in the queue: kept out of it
                            held = t
            w_out[w] += counts.count(0) - 1     # each target that became ready is a new task
            if rec is None or pool is None:
                continue
            # EventLog's layout, inline: the columns, then the payload
            rec.frombytes(pack_event(_EXECUTE, pi, w, i, call, -1, len(pool)))
            n, m = len(heap), len(counts)
            if n > 1 or m >= npacks:    # a queue to list, or many edges: the general form
                execute_payload(pool, zero_in, counts, heap, held)
            elif held >= 0 or n:        # the one node in the queue
                pool.frombytes(packs[m + 3](zero_in, 1, *counts,
                                            held if held >= 0 else heap[0][1]))
            else:
                pool.frombytes(packs[m + 2](zero_in, 0, *counts))
        if held >= 0:   # the loop stopped before running it: into the queue, as pushed
            heap.append((key[held], held))
            heap.pushes += 1
        s.step = step

    def _drain_other(self, i: int, heap: StdPriorityQueue[int], limit: int) -> int:
        """Run ``_drain``'s rare node: an AccumulateGrad, a recv, or a node that raises (a
        recorded fault, or saved tensors a pass without ``retain_graph`` freed). A recv's send is
        the next step when ``limit`` allows, and the task's queue goes on after it. Returns the
        steps run after the node's own (0 or 1), or -1 when the task aborted."""
        g, p = self.g, self.p
        k, w, flags = g.kind[i], g.worker[i], g.flags[i]
        call = p.cur_call
        p.w_out[w] -= 1
        p.order[w].append(i)
        if k == ACC:
            self._accumulate(i, w, call)
            return 0
        if flags:
            freed = self.s.freed
            if flags & FAULT or freed[i]:
                if flags & FAULT:
                    self._fault(i, w)
                else:
                    self._node_error(i, w, FREED_MESSAGE, freed=True)
                return -1 if p.heap is not heap else 0
            if flags & SAVED and not p.w_keep[w]:
                freed[i] = 1        # release_variables() after apply without retain_graph
        assert k == RECV
        self._run_recv(i, w, call)
        agenda = self.s.agenda
        then = agenda[0] if limit and len(agenda) == 1 else None
        if not isinstance(then, SendGradient):
            return 0
        agenda.pop()            # the recv's send: the next step, then the queue goes on
        self.s.step += 1
        self._send_gradient(then)
        return 1

    def _run_recv(self, i: int, w: int, call: int | None) -> None:
        """RecvRpcBackward::apply sends (grads, context_id, msg_id, retain_graph): next step."""
        s = self.s
        s.agenda.append(_step(SendGradient, (i, call)))
        if self.log is not None:
            q, n = queue_payload(self.p.heap)
            self.log.add_ints(_EXECUTE, s.pass_index, w, i, -1 if call is None else call, -1,
                              [n, *q])

    # -- 5. a recv sends its gradients (undefined slots as zeros) ---------------------------------
    def _send_gradient(self, item: SendGradient) -> None:
        g, p, s = self.g, self.p, self.s
        r = item.recv
        w = g.worker[r]
        msg_id = g.msg[r]
        to, snd = g.target_send(msg_id)
        shapes = g.input_shapes.get(r)
        if shapes is not None:
            nslots = len(shapes)
        elif snd >= 0:
            nslots = g.next_at[snd + 1] - g.next_at[snd]
        else:
            nslots = 1 + max((nr for x in p.visited[w] for t, nr in g.edges(x) if t == r),
                             default=0)
        mask = p.recv_slots.get(r, 0)
        first = to >= 0 and snd >= 0 and not p.w_init[to] and not p.w_first_inflight[to]
        if first:
            p.w_first_inflight[to] = True
        # Message(msg_id, label, context_id, sender, to, send, recv, shapes, first,
        #         retain_graph, zero_slots, pass_index), positional: one per gradient message
        zero = () if mask == (1 << nslots) - 1 else tuple(
            [j for j in range(nslots) if not (mask >> j) & 1])
        message = _step(Message, (msg_id, message_label(msg_id), g.trace.context_id, g.workers[w],
                                  g.workers[to] if to >= 0 else None,
                                  g.ids[snd] if snd >= 0 else None, g.ids[r], shapes,
                                  first, p.w_keep[w], zero, s.pass_index))
        mi = len(p.msgs)
        p.msgs.append(message)
        p.m_from.append(w)
        p.m_to.append(to)
        p.m_send.append(snd)
        p.m_acked.append(False)
        p.w_unacked[w] += 1
        s.messages_total += 1
        p.fifo.append(mi)
        log = self.log
        if log is None:
            return None
        log.messages.append(message)
        log.add_ints(_SEND_GRADIENT, s.pass_index, w, r, -1 if item.call is None else item.call,
                     self._msg_base + mi, [nslots])

    # -- 6. a worker receives a gradient message --------------------------------------------------
    def _receive(self, mi: int) -> None:
        g, p = self.g, self.p
        message = p.msgs[mi]
        to, snd, frm = p.m_to[mi], p.m_send[mi], p.m_from[mi]
        if snd < 0:
            # processBackwardAutogradReq: retrieveSendFunction raises on the receiver; the
            # sender's outstanding RPC fails and its graph task errors.
            err = no_send_function(message.msg_id)
            self.s.agenda.append(RaiseError(frm, on_node(g.ranks[frm], err),
                                            g.recv_by_msg.get(message.msg_id, -1)))
            if not self.emit:
                return None
            return self._event("error", to, ("reject", err), msg=mi)
        mask = (1 << (g.next_at[snd + 1] - g.next_at[snd])) - 1
        for j in message.zero_slots:
            mask &= ~(1 << j)
        p.send_mask[snd] = mask        # setGrads
        first = not p.w_init[to]
        if first:
            # first message for the context here: computeDependencies, answer when done
            p.w_first[to] = mi
            p.w_keep[to] = bool(message.retain_graph)
            self.s.agenda.append(_step(ComputeDeps, (to,)))
        else:
            # later message: launch a call and answer at once
            self.s.agenda.append(_step(Ack, (mi,)))
        self.s.agenda.append(_step(MessageCall, (mi,)))
        if self.log is None:
            return None
        self.log.add_ints(_RECEIVE, self.s.pass_index, to, snd, -1, self._msg_base + mi, [first])

    def _message_call(self, item: MessageCall) -> None:
        g, p = self.g, self.p
        mi = item.msg
        w, snd = p.m_to[mi], p.m_send[mi]
        call = p.calls
        p.calls += 1
        p.cur_call, p.cur_w = call, w
        heap: StdPriorityQueue[int] = StdPriorityQueue()
        heap.push(snd, g.key[snd])      # incrementOutstandingTasks=false: the send was counted
        p.heap = heap
        if self.log is None:
            return None
        self.log.add_ints(_CALL_START, self.s.pass_index, w, snd, call, self._msg_base + mi, [])

    def _call_end(self) -> None:
        p = self.p
        w, call = p.cur_w, p.cur_call
        p.heap = None
        p.cur_call, p.cur_w = None, -1
        if p.w_out[w] == 0 and not p.w_done[w]:
            self.s.agenda.appendleft(WorkerDone(w))
        if self.log is None:
            return None
        self.log.add_ints(_CALL_END, self.s.pass_index, w, -1, -1 if call is None else call, -1,
                          [p.w_out[w], p.w_left[w]])

    def _worker_done(self, item: WorkerDone) -> None:
        p, w = self.p, item.worker
        p.w_done[w] = True
        self._check_complete(w)
        if not self.emit:
            return None
        return self._event("worker_done", w, (len(p.part[w]), p.w_unacked[w]))

    def _ack(self, item: Ack) -> None:
        p, mi = self.p, item.msg
        p.m_acked[mi] = True
        frm = p.m_from[mi]
        p.w_unacked[frm] -= 1
        self._check_complete(frm)
        if self.log is None:
            return None
        self.log.add_ints(_ACK, self.s.pass_index, p.m_to[mi], -1, -1, self._msg_base + mi, [])

    # -- 7. nothing can run: the pass hangs (diagnosed once the engine stops) ----------------------
    def _hang(self) -> None:
        self.s.agenda.append(PassEnd("hang"))
        if not self.emit:
            return None
        return self._event("hang", self.g.initiator, (waiting_sends(self.g, self.p), ""))

    def _pass_end(self, item: PassEnd) -> None:
        g, p, s = self.g, self.p, self.s
        outcome = item.outcome
        if outcome == "error" and s.error is not None:
            s.error = replace(s.error, chain=tuple(g.workers[w] for w in s.err_chain),
                              unnotified=unnotified(g, p, s.err_chain))
        if self.emit:
            self._event("pass_end", g.initiator, (outcome, s.err_text))
        s.orders.append(p.order)
        if outcome != "completed":
            s.outcome = outcome
            s.finished = True
        elif s.pass_index + 1 < len(g.trace.passes):
            s.pass_index += 1
            self._reset_pass()
            s.agenda.append(PassStart())
        else:
            s.finished = True

    # -- 8. gradient states: what a send and a captured AccumulateGrad do with a gradient --------
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
        log.rec.frombytes(pack_event(_ACCUMULATE, s.pass_index, w, i,
                                     -1 if call is None else call, -1, len(log.pool)))
        log.pool.fromlist([zero, count, qlen, *q])

    # -- 9. errors: a node raises, a worker dies, a gradient RPC fails ----------------------------
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
        text_err = on_node(g.ranks[w], msg)
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
            s.err_text = on_node(g.ranks[parent], inner)
        else:
            s.err_text = on_node(g.ranks[parent], s.err_text)
        s.err_chain.append(parent)
        self._abort(parent)
        if s.error is not None:
            s.error = replace(s.error, message=s.err_text)
        s.agenda.append(PassEnd("error") if parent == g.initiator else ErrorHop(parent))
        if not self.emit:
            return None
        return self._event("error", parent, ("hop", crashed, g.workers[child], s.err_text),
                           msg=mi)


#: The handler of each scheduled step.
_STEPS: dict[type, Callable[[Engine, Any], None]] = {
    PassStart: Engine._pass_start, ComputeDeps: Engine._compute_dependencies,
    RootCall: Engine._root_call, MessageCall: Engine._message_call,
    SendGradient: Engine._send_gradient, Ack: Engine._ack, WorkerDone: Engine._worker_done,
    ErrorHop: Engine._error_hop, RaiseError: Engine._raise, PassEnd: Engine._pass_end,
}
