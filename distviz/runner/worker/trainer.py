"""A worker's part of a training run (torch side): run its ``main`` if it has one, tell the
parent, wait for ``Finish``, report the final parameters.

Trainers run their ``main`` (contexts, backward passes and optimizer steps go through the
worker's ``TrainingSession``); the others only serve RPCs meanwhile. Every worker keeps serving
until the parent says that all trainers are done (``Finish``), so the modules the trainers
reach through RRefs are still there when each worker reports its parameters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from distviz.outcome import StopKind
from distviz.runner.protocol import FinalState, Finish, TrainerDone, recv
from distviz.runner.sandbox import served
from distviz.runner.worker.session import (
    BackwardHung,
    TrainingHangPredicted,
    TrainingSession,
    final_parameters,
)
from distviz.scenario import Scenario

__all__ = ["run_training"]


def run_training(conn: Any, tell: Callable[[Any], None], scenario: Scenario, worker: str,
                 ns: dict[str, Any], session: TrainingSession, state: dict[str, str]) -> bool:
    """Run this worker's side of a training scenario; returns whether a graceful RPC shutdown
    is possible. Raises what the main raises in its forward computations (a backward that
    raised, hung or was predicted to hang ends the main with ``TrainerDone(stop=...)``)."""
    program = scenario.mains.get(worker)
    if program is not None:
        main_ns = dict(ns)
        session.main_ns = main_ns
        error: str | None = None
        stop: StopKind | None = None
        try:
            exec(program.compile(), main_ns)  # validated and instrumented syntax tree
        except TrainingHangPredicted as exc:
            error, stop = str(exc), StopKind.PREDICTED_HANG
        except BackwardHung as exc:
            error, stop = str(exc), StopKind.HUNG
        except Exception as exc:
            if session.failed is None:
                raise
            error, stop = session.failed, StopKind.RAISED
            del exc
        tell(TrainerDone(worker=worker, contexts=session.count, windows=session.windows(),
                         error=error, stop=None if stop is None else stop.value,
                         points=session.points))
    state["phase"] = "serving"
    try:
        msg = recv(conn)
    except (EOFError, OSError):
        return False
    if isinstance(msg, Finish):
        state["phase"] = "final state"
        tell(FinalState(worker=worker, params=final_parameters(worker), served=served.taken()))
    return True
