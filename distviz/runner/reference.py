"""The single-process reference: the same program with every RPC a local call, and plain
``torch.autograd`` gradients, the mathematically correct answer (torch side)."""

from __future__ import annotations

from typing import Any

import torch

from distviz import recorder as rec
from distviz.runner.rpc_proxy import LocalRpc
from distviz.runner.worker import build_namespace, state_names
from distviz.trace import Trace


def run_reference(scenario: Any, options: dict[str, Any]) -> dict[str, Any]:
    """Run the scenario in this process; return ``{"outcome", "error", "grads": {var: tensor}}``.

    Each worker keeps its own namespace and random generator (seeded as in the real run), so
    leaves get the same values as on the real workers.
    """
    namespaces: dict[str, dict[str, Any]] = {}
    local = LocalRpc(namespaces)
    state: dict[str, list[tuple[Any, str]]] = {}
    named: list[tuple[Any, str]] = []
    initiator = scenario.workers[0]
    try:
        with torch.enable_grad():
            for rank, w in enumerate(scenario.workers):
                ns = build_namespace(scenario, w, rank, local, options, reference=True)
                namespaces[w] = ns
                state[w] = [pair for label, value in state_names(scenario, w, ns)
                            for pair in rec._expand(label, value)]
            base = namespaces[initiator]
            main_ns = dict(base)
            exec(scenario.main.compile(), main_ns)  # validated and instrumented syntax tree
            # In the real run an RPC result is a new tensor on the caller; here a local call can
            # hand back another worker's own leaf, which must keep that worker's name.
            foreign = {id(t) for w, ns in namespaces.items() if w != initiator
                       for t, _ in state[w] + ns["_dv_made"]}
            # the recorder's priority: main's variables, then worker state, then run-time leaves
            for label, value in main_ns.items():
                if label.startswith("_") or (label in base and base[label] is value):
                    continue
                named.extend(pair for pair in rec._expand(label, value)
                             if id(pair[0]) not in foreign)
            for w in scenario.workers:
                named.extend(state[w])
            for ns in namespaces.values():
                named.extend(ns["_dv_made"])
            for p in scenario.passes:
                roots = [main_ns[r] for r in p.roots]
                torch.autograd.backward(roots, retain_graph=p.retain_graph)
    except Exception as exc:  # noqa: BLE001 - reported, never raised
        return {"outcome": "error", "error": str(exc).strip().splitlines()[0] if str(exc).strip()
                else type(exc).__name__, "grads": {}}
    grads: dict[str, Any] = {}
    seen: set[int] = set()
    for t, label in named:  # one name per leaf: the first, as the recorder does
        if isinstance(t, torch.Tensor) and t.grad_fn is None and t.requires_grad \
                and id(t) not in seen:
            seen.add(id(t))
            grads.setdefault(label, t.grad)
    return {"outcome": "completed", "error": None, "grads": grads}


def compare(ref: dict[str, Any], real_grads: dict[str, torch.Tensor], trace: Trace,
            real: dict[str, Any] | None) -> dict[str, Any]:
    """Compare distributed gradients (by leaf node id) with the reference (by variable name).

    Returns the trace's ``reference`` section: per leaf ``status`` is ``match``, ``mismatch``,
    ``zero_unused`` (distributed autograd gives zeros where the reference has no gradient: an
    unused RPC output), ``missing`` (no distributed gradient) or ``extra``.

    Tolerance: the two runs sum the same terms in different orders, so values are compared
    relative to the gradient's scale: ``|a - b| <= atol + rtol * max|b|`` with ``rtol`` 1e-4
    (float32) or 1e-9 (float64).
    """
    from distviz.runner.initiator import summarize

    rows: list[dict[str, Any]] = []
    leaves = [n for n in trace.nodes if n.kind == "accumulate_grad" and n.var]
    comparable = real is not None and real.get("outcome") == "completed"
    ok = comparable and ref["outcome"] == "completed"
    for n in leaves:
        want = ref["grads"].get(n.var)
        got = real_grads.get(n.id)
        row: dict[str, Any] = {"var": n.var, "leaf": n.id, "worker": n.worker}
        if want is None and got is None:
            row["status"] = "no_gradient"
        elif want is None and got is not None:
            row["status"] = "zero_unused" if bool((got == 0).all()) else "extra"
        elif got is None:
            row["status"] = "missing"
        else:
            same_shape = list(want.shape) == list(got.shape)
            diff = float((want.double() - got.double()).abs().max()) if same_shape else None
            row["max_abs_diff"] = diff
            rtol = 1e-9 if want.dtype == torch.float64 else 1e-4
            scale = float(want.double().abs().max()) if want.numel() else 0.0
            row["tolerance"] = 1e-6 + rtol * scale
            row["status"] = "match" if diff is not None and diff <= row["tolerance"] \
                else "mismatch"
        if want is not None:
            row["reference"] = summarize(want)
        if row["status"] not in ("match", "zero_unused", "no_gradient"):
            ok = False
        rows.append(row)
    return {"outcome": ref["outcome"], "error": ref["error"], "comparable": comparable,
            "ok": bool(ok) if comparable else None, "comparison": rows,
            "gradients": {k: summarize(v) for k, v in sorted(ref["grads"].items())
                          if v is not None}}
