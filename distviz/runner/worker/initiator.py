"""The initiator worker: forward pass in a context, recording, the observed real backward
(``distviz.runner.observe_real``), the single-process reference, and the results sent to the
parent (torch side)."""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.distributed.autograd as dist_autograd

from distviz.recorder import hooks
from distviz.recorder.gather import gather
from distviz.recorder.merge import build_trace
from distviz.recorder.names import expand
from distviz.recorder.piece import root_ids, root_nrs
from distviz.runner.gradients import compare
from distviz.runner.observe_real import Passes, RealRun, collect, on_all, run_pass
from distviz.runner.protocol import (
    Backward,
    ForwardDone,
    Result,
    TraceRecorded,
    WorkerOptions,
    recv,
    send,
)
from distviz.runner.reference.plain import run_reference
from distviz.scenario import Scenario
from distviz.trace import BackwardPass, NodeKind, Trace


class RootError(Exception):
    """A backward root is not something ``dist_autograd.backward`` accepts."""

    phase = "roots"

    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.line = line


def _article(word: str) -> str:
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


def check_root(name: str, value: Any, line: int | None) -> torch.Tensor:
    """Check a root as ``DistEngine::validateRootsAndRetrieveEdges`` does, explained."""
    if not isinstance(value, torch.Tensor):
        raise RootError(f"backward root {name!r} is {_article(type(value).__name__)}, not a tensor; "
                        "roots must be scalar tensors such as `loss = t.sum()`", line)
    if not value.requires_grad:
        raise RootError(f"backward root {name!r} does not require grad (PyTorch: 'requires_grad "
                        "not set on root'); compute it from tensors created with "
                        "requires_grad=True", line)
    if value.numel() != 1:
        raise RootError(f"backward root {name!r} has shape {list(value.shape)} (PyTorch: ' is not a "
                        "scalar, all roots need to be scalar'); reduce it, e.g. "
                        f"`{name} = {name}.sum()`", line)
    if value.grad_fn is None:
        raise RootError(f"backward root {name!r} is a leaf tensor (PyTorch: ' does not have a "
                        "valid gradient function.'); use a value computed from it", line)
    return value


def run_real_backward(cid: int, workers: list[str], me: str, passes: list[BackwardPass],
                      roots: list[list[torch.Tensor]], options: WorkerOptions,
                      send_ids: list[str]) -> RealRun:
    """Run ``dist_autograd.backward`` for each pass with hooks on every recorded node, each
    under the hang time-out (``observe_real.run_pass``), until one raises or hangs; returns
    what every worker observed (``observe_real.collect``)."""
    inject = dict(options.inject)
    if options.observe:
        on_all(workers, me, hooks.install_hooks, cid, inject)
    ran = Passes()
    for rs, p in zip(roots, passes, strict=True):
        run_pass(cid, rs, p.retain_graph, options.hang_timeout, ran)
        if ran.outcome != "completed":
            break
    real = collect(cid, workers, me, ran, options.hang_timeout, set(send_ids))
    real.measured, real.injected = options.observe, inject or None
    return real


def run_initiator(conn: Any, scenario: Scenario, module_ns: dict[str, Any],
                  options: WorkerOptions) -> bool:
    """Drive the whole run on rank 0: ``main`` inside ``dist_autograd.context()``, the roots
    checked, the graph recorded and sent, then (when the parent says so) the observed real
    backward, the reference, and the results sent.

    Returns whether a graceful RPC shutdown is possible (every worker still answers); when it
    is not, never returns: the parent tears every worker down. Raises ``RootError`` for a bad
    root and whatever ``main`` raises.
    """
    me = scenario.workers[0]
    with dist_autograd.context() as cid:
        main_ns = dict(module_ns)
        t = time.perf_counter()
        exec(scenario.main.compile(), main_ns)  # validated and instrumented syntax tree
        send(conn, ForwardDone(seconds=time.perf_counter() - t))
        pass_roots = _pass_roots(scenario, main_ns)
        trace, passes = _record(cid, scenario, module_ns, main_ns, pass_roots)
        send(conn, TraceRecorded(trace=trace.to_json()))
        cmd = recv(conn)
        observed: RealRun | None = None
        if isinstance(cmd, Backward) and cmd.run:
            observed = run_real_backward(cid, trace.workers, me, passes, pass_roots, options,
                                         [n.id for n in trace.nodes if n.kind == NodeKind.SEND])
        real = observed.to_json() if observed is not None else None
        grads = observed.gradients if observed is not None else {}
        reference = None
        if options.reference:
            reference = compare(run_reference(scenario, options), grads, trace, real)
        graceful = real is None or (real["outcome"] == "completed" and not real["unreachable"])
        send(conn, Result(real=real, reference=reference, graceful=graceful))
        if not graceful:
            # a hang never unblocks and a dead peer never answers: the parent tears every
            # worker down now
            while True:
                time.sleep(3600)
    return True


def _pass_roots(scenario: Scenario, main_ns: dict[str, Any]) -> list[list[torch.Tensor]]:
    """The root tensors of each backward pass, checked (``RootError`` otherwise)."""
    pass_roots: list[list[torch.Tensor]] = []
    for p in scenario.passes:
        rs = []
        for r in p.roots:
            if r not in main_ns:
                raise RootError(f"backward root {r!r} is not defined by main", p.line)
            rs.append(check_root(r, main_ns[r], p.line))
        pass_roots.append(rs)
    return pass_roots


def _record(cid: int, scenario: Scenario, module_ns: dict[str, Any], main_ns: dict[str, Any],
            pass_roots: list[list[torch.Tensor]]) -> tuple[Trace, list[BackwardPass]]:
    """Record the graph of context ``cid`` on every worker, naming tensors after ``main``'s
    variables; return the trace and its passes."""
    named: list[tuple[Any, str]] = []
    for label, value in main_ns.items():
        if label.startswith("_") or (label in module_ns and module_ns[label] is value):
            continue
        named.extend(expand(label, value))
    uniq: list[torch.Tensor] = []
    for rs in pass_roots:
        for r in rs:
            if not any(r is u for u in uniq):
                uniq.append(r)
    workers, pieces = gather(cid, uniq, named, inspect_saved=True)
    passes = [BackwardPass(roots=root_ids(cid, rs), retain_graph=p.retain_graph,
                           root_vars=list(p.roots), root_nrs=root_nrs(rs))
              for p, rs in zip(scenario.passes, pass_roots, strict=True)]
    return build_trace(workers, scenario.workers[0], cid, pieces, passes), passes
