"""Training programs on real workers: contexts opened by the program itself (torch side).

In the training form a scenario's ``main`` opens its own contexts (``with
dist_autograd.context() as context_id:``), calls ``dist_autograd.backward(context_id,
[loss])`` and steps a ``DistributedOptimizer``, as PyTorch's tutorials do. The names a program
sees for that (``dist_autograd``, ``DistributedOptimizer``, ``RRef``, ``RemoteModule``) come
from this worker's ``TrainingSession``:

* every context the worker opens is numbered (from 1, per worker); the selected ones
  (``--contexts``) are recorded at their first ``dist_autograd.backward``: the graph on every
  worker, named after the caller's variables (``loss``) and the modules' parameters
  (``ps.EmbeddingTable#0.encoder.weight``); the replay then predicts the pass (a predicted hang
  stops the run unless ``--confirm-hang``), hooks go on every recorded node, and the real
  backward runs under the hang time-out;
* ``DistributedOptimizer.step(context_id)`` also measures, on each owner, how far each
  parameter moved (the norm of the change);
* when the context closes, the observed events and what ``get_gradients`` holds on every
  worker are collected, and the context goes to the parent (``ContextDone``).

Contexts that are not selected run exactly as without distviz.
"""

from __future__ import annotations

import itertools
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed.autograd as real_autograd
import torch.distributed.rpc as rpc

from distviz import limits
from distviz.recorder import hooks
from distviz.recorder.contexts import forget
from distviz.recorder.gather import gather
from distviz.recorder.merge import build_trace
from distviz.recorder.names import add_namer, expand, named_here
from distviz.recorder.piece import root_ids, root_nrs
from distviz.runner.gradients import MAX_VALUES, summarize, tensor_values
from distviz.runner.observe_real import Passes, on_all, run_pass, side
from distviz.runner.observe_real import collect as collect_real
from distviz.runner.protocol import ContextDone, WorkerOptions
from distviz.runner.sandbox import modules
from distviz.runner.sandbox.base import Namespace
from distviz.runner.sandbox.rpc_proxy import unwrap_rrefs
from distviz.runner.worker.initiator import check_root
from distviz.selection import ContextSelection
from distviz.trace import BackwardPass, NodeKind, Trace
from distviz.trace.sections import Real
from distviz.words import first_line

__all__ = ["BackwardHung", "TrainingHangPredicted", "TrainingSession", "final_parameters"]



class TrainingHangPredicted(Exception):
    """The replay predicts that this backward hangs; the real one was not run."""

    phase = "backward"


class BackwardHung(Exception):
    """The real backward did not return within the hang time-out."""

    phase = "backward"


@dataclass
class ContextRun:
    """One context a worker opened: its number, whether it is recorded, and what happened."""

    cid: int
    index: int
    selected: bool
    enter_ns: int
    exit_ns: int | None = None
    trace: Trace | None = None
    roots: list[list[torch.Tensor]] = field(default_factory=list)
    passes: Passes = field(default_factory=Passes)   # the real passes run so far
    skipped: str | None = None     # why the real backward did not run (a predicted hang)
    losses: list[float] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)
    sent: bool = False


def _labels() -> dict[int, str]:
    """``{id(tensor): name}`` of this worker's named leaves: worker state, module parameters,
    run-time leaves (the recorder's order without a program's variables)."""
    out: dict[int, str] = {}
    for tensor, label in named_here():
        out.setdefault(id(tensor), label)
    return out


def snapshot(token: str, rrefs: list[Any]) -> int:
    """On an owner, before an optimizer step: keep a copy of the parameters behind ``rrefs``.

    Measured steps on one owner take turns (``_STEP_LOCK``, held until ``updates``), so a
    change is one trainer's step, not also another's made at the same time."""
    _LOCKED[token] = _STEP_LOCK.acquire(timeout=limits.COLLECT_TIMEOUT)
    _SNAPSHOTS[token] = [r.local_value().detach().clone() for r in rrefs]
    return len(rrefs)


