"""The calls a worker serves for the trainers that change its state (torch side).

Two trainers that call the same worker at about the same time reach it in an order nobody
chose: PyTorch runs each request on the callee's RPC thread pool as it arrives. Most calls only
read there (a forward through a module), and their order does not matter; a call that draws
random numbers from the callee's generator or makes an ``nn.Module`` there (its initial weights,
and the number its name takes: ``extra.Extra#0``) leaves the callee in a state that depends on
which trainer's call came first. The single-process reference runs the trainers one at a time,
so it needs that order.

While a training run with several trainers goes (``watch``), ``begin(frames)`` and ``end``
around a served call note every call of a scenario function that came from a trainer's main
(``frames[0]`` is ``("main", trainer)``, at any depth) and changed this worker's state: drew
from its global generator or the scenario's (``torch.rand``), made a module or a named leaf
(``worker.full#0``): ``[trainer, function, start ns, end ns]`` on ``time.monotonic_ns`` (the
clock the trainers' points are on, one clock for every process of the host). ``taken()`` is
the list, sent with the worker's final parameters. Calls served at the same time as such a
call are noted too (the generators are shared), which is what the order check wants: they ran
while the state changed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence, Sized
from typing import Any, NamedTuple

import torch

from distviz.runner.sandbox import modules

__all__ = ["begin", "end", "taken", "watch"]

_TRAINERS: list[frozenset[str]] = [frozenset()]
_WATCHED: list[torch.Generator] = [torch.default_generator]
_MADE: list[Sized] = [()]
_CALLS: list[list[Any]] = []


def watch(trainers: Sequence[str], generator: torch.Generator | None = None,
          made: Sized = ()) -> None:
    """Note the calls from these trainers from now on (only with two or more: one trainer's
    calls go in its own order). ``generator``: the one the scenario's random functions draw
    from (``torch.rand``), besides the global one (``nn`` layers' initial weights); ``made``:
    the leaves its creation functions made, named in the order they were made
    (``worker.full#0``)."""
    _TRAINERS[0] = frozenset(trainers) if len(trainers) > 1 else frozenset()
    _WATCHED[:] = [torch.default_generator] + ([generator] if generator is not None else [])
    _MADE[0] = made
    _CALLS.clear()


def taken() -> list[list[Any]]:
    """The noted calls: ``[trainer, function, start ns, end ns]``, in the order they ended."""
    return [list(c) for c in _CALLS]


class _Note(NamedTuple):
    """A served call under way: its trainer and function, and the state before it."""

    trainer: str
    func: str
    made: int
    states: tuple[torch.Tensor, ...]
    start: int


def begin(frames: Sequence[tuple[str, str]]) -> _Note | None:
    """A served call with the chain ``frames`` begins: what ``end`` compares, or ``None`` when
    it is not a call from a watched trainer's main."""
    trainer = frames[0][1] if frames and frames[0][0] == "main" else ""
    if trainer not in _TRAINERS[0]:
        return None
    return _Note(trainer, frames[-1][0], _made(), tuple(g.get_state() for g in _WATCHED),
                 time.monotonic_ns())


def _made() -> int:
    return modules.made() + len(_MADE[0])


def end(note: _Note | None) -> None:
    """The call ``begin`` noted ended: keep it when it made a module or changed the
    generator (see the module docstring)."""
    if note is None:
        return
    stop = time.monotonic_ns()
    if _made() != note.made or not all(
            torch.equal(s, g.get_state()) for s, g in zip(note.states, _WATCHED, strict=True)):
        _CALLS.append([note.trainer, note.func, note.start, stop])
