"""One worker's module namespace: the names its programs run with (torch side).

``build_namespace`` makes it for a real worker and, once per worker, for the single-process
reference: the scenario language's base names (``base.base_namespace``), ``rpc``, the
functions of ``code``, then what the worker's ``init`` sets. ``state_names`` lists what the
``init`` set, with the labels traces give it (``ps.w``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from distviz.recorder.names import auto_name
from distviz.runner.protocol import WorkerOptions
from distviz.runner.sandbox import base, modules, training_names
from distviz.runner.sandbox.rpc_proxy import SCENARIO_MODULE
from distviz.scenario import Scenario

__all__ = ["build_namespace", "state_names"]


def build_namespace(scenario: Scenario, worker: str, rank: int, rpc_obj: Any,
                    options: WorkerOptions, reference: bool = False,
                    target: dict[str, Any] | None = None,
                    extras: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Make the module namespace of one worker: base names, ``rpc``, ``code`` functions, ``init``.

    Returns ``target`` (or a new dict) filled in. Real runs pass the ``__dict__`` of the module
    registered as ``distviz_scenario``, so functions pickle by reference. ``reference=True``
    makes ``crash_backward`` raise instead of ending the process, and gives run-time leaves no
    fallback names (the reference names them itself from ``_dv_made``). Raises whatever the
    ``code`` or ``init`` program raises. ``extras`` are the training names (``dist_autograd``,
    ``DistributedOptimizer``, ``RRef``, ``RemoteModule``) of the real run or the reference.
    The worker's global generator (``nn`` layers, dropout) is seeded here.
    """
    torch.manual_seed(training_names.worker_rng_seed(scenario.seed, rank))
    modules.install()
    gen = base.make_generator(scenario.seed, rank)
    proxy = base.TorchProxy(gen, options.max_numel)
    made: list[tuple[Any, str]] = []
    counts: dict[str, int] = {}

    def on_leaf(t: Any, fn: str) -> None:
        k = counts.get(fn, 0)
        counts[fn] = k + 1
        made.append((t, f"{worker}.{fn}#{k}"))
        if not reference:
            auto_name(t, f"{worker}.{fn}#{k}")
    object.__setattr__(proxy, "on_leaf", on_leaf)
    budget = base.StepBudget(options.max_steps)
    ns = target if target is not None else {}
    ns.update(base.base_namespace(proxy, budget, dict(scenario.params)))
    training_names.install(ns, proxy)
    ns.update(extras or {})
    if reference:
        # the reference runs inside the initiator: a crash must not kill it
        ns["crash_backward"] = lambda x: ns["fail_backward"](
            x, "crash_backward: the worker would die here")
    ns["rpc"] = rpc_obj
    ns["__name__"] = SCENARIO_MODULE
    ns["_dv_made"] = made  # leaves made by creation functions, in order (reference naming)
    if scenario.code is not None:
        exec(scenario.code.compile(), ns)  # validated and instrumented syntax tree
    init = scenario.worker_init.get(worker)
    if init is not None:
        exec(init.compile(), ns)
    return ns


def state_names(scenario: Scenario, worker: str, ns: dict[str, Any]) -> list[tuple[str, Any]]:
    """``(label, value)`` for each variable the worker's ``init`` set (``("ps.w", tensor)``),
    in the order the checker met them."""
    return [(f"{worker}.{n}", ns[n]) for n in scenario.worker_state.get(worker, []) if n in ns]