def updates(token: str, rrefs: list[Any]) -> list[list[Any]]:
    """On an owner, after the step: ``[name, norm of the change]`` per parameter."""
    try:
        return _updates(token, rrefs)
    finally:
        if _LOCKED.pop(token, False):
            _STEP_LOCK.release()


def _updates(token: str, rrefs: list[Any]) -> list[list[Any]]:
    before = _SNAPSHOTS.pop(token, [])
    labels = _labels()
    out: list[list[Any]] = []
    for r, old in zip(rrefs, before, strict=False):
        p = r.local_value()
        name = labels.get(id(p), f"{rpc.get_worker_info().name}.parameter")
        out.append([name, float((p.detach().double() - old.double()).norm())])
    return out


_SNAPSHOTS: dict[str, list[torch.Tensor]] = {}
_STEP_LOCK = threading.Lock()
_LOCKED: dict[str, bool] = {}
_TOKENS = itertools.count()


def final_parameters(worker: str) -> dict[str, Any]:
    """This worker's named leaves and module parameters now: ``{name: {summary, values}}``."""
    budget = [MAX_VALUES]
    out: dict[str, Any] = {}
    for tensor, label in named_here(fallback=False):
        if label in out or not isinstance(tensor, torch.Tensor) or not tensor.requires_grad \
                or tensor.grad_fn is not None:
            continue
        entry = summarize(tensor.detach())
        entry["all"] = tensor_values(tensor, budget)
        entry["worker"] = worker
        out[label] = entry
    return out


def remote_module(remote_device: str, module_cls: Any, args: Any = None,
                  kwargs: Any = None) -> Any:
    """``RemoteModule(...)``: PyTorch's (``torch.distributed.nn`` is imported on first use: it
    takes seconds to import, which every worker would pay at start-up)."""
    from torch.distributed.nn import RemoteModule
    return RemoteModule(remote_device, module_cls, args=tuple(args or ()), kwargs=kwargs)


def make_rref(value: Any, type_hint: Any = None) -> Any:
    """``RRef(x)``: PyTorch's ``rpc.RRef``, called from a frame with the full builtins (its
    C++ constructor imports modules through the calling frame's ``__import__``, which a
    scenario's frame does not have)."""
    return rpc.RRef(value) if type_hint is None else rpc.RRef(value, type_hint)


class _Context:
    """``with dist_autograd.context() as context_id:`` on a worker with a session."""

    def __init__(self, session: TrainingSession) -> None:
        self.session = session
        self.real = real_autograd.context()
        self.cid = -1

    def __enter__(self) -> int:
        self.cid = int(self.real.__enter__())
        self.session.begin(self.cid)
        return self.cid

    def __exit__(self, *exc: Any) -> None:
        try:
            self.session.end(self.cid)
        finally:
            self.real.__exit__(*exc)


class OptimizerProxy:
    """``DistributedOptimizer(optim.SGD, param_rrefs, lr=...)``: PyTorch's, with each step in a
    recorded context measured on the parameters' owners."""

    def __init__(self, session: TrainingSession, optimizer_class: Any, params: Any,
                 *args: Any, **kwargs: Any) -> None:
        self._session = session
        self._rrefs = [unwrap_rrefs(p) for p in params]
        self._name = getattr(optimizer_class, "__name__", "optimizer")
        # imported here: torch.distributed.optim takes seconds to import, which every worker
        # would pay at start-up
        from torch.distributed.optim import DistributedOptimizer
        self._real = DistributedOptimizer(optimizer_class, self._rrefs, *args, **kwargs)

    def step(self, context_id: int) -> None:
        done = self._session.point("step")
        try:
            self._step(context_id)
        finally:
            done()

    def _step(self, context_id: int) -> None:
        run = self._session.runs.get(int(context_id))
        if run is None or not run.selected or run.trace is None:
            self._real.step(context_id)
            return
        owners: dict[str, list[Any]] = {}
        for r in self._rrefs:
            owners.setdefault(str(r.owner_name()), []).append(r)
        token = f"{self._session.worker}/{next(_TOKENS)}"
        me = self._session.worker
        for w, rs in sorted(owners.items()):  # one order everywhere: no deadlock
            _call_on(w, me, snapshot, token, rs)
        self._real.step(context_id)
        moved: list[dict[str, Any]] = []
        for w, rs in owners.items():
            got = _call_on(w, me, updates, token, rs)
            moved.extend({"worker": w, "name": n, "norm": norm} for n, norm in got)
        run.steps.append({"optimizer": self._name, "updates": moved})


