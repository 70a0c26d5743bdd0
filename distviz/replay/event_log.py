"""A replay's events as columns: a few bytes per event, a ``ReplayEvent`` built when one is read.

A million-node replay makes about 1.6 million events. Kept as objects (an event and its payload
tuple each) they took about 400 bytes apiece; here each event is seven integers in one ``array``
(action, pass, worker, node, task, message, payload offset) and its payload a few integers in a
second one, about 50 bytes in all. ``EventLog`` is a read-only ``Sequence[ReplayEvent]``: indexing
builds a ``LazyEvent`` (``distviz.replay.events``) from the columns, so every view reads the
same ``ReplayEvent`` values as before, and the sentence is still built only when read.

What is stored per action, beyond the columns (anything the graph already knows is not):

* ``execute`` of an op or a send: whether its input was all zeros (2: undefined), the queue length, the
  remaining count of each next edge's target (the targets themselves are the graph's), and the
  queue's first ``QUEUE_CAP`` entries; of a recv: the queue length and entries.
* ``accumulate``: zero input (2: undefined, not accumulated), how many times so far, the queue
  length and its first entries.
* ``send_gradient``, ``receive_gradient``, ``call_end``: one or two integers.
* the rest (pass start and end, ``computeDependencies``, task 0, errors, hangs: a few per pass)
  keep their payload tuple as it is.

Events are numbered from 0; an event's ``step`` is its index.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from struct import Struct
from typing import Any, overload

from distviz.replay.events import LazyEvent, payload_changes
from distviz.replay.graph import RECV, IndexedGraph
from distviz.replay.heap import StdPriorityQueue
from distviz.replay.state import QUEUE_CAP
from distviz.replay.values import ACTIONS, Message, ReplayEvent

__all__ = ["CODE", "PACK", "WIDTH", "EventLog", "execute_payload", "pack_event"]

#: The code of each action in the ``action`` column.
CODE = {a: k for k, a in enumerate(ACTIONS)}
#: Integers per event in ``EventLog.rec``: action, pass, worker, node, task, message, offset.
WIDTH = 7

#: ``rec.frombytes(pack_event(code, pass, worker, node, task, message, offset))`` appends one
#: event: a third faster than ``fromlist``, which parses each item as a call argument.
pack_event = Struct(f"{WIDTH}i").pack
#: ``PACK[k](*ints)``: ``k`` integers as bytes for ``pool.frombytes`` (``k < len(PACK)``).
PACK = tuple(Struct(f"{k}i").pack for k in range(12))



def execute_payload(pool: array[int], zero_in: int, counts: list[int],
                    heap: StdPriorityQueue[int], held: int) -> None:
    """Append an op's or a send's ``execute`` payload in its general form to ``pool``: zero
    input, queue length, each target's remaining count, the queue's first ``QUEUE_CAP`` entries.
    The engine packs the common forms itself (``PACK``) and calls this for a queue of several
    nodes or more counts than ``PACK`` packs. ``held``: the one ready node that the engine keeps
    out of ``heap`` (it runs next), or -1."""
    n = len(heap)
    if held >= 0 or n == 1:
        pool.fromlist([zero_in, 1, *counts, held if held >= 0 else heap[0][1]])
    else:
        pool.fromlist([zero_in, n, *counts])
        if n:
            pool.fromlist(heap.pop_order(QUEUE_CAP))


_EXECUTE, _ACCUMULATE, _CALL_START = CODE["execute"], CODE["accumulate"], CODE["call_start"]
_COMPUTE = CODE["compute_dependencies"]
_BOOL_FIRST = CODE["receive_gradient"]
_POOLED = {CODE[a]: n for a, n in (("send_gradient", 1), ("receive_gradient", 1),
                                   ("call_end", 2), ("ack", 0))}


class EventLog(Sequence[ReplayEvent]):
    """The events of one replay (see the module docstring). The engine appends; views read.

    ``rec`` holds ``WIDTH`` integers per event (``-1`` for no worker, node, task or message),
    ``pool`` the integer payloads, ``extra`` the payload tuples of the few events that keep
    theirs, ``messages`` every gradient message an event names.
    """

    __slots__ = ("g", "rec", "pool", "extra", "messages")

    def __init__(self, g: IndexedGraph) -> None:
        self.g = g
        self.rec = array("i")
        self.pool = array("i")
        self.extra: dict[int, tuple[Any, ...]] = {}
        self.messages: list[Message] = []

    # -- writing (the engine) ---------------------------------------------------------------------
    def add(self, code: int, pass_index: int, worker: int, node: int, call: int, message: int,
            payload: tuple[Any, ...]) -> None:
        """Append an event that keeps its payload tuple: its action's ``CODE``, then worker,
        node, task and message (an index into ``messages``) as integers, -1 for none."""
        self.extra[len(self.rec) // WIDTH] = payload
        self.rec.frombytes(pack_event(code, pass_index, worker, node, call, message,
                                      len(self.pool)))

    def add_ints(self, code: int, pass_index: int, worker: int, node: int, call: int,
                 message: int, payload: list[int]) -> None:
        """Append an event whose payload is integers (``send_gradient``, ``receive_gradient``,
        ``call_end``, ``ack``; ``call_start`` of a message, whose payload is
        its node): as ``add``, the payload into ``pool``."""
        pool = self.pool
        self.rec.frombytes(pack_event(code, pass_index, worker, node, call, message, len(pool)))
        if payload:
            pool.fromlist(payload)

    def amend(self, step: int, payload: tuple[Any, ...]) -> None:
        """Replace the payload of an event that keeps its tuple (the hang gets its diagnosis
        this way once the engine has stopped)."""
        if step not in self.extra:
            raise KeyError(f"event {step} keeps no payload tuple")
        self.extra[step] = payload

    # -- reading ----------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.rec) // WIDTH

    @overload
    def __getitem__(self, k: int) -> ReplayEvent: ...

    @overload
    def __getitem__(self, k: slice) -> list[ReplayEvent]: ...

    def __getitem__(self, k: int | slice) -> ReplayEvent | list[ReplayEvent]:
        if isinstance(k, slice):
            return [self._event(j) for j in range(*k.indices(len(self)))]
        n = len(self)
        if k < 0:
            k += n
        if not 0 <= k < n:
            raise IndexError(f"event {k} is outside 0..{n - 1}")
        return self._event(k)

    def __iter__(self) -> Iterator[ReplayEvent]:
        for k in range(len(self)):
            yield self._event(k)

    def __reversed__(self) -> Iterator[ReplayEvent]:
        for k in range(len(self) - 1, -1, -1):
            yield self._event(k)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (EventLog, list, tuple)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"EventLog({len(self):,} events)"

    def columns(self) -> tuple[memoryview, memoryview, memoryview, memoryview, memoryview]:
        """Per event: action code, pass, worker index, node index, message index (-1: none),
        as read-only views for views that read every event."""
        rec = memoryview(self.rec)
        return rec[0::WIDTH], rec[1::WIDTH], rec[2::WIDTH], rec[3::WIDTH], rec[5::WIDTH]

    def changes(self) -> Iterator[tuple[int, list[int], list[int], list[int]]]:
        """``(step, deps, decrements, pushed)`` of every event that changes dependency counts
        (``distviz.replay.events.index_changes``), read from the columns: no event is built."""
        rec, extra = self.rec, self.extra
        counted = (_COMPUTE, _CALL_START, _EXECUTE)
        for k in range(len(self)):
            base = k * WIDTH
            code = rec[base]
            if code not in counted:
                continue
            i, m = rec[base + 3], rec[base + 5]
            payload = extra.get(k)
            if payload is None:
                payload = self._decode(code, i, m, rec[base + 6])
            deps, decs, pushed = payload_changes(self.g, ACTIONS[code], m < 0, payload)
            if deps or decs or pushed:
                yield k, deps, decs, pushed

    def _event(self, k: int) -> ReplayEvent:
        g = self.g
        code, pi, w, i, call, m, off = self.rec[k * WIDTH:(k + 1) * WIDTH]
        payload = self.extra.get(k)
        if payload is None:
            payload = self._decode(code, i, m, off)
        return LazyEvent(k, pi, ACTIONS[code], None if w < 0 else g.workers[w],
                         None if i < 0 else g.ids[i], None if call < 0 else call,
                         None if m < 0 else self.messages[m], g, payload)

    def _decode(self, code: int, i: int, m: int, off: int) -> tuple[Any, ...]:
        pool = self.pool
        if code == _EXECUTE:
            return self._execute(i, off)
        if code == _ACCUMULATE:
            n = pool[off + 2]
            q = tuple(pool[off + 3:off + 3 + min(n, QUEUE_CAP)])
            return (i, pool[off] == 1, pool[off + 1], q, n, pool[off] == 2)
        if code == _CALL_START:
            return (i,)
        width = _POOLED[code]
        values = tuple(pool[off:off + width])
        return (bool(values[0]),) if code == _BOOL_FIRST else values

    def _execute(self, i: int, off: int) -> tuple[Any, ...]:
        g = self.g
        pool = self.pool
        if g.kind[i] == RECV:   # it sends its gradients: only the queue
            n = pool[off]
            return (i, False, (), (), tuple(pool[off + 1:off + 1 + min(n, QUEUE_CAP)]), n)
        n = pool[off + 1]
        targets = [t for t in g.next[g.next_at[i]:g.next_at[i + 1]] if t >= 0]
        at = off + 2 + len(targets)
        counts = pool[off + 2:at]
        decs = tuple(x for pair in zip(targets, counts, strict=True) for x in pair)
        pushed = tuple(t for t, d in zip(targets, counts, strict=True) if d == 0)
        return (i, pool[off], decs, pushed, tuple(pool[at:at + min(n, QUEUE_CAP)]), n)
