"""The parent's end of a training run (pure: no torch): the reference process and the
recording.

After every worker of a training run is gone, ``finish_training`` starts one more process from
the fork server for the single-process reference (``distviz.runner.reference.local_training``; the
order the real run's trainers went in goes with it), waits for its ``ReferenceDone`` under
the forward time limit, and collates everything into ``RunResult.recording``.
"""

from __future__ import annotations

import multiprocessing.connection as mpc
import time
from collections.abc import Callable
from typing import Any

from distviz.runner.procs import no_main_import
from distviz.runner.protocol import ReferenceDone, ReferenceSpec, recv
from distviz.runner.supervisor.collate import TrainingRun, collate, interleaving, scenario_info
from distviz.scenario import Scenario

__all__ = ["finish_training"]


def finish_training(ctx: Any, scenario: Scenario, options: Any, training: TrainingRun,
                    result: Any, say: Callable[[str], None]) -> None:
    """Run the reference (when asked for and the training ran to its end) and set
    ``result.recording``. ``ctx`` is the parent's multiprocessing context (fork server)."""
    if options.reference and result.error is None and result.stopped is None:
        say("running the single-process reference")
        order = interleaving(training.points, training.served).order
        training.reference = run_reference_process(
            ctx, ReferenceSpec(scenario=scenario, options=options.worker_options(),
                               schedule=order), options.forward_timeout)
    _collate(scenario, training, result)


def _collate(scenario: Scenario, training: TrainingRun, result: Any) -> None:
    result.recording = collate(training, scenario_info(scenario))


def keep_partial(scenario: Scenario, training: TrainingRun, result: Any,
                 drain: Callable[[], None]) -> None:
    """After Ctrl-C: the recording of the contexts received so far (``drain`` reads those
    still in the pipes), without a reference, marked ``meta["partial"]``; nothing when no
    context was recorded."""
    drain()
    if not training.contexts:
        return
    _collate(scenario, training, result)
    result.recording.meta["partial"] = (
        f"interrupted by Ctrl-C after {len(training.contexts)} recorded contexts; the run "
        "did not finish (no reference, no final parameters)")


def run_reference_process(ctx: Any, spec: ReferenceSpec, timeout: float) -> dict[str, Any]:
    """Start the reference process, wait for its result (at most ``timeout`` seconds), and
    make sure it is gone. A failure comes back as ``{"outcome": "error", ...}``."""
    from distviz.runner.worker.main import reference_entry

    parent_conn, child_conn = ctx.Pipe(duplex=True)
    life_r, life_w = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=reference_entry, args=(child_conn, life_r, spec),
                       name="distviz-reference", daemon=False)
    with no_main_import():
        proc.start()
    child_conn.close()
    life_r.close()
    failed = {"outcome": "error", "contexts": [], "final": {}}
    try:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            ready = mpc.wait([parent_conn, proc.sentinel], timeout=max(0.0, left))
            if not ready:
                return dict(failed, error=f"the reference took longer than {timeout:g} s")
            if parent_conn in ready or parent_conn.poll(0):
                try:
                    msg = recv(parent_conn)
                except (EOFError, OSError):
                    return dict(failed, error="the reference process ended without a result")
                if isinstance(msg, ReferenceDone):
                    return dict(msg.result)
                continue
            return dict(failed, error=f"the reference process died (exit code {proc.exitcode})")
    finally:
        proc.join(5.0)
        if proc.is_alive():
            proc.kill()
            proc.join(5.0)
        for c in (parent_conn, life_w):
            c.close()
