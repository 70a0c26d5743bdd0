"""The single-process reference: the same program with every RPC a local call, and plain
``torch.autograd`` gradients, the mathematically correct answer (torch side).

``distviz.runner.gradients.compare`` turns its result into the trace's ``reference`` section.
"""

from __future__ import annotations

from typing import Any

import torch

from distviz.recorder.names import expand
from distviz.runner.protocol import WorkerOptions
from distviz.runner.sandbox import modules
from distviz.runner.sandbox.namespace import build_namespace, state_names
from distviz.runner.sandbox.rpc_proxy import LocalRpc, LocalWorld
from distviz.scenario import Scenario


def run_reference(scenario: Scenario, options: WorkerOptions) -> dict[str, Any]:
    """Run the scenario in this process; return ``{"outcome", "error", "grads": {var: tensor}}``.

    Each worker keeps its own namespace and random generator (seeded as in the real run), so
    leaves get the same values as on the real workers.
    """
    world = LocalWorld()
    namespaces = world.namespaces
    local = LocalRpc(world)
    state: dict[str, list[tuple[Any, str]]] = {}
    named: list[tuple[Any, str]] = []
    initiator = scenario.workers[0]
    modules.use_scope("reference")
    try:
        with torch.enable_grad():
            for rank, w in enumerate(scenario.workers):
                ns = world.run(w, build_namespace, scenario, w, rank, local, options,
                               reference=True)
                namespaces[w] = ns
                state[w] = [pair for label, value in state_names(scenario, w, ns)
                            for pair in expand(label, value)]
            base = namespaces[initiator]
            main_ns = dict(base)
            # validated and instrumented syntax tree
            world.run(initiator, exec, scenario.main.compile(), main_ns)
            # In the real run an RPC result is a new tensor on the caller; here a local call can
            # hand back another worker's own leaf, which must keep that worker's name.
            params = {w: _module_names(scenario, w, namespaces[w]) for w in scenario.workers}
            foreign = {id(t) for w, ns in namespaces.items() if w != initiator
                       for t, _ in state[w] + params[w] + ns["_dv_made"]}
            # the recorder's priority: main's variables, then worker state, module parameters,
            # then run-time leaves
            for label, value in main_ns.items():
                if label.startswith("_") or (label in base and base[label] is value):
                    continue
                named.extend(pair for pair in expand(label, value)
                             if id(pair[0]) not in foreign)
            for w in scenario.workers:
                named.extend(state[w])
            for w in scenario.workers:
                named.extend(params[w])
            for ns in namespaces.values():
                named.extend(ns["_dv_made"])
            for p in scenario.passes:
                roots = [main_ns[r] for r in p.roots]
                torch.autograd.backward(roots, retain_graph=p.retain_graph)
    except Exception as exc:  # noqa: BLE001 - reported, never raised
        modules.use_scope("run")
        return {"outcome": "error", "error": str(exc).strip().splitlines()[0] if str(exc).strip()
                else type(exc).__name__, "grads": {}}
    modules.use_scope("run")
    grads: dict[str, Any] = {}
    seen: set[int] = set()
    for t, label in named:  # one name per leaf: the first, as the recorder does
        if isinstance(t, torch.Tensor) and t.grad_fn is None and t.requires_grad \
                and id(t) not in seen:
            seen.add(id(t))
            grads.setdefault(label, t.grad)
    return {"outcome": "completed", "error": None, "grads": grads}


def _module_names(scenario: Scenario, worker: str, ns: dict[str, Any]) -> list[tuple[Any, str]]:
    """A worker's module parameters named as the real run's recorder names them: after the
    variable of its ``init`` that holds the module, else after its class
    (``distviz.runner.sandbox.modules``)."""
    held = [(label.split(".", 1)[-1], value) for label, value in state_names(scenario, worker, ns)]
    return modules.names(worker, modules.module_variables(worker, held, worker))
