"""The initiator worker: forward pass in a context, recording, the observed real backward,
the single-process reference, and the results sent to the parent (torch side)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc

from distviz import limits
from distviz.recorder import graph as rec
from distviz.recorder import hooks
from distviz.runner.gradients import compare, summarize
from distviz.runner.protocol import (
    Backward,
    ForwardDone,
    Recorded,
    Result,
    WorkerOptions,
    recv,
    send,
)
from distviz.runner.reference import run_reference
from distviz.scenario import Scenario
from distviz.trace import BackwardPass, Trace


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


def _side(fn: Callable[[], Any]) -> Any:
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(fn).result()


def call_on_workers(workers: list[str], me: str, fn: Callable[..., Any], args: tuple[Any, ...],
                    timeout: float) -> dict[str, Any]:
    """Call ``fn(*args)`` on every worker (locally on ``me``), in the calling thread; returns
    each worker's result, or the exception it raised (a dead worker's included)."""
    out: dict[str, Any] = {}
    futs = {}
    for w in workers:
        if w == me:
            continue
        try:
            futs[w] = rpc.rpc_async(w, fn, args=args, timeout=timeout)
        except Exception as exc:  # noqa: BLE001 - a dead worker
            out[w] = exc
    try:
        out[me] = fn(*args)
    except Exception as exc:  # noqa: BLE001
        out[me] = exc
    for w, f in futs.items():
        try:
            out[w] = f.wait()
        except Exception as exc:  # noqa: BLE001
            out[w] = exc
    return out


def _on_all(workers: list[str], me: str, fn: Callable[..., Any], *args: Any,
            timeout: float = limits.HOOKS_TIMEOUT) -> dict[str, Any]:
    """Call ``fn(*args)`` on every worker (locally on ``me``) from a side thread, outside the
    caller's dist-autograd context; failures come back as exceptions."""
    return dict(_side(lambda: call_on_workers(workers, me, fn, args, timeout)))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def run_real_backward(cid: int, workers: list[str], me: str, passes: list[BackwardPass],
                      roots: list[list[torch.Tensor]], options: WorkerOptions,
                      send_ids: list[str]) -> dict[str, Any]:
    """Run ``dist_autograd.backward`` for each pass with hooks on every recorded node.

    Returns the ``real`` section of the trace (outcome, error, events, gradients by leaf id) and,
    under ``"_grads"``, the gradient tensors for the reference comparison.
    """
    inject = dict(options.inject)
    if options.observe:
        _on_all(workers, me, hooks.install_hooks, cid, inject)
    hang_timeout = options.hang_timeout
    outcome, error = "completed", None
    windows: list[tuple[int, int]] = []
    t0 = time.monotonic_ns()
    durations = []
    for i, p in enumerate(passes):
        box: dict[str, Any] = {}

        def go(rs: list[torch.Tensor] = roots[i], retain: bool = p.retain_graph,
               out: dict[str, Any] = box) -> None:
            try:
                dist_autograd.backward(cid, rs, retain_graph=retain)
            except BaseException as exc:  # noqa: BLE001
                out["exc"] = exc
        start = time.monotonic_ns()
        th = threading.Thread(target=go, name=f"distviz-backward-{i}", daemon=True)
        th.start()
        th.join(hang_timeout)
        end = time.monotonic_ns()
        windows.append((start, end))
        durations.append((end - start) / 1e9)
        if th.is_alive():
            outcome = "hang"
            error = (f"pass {i + 1}: dist_autograd.backward did not return within "
                     f"{hang_timeout:g} s")
            break
        if "exc" in box:
            outcome = "error"
            error = _first_line(box["exc"])
            break
    return observed(cid, workers, me, options, outcome, error, windows, durations, t0, send_ids)


def observed(cid: int, workers: list[str], me: str, options: WorkerOptions, outcome: str,
             error: str | None, windows: list[tuple[int, int]], durations: list[float], t0: int,
             send_ids: list[str]) -> dict[str, Any]:
    """The ``real`` section after the passes ran (``windows`` in ``CLOCK_MONOTONIC`` ns from
    ``t0``): collect every worker's observed events and gradients, estimate clock offsets, pair
    pre- and post-hooks. Under ``"_grads"``, the gradient tensors by leaf id."""
    inject = dict(options.inject)
    real: dict[str, Any] = {"outcome": outcome, "error": error, "passes_run": len(windows),
                            "pass_seconds": durations, "interop_threads":
                            torch.get_num_interop_threads(), "events": [], "gradients": {},
                            "unreachable": [], "hang_timeout_s": options.hang_timeout,
                            "pass_start_us": [round((s - t0) / 1000.0, 3) for s, _e in windows]}
    if options.observe:
        real["durations"] = "measured"
    if inject:
        real["injected"] = dict(inject)
    got = _on_all(workers, me, hooks.collect, cid, outcome != "hang",
                  timeout=limits.COLLECT_TIMEOUT)
    offsets = clock_offsets(workers, me, got) if outcome != "hang" else {}
    real["clock"] = {"source": "CLOCK_MONOTONIC", "offsets_us": {
        w: round(o / 1000.0, 3) for w, (o, _rtt) in sorted(offsets.items())},
        "rtt_us": {w: round(rtt / 1000.0, 3) for w, (_o, rtt) in sorted(offsets.items())}}
    grads: dict[str, torch.Tensor] = {}
    events: list[dict[str, Any]] = []
    sends = set(send_ids)
    for w in workers:
        piece = got.get(w)
        if isinstance(piece, BaseException) or piece is None:
            real["unreachable"].append({"worker": w, "error": _first_line(piece)
                                        if isinstance(piece, BaseException) else "no answer"})
            continue
        grads.update(piece["grads"])
        events.extend(pair_events(w, piece["events"], windows, t0, sends,
                                   offsets.get(w, (0, 0))[0]))
    events.sort(key=lambda e: (e["t_us"], e["worker"]))
    real["events"] = events
    for nid, g in sorted(grads.items()):
        real["gradients"][nid] = summarize(g)
    real["_grads"] = grads
    return real


