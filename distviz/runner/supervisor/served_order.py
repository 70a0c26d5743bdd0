"""The order the trainers' calls changed a worker's state in (pure: the parent imports it).

Two trainers that call the same worker reach it in the order their messages arrive, which
PyTorch does not fix: the callee runs each request on its RPC thread pool as it comes. When
those calls change the callee's state (draw random numbers from its generator, make an
``nn.Module`` there: initial weights, and the number its name takes), the run's values depend
on that order, and the order the calls began in on the trainers is no proof of it: the later
one may arrive first. Each worker notes such calls (``distviz.runner.sandbox.served``:
``[trainer, function, start ns, end ns]`` on the host's one monotonic clock), and
``callee_order`` reads them against the trainers' points (``TrainingSession.point``):

* calls of different trainers that changed one worker's state and ran there at the same time
  have no order at all (their random draws interleave), and neither does such a call served
  by a trainer beside its own main: the order is not known (``clash`` says why);
* otherwise each such call is matched to the trainer's point it ran under (the one call of
  that trainer under way the whole time it ran; with none or several the order is not known)
  and that point takes the time the callee began it (``keys``): the reference then goes in the
  callee's order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

__all__ = ["CalleeOrder", "ServedCall", "callee_order", "served_calls"]


class ServedCall(NamedTuple):
    """A call ``callee`` served for ``trainer`` that changed its state, on the callee's clock."""

    callee: str
    trainer: str
    func: str
    start: int
    end: int


class CalleeOrder(NamedTuple):
    """``keys``: ``(trainer, point number)`` -> the time the callee began the state-changing
    call made under that point; ``callees``: the workers whose state two trainers changed (or
    a trainer's own main and another trainer); ``clash``: why their order is not known
    (``None``: it is, through ``keys``)."""

    keys: dict[tuple[str, int], int]
    callees: tuple[str, ...]
    clash: str | None


def served_calls(served: Mapping[str, Sequence[Sequence[Any]]]) -> list[ServedCall]:
    """Every worker's noted calls as values, in the order they began."""
    calls = [ServedCall(str(callee), str(t), str(f), int(s), int(e))
             for callee, rows in served.items() for t, f, s, e in rows]
    return sorted(calls, key=lambda c: (c.start, c.callee, c.trainer))


def _together(a: ServedCall, b: ServedCall) -> str:
    return (f"{a.trainer}'s call {a.func} and {b.trainer}'s call {b.func} ran on {a.callee} at "
            "the same time and changed its state (random numbers drawn or a module made), so "
            "the order they changed it in is not known")


def _beside_main(c: ServedCall) -> str:
    return (f"{c.callee} served {c.trainer}'s call {c.func} beside its own main and its state "
            "changed meanwhile (random numbers drawn or a module made), so the order of the "
            "two is not known")


def _point_of(c: ServedCall, points: Sequence[Sequence[Any]]) -> int | None:
    """The number (from 1) of the trainer's point ``c`` ran under: its one call that began
    before ``c`` began and had not ended before ``c`` ended (an open one counts); ``None``
    when no call or more than one could have been it."""
    found = [n for n, (kind, start, end) in enumerate(points, 1)
             if kind != "context" and int(start) <= c.start and (int(end) < 0 or int(end) >= c.end)]
    return found[0] if len(found) == 1 else None


def _clash_on(callee: str, calls: Sequence[ServedCall], trainers: Sequence[str]) -> str | None:
    """Why the order of ``calls`` (one callee's, in the order they began) is not known."""
    latest: dict[str, ServedCall] = {}
    for c in calls:
        if callee in trainers and c.trainer != callee:
            return _beside_main(c)
        for other, o in latest.items():
            if other != c.trainer and o.end > c.start:
                return _together(o, c)
        if c.trainer not in latest or c.end > latest[c.trainer].end:
            latest[c.trainer] = c
    return None


def callee_order(points: Mapping[str, Sequence[Sequence[Any]]],
                 served: Mapping[str, Sequence[Sequence[Any]]]) -> CalleeOrder:
    """The callees' order of the trainers' state-changing calls (see the module docstring)."""
    trainers = sorted(points)
    by_callee: dict[str, list[ServedCall]] = {}
    for c in served_calls(served):
        by_callee.setdefault(c.callee, []).append(c)
    callees = tuple(sorted(
        callee for callee, calls in by_callee.items()
        if len({c.trainer for c in calls}) > 1
        or (callee in trainers and any(c.trainer != callee for c in calls))))
    keys: dict[tuple[str, int], int] = {}
    clash: str | None = None
    for callee in callees:
        calls = by_callee[callee]
        clash = clash or _clash_on(callee, calls, trainers)
        for c in calls:
            n = _point_of(c, points.get(c.trainer, ()))
            if n is None:
                clash = clash or (f"{c.trainer}'s call {c.func} on {callee} changed its state "
                                  "and is not told apart from the other calls its main had "
                                  "under way, so the order is not known")
                continue
            keys[(c.trainer, n)] = min(keys.get((c.trainer, n), c.start), c.start)
    return CalleeOrder(keys, callees, clash)
