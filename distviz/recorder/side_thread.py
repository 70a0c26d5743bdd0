"""Side threads: run distviz's own RPC rounds outside the program's dist autograd context.

PyTorch keeps the current dist autograd context per thread, so an RPC made from another thread
is not recorded in the program's context: it adds no message ids and no known workers. Every
place that makes such a round goes through this module:

- ``SideThread(name)``: one named thread per process, made at its first use (a forked
  child makes its own: threads do not fork). Called from that thread itself, work runs at once
  (a round that starts another round does not wait for itself). Its thread names start with
  ``name``, which code may check (``threading.current_thread().name``).
- ``in_new_thread(fn)``: ``fn()`` in a thread of its own, made for the call.
- ``finished(fn, *args)``: ``fn(*args)`` run here, as a finished future.
- ``ALARMS.after(seconds, fn)``: ``fn()`` in a thread of its own after ``seconds``, unless the
  returned ``Alarm`` is cancelled first; one daemon thread per process keeps every alarm (a
  ``threading.Timer`` per call would start a thread, and wait until it runs, at every call).
- ``in_threads(fns, timeout, name)``: each ``fn()`` in a daemon thread of its own, waited for
  at most ``timeout`` seconds in all: what each returned or raised, or that it is still running
  (the one thread-with-timeout: a backward pass under the hang time-out, a snapshot's graph,
  the snapshot's questions to every process, the reference's trainers).

Torch-free: nothing here knows about RPC or autograd.
"""

from __future__ import annotations

import heapq
import itertools
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class SideThread:
    """One side thread per process, named ``name`` (``distviz-rpc``, ``distviz-gather``)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._pools: dict[int, ThreadPoolExecutor] = {}

    def is_current(self) -> bool:
        """Whether the calling thread is this side thread."""
        return threading.current_thread().name.startswith(self.name)

    def pool(self, make: bool = True) -> ThreadPoolExecutor | None:
        """This process's thread (made now when ``make``; ``None`` when it has none yet)."""
        pool = self._pools.get(os.getpid())
        if pool is None and make:
            pool = self._pools[os.getpid()] = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix=self.name)
        return pool

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        """Start ``fn(*args)`` in the side thread; from the side thread itself it runs at once
        (``finished``)."""
        if self.is_current():
            return finished(fn, *args)
        pool = self.pool()
        assert pool is not None
        return pool.submit(fn, *args)

    def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in the side thread; waits for it and returns its result (or raises
        what it raised)."""
        return self.submit(fn, *args).result()

    def settle(self, timeout: float) -> None:
        """Wait (at most ``timeout`` seconds) until the side thread has done the work it was
        given; a round stuck on a dead worker is left behind."""
        pool = self.pool(make=False)
        if pool is not None:
            try:
                pool.submit(lambda: None).result(timeout=timeout)
            except Exception:  # noqa: BLE001 - a round stuck on a dead worker: go on anyway
                pass


@dataclass(order=True)
class Alarm:
    """One alarm of ``Alarms``: ``fn()`` at ``at`` (``time.monotonic``), unless cancelled."""

    at: float
    seq: int
    fn: Callable[[], Any] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)

    def cancel(self) -> None:
        """The alarm will not go off (it is dropped when its time comes)."""
        self.cancelled = True


class Alarms:
    """Deadlines kept by one daemon thread per process (made at the first alarm; a forked
    child makes its own). A cancelled alarm stays queued until its time, so setting one never
    wakes the thread unless it is the earliest; each alarm that goes off runs in a thread of its
    own (what it does may take long: it must not hold up the others)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._cond = threading.Condition()
        self._queue: list[Alarm] = []
        self._pid = 0
        self._seq = itertools.count()

    def after(self, seconds: float, fn: Callable[[], Any]) -> Alarm:
        """``fn()`` after ``seconds``, unless the returned alarm is cancelled first."""
        alarm = Alarm(time.monotonic() + seconds, next(self._seq), fn)
        with self._cond:
            if self._pid != os.getpid():    # first use in this process
                self._pid, self._queue = os.getpid(), []
                threading.Thread(target=self._loop, name=self.name, daemon=True).start()
            heapq.heappush(self._queue, alarm)
            if self._queue[0] is alarm:
                self._cond.notify()
        return alarm

    def _loop(self) -> None:
        while True:
            with self._cond:
                due = self._due()
                while due is None:
                    wait = self._queue[0].at - time.monotonic() if self._queue else None
                    self._cond.wait(wait)
                    due = self._due()
            threading.Thread(target=due.fn, name=f"{self.name}-fired", daemon=True).start()

    def _due(self) -> Alarm | None:
        """The earliest alarm whose time has come and that was not cancelled (taken off the
        queue with the cancelled ones before it); ``None`` if none is due."""
        now = time.monotonic()
        while self._queue and self._queue[0].at <= now:
            alarm = heapq.heappop(self._queue)
            if not alarm.cancelled:
                return alarm
        return None


#: The process's alarms (a recorded backward's hang time-out).
ALARMS = Alarms("distviz-alarms")


def in_new_thread(fn: Callable[[], T]) -> T:
    """``fn()`` in a thread of its own, made for this call (which holds no dist autograd
    context); returns its result or raises what it raised."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="distviz-side") as pool:
        return pool.submit(fn).result()


def finished(fn: Callable[..., T], *args: Any) -> Future[T]:
    """``fn(*args)`` run in this thread, as a finished future (its exception kept in it, as a
    pool's future keeps it)."""
    done: Future[T] = Future()
    try:
        done.set_result(fn(*args))
    except BaseException as exc:  # noqa: BLE001 - handed to the waiter
        done.set_exception(exc)
    return done


@dataclass(slots=True)
class Ran(Generic[T]):
    """What one function run by ``in_threads`` did: ``done`` when it returned or raised in
    time, then its ``value`` or the ``error`` it raised."""

    done: bool = False
    value: T | None = None
    error: BaseException | None = None


def in_threads(fns: Sequence[Callable[[], T]], timeout: float | None, name: str
               ) -> list[Ran[T]]:
    """Each ``fn()`` in a daemon thread of its own (named ``name``, ``name-1``, ...), all
    started at once, waited for at most ``timeout`` seconds in all (``None``: until each
    ends). Returns, in the order of ``fns``, what each did; one still running past the
    deadline is left to run (``done`` false)."""
    ran: list[Ran[T]] = [Ran() for _ in fns]

    def one(fn: Callable[[], T], out: Ran[T]) -> None:
        try:
            out.value = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the waiter
            out.error = exc
        out.done = True
    threads = [threading.Thread(target=one, args=(fn, out), daemon=True,
                                name=name if k == 0 else f"{name}-{k}")
               for k, (fn, out) in enumerate(zip(fns, ran, strict=True))]
    for t in threads:
        t.start()
    deadline = None if timeout is None else time.monotonic() + timeout
    for t in threads:
        t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
    return ran