def clock_offsets(workers: list[str], me: str,
                   got: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """``{worker: (offset ns, round trip ns)}`` for workers on another host than ``me``.

    Workers on one host (one boot id) share ``CLOCK_MONOTONIC`` and need no offset. For the
    others, the best of a few RPC round trips (NTP's estimate): the remote clock read halfway,
    ``offset = remote - (sent + answered) / 2``, correct to half the round trip.
    """
    mine, _ = hooks.clock_sample()

    def measure() -> dict[str, tuple[int, int]]:
        out: dict[str, tuple[int, int]] = {}
        for w in workers:
            if w == me or isinstance(got.get(w), BaseException) or got.get(w) is None:
                continue
            best: tuple[int, int] | None = None
            for _ in range(5):
                sent = time.monotonic_ns()
                boot, remote = rpc.rpc_sync(w, hooks.clock_sample, timeout=10.0)
                answered = time.monotonic_ns()
                if boot == mine and mine:
                    break
                sample = (remote - (sent + answered) // 2, answered - sent)
                if best is None or sample[1] < best[1]:
                    best = sample
            if best is not None:
                out[w] = best
        return out
    try:
        return dict(_side(measure))
    except Exception:  # noqa: BLE001 - a worker stopped answering: no offsets
        return {}


def pair_events(worker: str, raw: list[list[Any]], windows: list[tuple[int, int]],
                 t0: int, sends: set[str], offset: int = 0) -> list[dict[str, Any]]:
    """One event per node execution, with its start and its duration measured from the
    post-hook. Without a post-hook time (a node that raised, or an old worker), the duration is
    estimated as the time until the next node started on the same thread in the same call (a
    send always starts a new call); ``None`` for the last node of a call. ``offset`` (ns) is
    the worker's clock minus the initiator's (0 on one host)."""
    out: list[dict[str, Any]] = []
    last_on: dict[str, dict[str, Any]] = {}
    for item in raw:
        nid, thread, t_ns, shapes = item[:4]
        end_ns = item[4] if len(item) > 4 else None
        t_ns -= offset
        pidx = 0
        for i, (s, _e) in enumerate(windows):
            if t_ns >= s:
                pidx = i
        ev = {"pass": pidx, "worker": worker, "node": nid, "t_us": round((t_ns - t0) / 1000.0, 3),
              "dur_us": None if end_ns is None else round((end_ns - offset - t_ns) / 1000.0, 3),
              "thread": thread, "grad_shapes": shapes}
        prev = last_on.get(thread)
        if prev is not None and prev["dur_us"] is None and nid not in sends \
                and prev["pass"] == pidx:
            prev["dur_us"] = max(ev["t_us"] - prev["t_us"], 0.0)
        last_on[thread] = ev
        out.append(ev)
    return out


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
        send(conn, Recorded(trace=trace.to_json()))
        cmd = recv(conn)
        real: dict[str, Any] | None = None
        if isinstance(cmd, Backward) and cmd.run:
            real = run_real_backward(cid, trace.workers, me, passes, pass_roots, options,
                                     [n.id for n in trace.nodes if n.kind == "send"])
        grads = real.pop("_grads", {}) if real else {}
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
        named.extend(rec._expand(label, value))
    uniq: list[torch.Tensor] = []
    for rs in pass_roots:
        for r in rs:
            if not any(r is u for u in uniq):
                uniq.append(r)
    workers, pieces = rec.gather(cid, uniq, named, inspect_saved=True)
    passes = [BackwardPass(roots=rec.root_ids(cid, rs), retain_graph=p.retain_graph,
                           root_vars=list(p.roots))
              for p, rs in zip(scenario.passes, pass_roots, strict=True)]
    return rec.build_trace(workers, scenario.workers[0], cid, pieces, passes), passes