def _call_on(worker: str, me: str, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` on ``worker``: here, or over RPC from a helper thread (outside the
    program's context, so it adds nothing to its graph)."""
    if worker == me:
        return fn(*args)
    return side(lambda: rpc.rpc_sync(worker, fn, args=args, timeout=limits.COLLECT_TIMEOUT))


class TrainingSession:
    """One worker's side of the training form (see the module docstring).

    ``send(message)`` reaches the parent; ``main_ns`` (set when the worker runs a ``main``)
    names module variables of the main's top level (``trainer.model``).
    """

    def __init__(self, worker: str, options: WorkerOptions,
                 send: Callable[[Any], None]) -> None:
        self.worker = worker
        self.options = options
        self.send = send
        self.selection = ContextSelection.parse(options.contexts)
        self.runs: dict[int, ContextRun] = {}
        self.done: list[ContextRun] = []
        self.count = 0
        self.main_ns: dict[str, Any] = {}
        self.lock = threading.Lock()
        self.failed: str | None = None  # the first backward that raised, in words
        self.points: list[list[Any]] = []  # the main's order: see ``point``

    def names(self) -> dict[str, Any]:
        """The names a program sees: ``dist_autograd``, ``DistributedOptimizer``, ``RRef``,
        ``RemoteModule``."""
        autograd = Namespace("dist_autograd", {
            "context": lambda: _Context(self), "backward": self.backward,
            "get_gradients": real_autograd.get_gradients})

        def optimizer(cls: Any, params: Any, *args: Any, **kwargs: Any) -> OptimizerProxy:
            return OptimizerProxy(self, cls, params, *args, **kwargs)
        return {"dist_autograd": autograd, "DistributedOptimizer": optimizer,
                "RRef": make_rref, "RemoteModule": self.remote_module}

    def remote_module(self, remote_device: str, module_cls: Any, args: Any = None,
                      kwargs: Any = None) -> Any:
        """``RemoteModule(...)`` whose calls to its owner are points of the main's order
        (``point``): ``forward`` (and calling it), ``forward_async`` (open: its end is not
        known), ``remote_parameters``."""
        module = remote_module(remote_device, module_cls, args, kwargs)
        for name in ("forward", "forward_async", "remote_parameters"):
            setattr(module, name, self._timed(getattr(module, name), name != "forward_async"))
        return module

    def _timed(self, fn: Callable[..., Any], ends: bool) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            done = self.point("rpc")
            try:
                return fn(*args, **kwargs)
            finally:
                if ends:
                    done()
        return call

    # -- contexts ---------------------------------------------------------------------------

    def point(self, kind: str) -> Callable[[], None]:
        """Note a step of the main's order that the reference follows: a context opens
        (``context``), a call to another worker (``rpc``), an optimizer step (``step``), as
        ``[kind, start ns, end ns]`` (end ``-1`` while it is open). Returns what ends it."""
        if not self.main_ns:
            return _nothing
        entry: list[Any] = [kind, time.monotonic_ns(), -1]
        self.points.append(entry)

        def done() -> None:
            entry[2] = time.monotonic_ns()
        return done

    def begin(self, cid: int) -> None:
        self.point("context")()
        with self.lock:
            self.count += 1
            index = self.count
        self.runs[cid] = ContextRun(cid=cid, index=index, selected=self.selection.selects(index),
                                    enter_ns=time.monotonic_ns())

    def end(self, cid: int) -> None:
        run = self.runs.pop(cid, None)
        if run is None:
            return
        run.exit_ns = time.monotonic_ns()
        self.done.append(run)
        if run.trace is not None:
            self.finish(run)

    def windows(self) -> list[list[int]]:
        """``[context index, enter ns, exit ns]`` of every context this worker closed."""
        return [[r.index, r.enter_ns, r.exit_ns or r.enter_ns] for r in self.done]

    # -- backward ---------------------------------------------------------------------------

    def backward(self, context_id: int, roots: Any, retain_graph: bool = False) -> None:
        run = self.runs.get(int(context_id))
        if run is None or not run.selected:
            try:
                real_autograd.backward(context_id, roots, retain_graph=retain_graph)
            except Exception as exc:
                self.failed = self.failed or f"{self.worker}: the backward raised: " \
                                             f"{first_line(exc)}"
                raise
            return
        frame = sys._getframe(1)
        line = frame.f_lineno
        variables = dict(self.main_ns)
        variables.update(frame.f_locals)
        roots = list(roots) if isinstance(roots, (list, tuple)) else [roots]
        names = [_name_of(r, variables) for r in roots]
        checked = [check_root(n or f"roots[{i}]", r, line) for i, (n, r) in
                   enumerate(zip(names, roots, strict=True))]
        self.record(run, checked, names, retain_graph, variables)
        run.losses.extend(float(r.detach().double().sum()) for r in checked)
        self.predict(run)
        self.run_pass(run, checked, retain_graph)

    def record(self, run: ContextRun, roots: list[torch.Tensor], names: list[str | None],
               retain_graph: bool, variables: dict[str, Any]) -> None:
        """Record the graph at the context's first backward; later passes add a pass."""
        cid = run.cid
        if run.trace is None:
            named: list[tuple[Any, str]] = []
            for label, value in variables.items():
                if not label.startswith("_"):
                    named.extend(expand(label, value))
            workers, pieces = gather(cid, roots, named, inspect_saved=True)
            run.trace = build_trace(workers, self.worker, cid, pieces, [])
            if self.options.observe:
                on_all(_context_workers(run.trace), self.worker, hooks.install_hooks, cid,
                        None, True)
        ids = root_ids(cid, roots)
        run.trace.passes.append(BackwardPass(roots=ids, retain_graph=retain_graph,
                                             root_vars=[n for n in names if n],
                                             root_nrs=root_nrs(roots)))
        run.roots.append(roots)

    def predict(self, run: ContextRun) -> None:
        """Replay the recorded passes; a predicted hang stops here unless ``--confirm-hang``."""
        from distviz.outcome import hang_not_run
        from distviz.replay import replay
        assert run.trace is not None
        if self.options.confirm_hang:
            return      # the real backward runs whatever the replay says: no need to replay
        run.skipped = hang_not_run(replay(run.trace).outcome, self.options.confirm_hang)
        if run.skipped is not None:
            self.finish(run)
            raise TrainingHangPredicted(f"context {run.index} of {self.worker}: the replay predicts "
                                "that this backward hangs")

    def run_pass(self, run: ContextRun, roots: list[torch.Tensor], retain_graph: bool) -> None:
        """The real ``dist_autograd.backward`` under the hang time-out
        (``observe_real.run_pass``)."""
        ran = run.passes
        error = run_pass(run.cid, roots, retain_graph, self.options.hang_timeout, ran)
        if ran.outcome == "hang":
            self.finish(run)
            raise BackwardHung(f"context {run.index} of {self.worker}: {ran.error}")
        if error is not None:
            self.failed = f"context {run.index} of {self.worker}: the backward raised: {ran.error}"
            self.finish(run)
            raise error

    # -- the end of a recorded context --------------------------------------------------------

    def finish(self, run: ContextRun) -> None:
        """Collect the observed events and gradients, forget the context on every worker and
        send it to the parent (once)."""
        trace = run.trace
        if trace is None or run.sent:
            return
        run.sent = True
        workers = _context_workers(trace)
        values: dict[str, Any] = {}
        per_worker: dict[str, list[dict[str, Any]]] = {}
        if run.skipped is None:
            real, values, per_worker = self.collect(run, workers)
            trace.real = Real.from_json(real)
        else:
            trace.real = Real.skipped(run.skipped)
        on_all(workers, self.worker, forget, run.cid, timeout=limits.COLLECT_TIMEOUT)
        info = {"trainer": self.worker, "index": run.index, "context_id": run.cid,
                "loss": run.losses, "gradients": per_worker, "steps": run.steps,
                "enter_ns": run.enter_ns, "exit_ns": run.exit_ns or time.monotonic_ns()}
        self.send(ContextDone(worker=self.worker, index=run.index, trace=trace.to_json(),
                              info=info, values=values))

    def collect(self, run: ContextRun, workers: list[str]
                ) -> tuple[dict[str, Any], dict[str, Any], dict[str, list[dict[str, Any]]]]:
        """The context's ``real`` section, the gradient values by leaf id (for the reference)
        and what ``get_gradients`` holds on each worker, by parameter name."""
        assert run.trace is not None
        observed = collect_real(run.cid, workers, self.worker, run.passes,
                                self.options.hang_timeout,
                                {n.id for n in run.trace.nodes if n.kind == NodeKind.SEND})
        observed.measured = self.options.observe
        observed.injected = dict(self.options.inject) or None
        real = observed.to_json()
        grads = observed.gradients
        real["t0_ns"] = run.passes.t0
        var_of = {n.id: n.var for n in run.trace.nodes if n.kind == NodeKind.ACCUMULATE_GRAD}
        worker_of = {n.id: n.worker for n in run.trace.nodes}
        values: dict[str, Any] = {}
        per_worker: dict[str, list[dict[str, Any]]] = {}
        budget = [MAX_VALUES]
        for nid, g in sorted(grads.items()):
            name = var_of.get(nid) or nid
            per_worker.setdefault(worker_of.get(nid, "?"), []).append(
                dict(real["gradients"][nid], name=name))
            values[nid] = tensor_values(g, budget)
        return real, values, per_worker


def _nothing() -> None:
    return None


def _context_workers(trace: Trace) -> list[str]:
    """The workers that hold nodes of the recorded context, in rank order."""
    present = {n.worker for n in trace.nodes} | {trace.initiator}
    return [w for w in trace.workers if w in present]


def _name_of(value: Any, variables: dict[str, Any]) -> str | None:
    """The first variable holding ``value`` (a root's name, ``loss``)."""
    for label, v in variables.items():
        if v is value and not label.startswith("_"):
            return label
    return None


def module_labels(worker: str, variables: list[tuple[str, Any]]) -> dict[int, str]:
    """Labels for modules held by a worker's variables (``ps.model``)."""
    return modules.module_variables(worker, variables, worker)


def install_namers(worker: str, state: list[tuple[str, Any]],
                   main_ns: Callable[[], dict[str, Any]]) -> None:
    """Name this worker's module parameters in recordings: by the variable that holds the
    module (worker state, then the main's top level), else by class (``modules.names``)."""
    def namer() -> list[tuple[Any, str]]:
        labels = module_labels(worker, [(n.split(".", 1)[-1], v) for n, v in state])
        for k, v in module_labels(worker, list(main_ns().items())).items():
            labels.setdefault(k, v)
        return modules.names(worker, labels)
    add_namer(namer)
