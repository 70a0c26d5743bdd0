"""The calls a worker serves for the trainers that change its state (torch side).

Two trainers that call the same worker at about the same time reach it in an order nobody
chose: PyTorch runs each request on the callee's RPC thread pool as it arrives. Most calls only
read there (a forward through a module), and their order does not matter; a call that draws
random numbers from the callee's generator or makes an ``nn.Module`` there (its initial weights,
and the number its name takes: ``extra.Extra#0``) leaves the callee in a state that depends on
which trainer's call came first. The single-process reference runs the trainers one at a time,
so it needs that order.

While a training run with several trainers goes (``watch``), ``begin(frames)`` and ``end``
around a served call note every call of a scenario function that came from a trainer's main (``frames[0]`` is ``("main",
trainer)``, at any depth) and changed this worker's global generator or made a module:
``[trainer, function, start ns, end ns]`` on ``time.monotonic_ns`` (the clock the trainers'
points are on, one clock for every process of the host). ``taken()`` is the list, sent with the
worker's final parameters. Calls served at the same time as such a call are noted too (the
generator is shared), which is what the order check wants: they ran while the state changed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import torch

from distviz.runner.sandbox import modules

__all__ = ["begin", "end", "taken", "watch"]

_GENERATOR = torch.default_generator
_TRAINERS: list[frozenset[str]] = [frozenset()]
_CALLS: list[list[Any]] = []


def watch(trainers: Sequence[str]) -> None:
    """Note the calls from these trainers from now on (only with two or more: one trainer's
    calls go in its own order)."""
    _TRAINERS[0] = frozenset(trainers) if len(trainers) > 1 else frozenset()
    _CALLS.clear()


def taken() -> list[list[Any]]:
    """The noted calls: ``[trainer, function, start ns, end ns]``, in the order they ended."""
    return [list(c) for c in _CALLS]


class _Note(NamedTuple):
    """A served call under way: its trainer and function, and the state before it."""

    trainer: str
    func: str
    made: int
    state: torch.Tensor
    start: int


def begin(frames: Sequence[tuple[str, str]]) -> _Note | None:
    """A served call with the chain ``frames`` begins: what ``end`` compares, or ``None`` when
    it is not a call from a watched trainer's main."""
    trainer = frames[0][1] if frames and frames[0][0] == "main" else ""
    if trainer not in _TRAINERS[0]:
        return None
    return _Note(trainer, frames[-1][0], modules.made(), _GENERATOR.get_state(),
                 time.monotonic_ns())


def end(note: _Note | None) -> None:
    """The call ``begin`` noted ended: keep it when it made a module or changed the
    generator (see the module docstring)."""
    if note is None:
        return
    stop = time.monotonic_ns()
    if modules.made() != note.made or not torch.equal(note.state, _GENERATOR.get_state()):
        _CALLS.append([note.trainer, note.func, note.start, stop])
