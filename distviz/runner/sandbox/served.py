"""The calls a worker serves for the trainers that change its state (torch side).

Two trainers that call the same worker at about the same time reach it in an order nobody
chose: PyTorch runs each request on the callee's RPC thread pool as it arrives. Most calls only
read there (a forward through a module), and their order does not matter; a call that draws
random numbers from the callee's generator or makes an ``nn.Module`` there (its initial weights,
and the number its name takes: ``extra.Extra#0``) leaves the callee in a state that depends on
which trainer's call came first. The single-process reference runs the trainers one at a time,
so it needs that order.

While a training run with several trainers goes (``watch``), ``serving(frames)`` notes every
call of a scenario function that came from a trainer's main (``frames[0]`` is ``("main",
trainer)``, at any depth) and changed this worker's global generator or made a module:
``[trainer, function, start ns, end ns]`` on ``time.monotonic_ns`` (the clock the trainers'
points are on, one clock for every process of the host). ``taken()`` is the list, sent with the
worker's final parameters. Calls served at the same time as such a call are noted too (the
generator is shared), which is what the order check wants: they ran while the state changed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch

from distviz.runner.sandbox import modules

__all__ = ["serving", "taken", "watch"]

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


@contextmanager
def serving(frames: Sequence[tuple[str, str]]) -> Iterator[None]:
    """Around a served call with the chain ``frames``: note it when it changed this worker's
    generator or made a module (see the module docstring)."""
    trainer = frames[0][1] if frames and frames[0][0] == "main" else ""
    if trainer not in _TRAINERS[0]:
        yield
        return
    made = modules.made()
    state = torch.get_rng_state()
    start = time.monotonic_ns()
    try:
        yield
    finally:
        end = time.monotonic_ns()
        if modules.made() != made or not torch.equal(state, torch.get_rng_state()):
            _CALLS.append([trainer, frames[-1][0], start, end])
