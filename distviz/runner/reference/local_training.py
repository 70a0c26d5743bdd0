"""The single-process reference of a training run (torch side).

The same scenario, in one process: every RPC a local call on the destination worker's
namespace (``LocalRpc``), each worker with its own generators, and the training names in
local form. ``dist_autograd.backward(context_id, roots)`` computes the gradients of every leaf
the roots reach with ``torch.autograd.grad`` and keeps them in the context, as distributed
autograd does (``.grad`` stays untouched); ``get_gradients`` returns the running worker's part;
``DistributedOptimizer`` keeps one optimizer per owner, as PyTorch does, and steps it with the
context's gradients. Several trainers run one at a time, in the order the real run's went in:
each context opening, call to another worker and optimizer step of a trainer's main is a point
where the trainers take turns (``Baton``), in the real run's order of those points.

``run_training_reference`` returns, per context, the loss, the gradients by leaf name and the
optimizer steps, and the final parameters, with values (``ReferenceDone.result``).
"""

from __future__ import annotations

import functools
import itertools
import os
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from distviz import limits
from distviz.recorder.names import expand
from distviz.recorder.side_thread import in_threads
from distviz.recorder.walk import reachable
from distviz.runner.gradients import MAX_VALUES, summarize, tensor_values
from distviz.runner.protocol import ReferenceDone, ReferenceSpec, WorkerOptions, send
from distviz.runner.sandbox import modules
from distviz.runner.sandbox.base import Namespace
from distviz.runner.sandbox.namespace import build_namespace, state_names
from distviz.runner.sandbox.rpc_proxy import LocalRpc, LocalRRef, LocalWorld, worker_name
from distviz.scenario import Scenario

__all__ = ["Baton", "reference_main", "run_training_reference"]


@dataclass
class _LocalContext:
    trainer: str
    index: int
    grads: dict[int, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)
    loss: list[float] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)


class Baton:
    """Runs the trainers' threads one at a time: a thread gives the baton up at each point
    (a context opens, a call, an optimizer step), and the next thread is the one whose point
    comes next in the real run's order, ``(trainer, number)`` (otherwise: a trainer that has
    not started yet, then any waiting one, in trainer order)."""

    def __init__(self, trainers: Sequence[str], order: Sequence[tuple[str, int]],
                 world: LocalWorld) -> None:
        self.trainers = list(trainers)
        self.order = list(order)
        self.world = world
        self.cond = threading.Condition()
        self.turn = 0
        self.running: str | None = self.trainers[0] if self.trainers else None
        self.started: set[str] = set(self.trainers[:1])
        self.waiting: dict[str, int] = {}
        self.finished: set[str] = set()

    def _hand_over(self) -> None:
        nxt: str | None = None
        if self.turn < len(self.order):
            t, i = self.order[self.turn]
            if self.waiting.get(t) == i:
                nxt = t
                self.turn += 1
        if nxt is None:
            fresh = [t for t in self.trainers if t not in self.started]
            waiting = [t for t in self.trainers if t in self.waiting]
            nxt = fresh[0] if fresh else (waiting[0] if waiting else None)
        if nxt is not None:
            self.started.add(nxt)
            self.waiting.pop(nxt, None)
        self.running = nxt
        self.cond.notify_all()

    def _wait(self, trainer: str) -> None:
        while self.running != trainer:
            self.cond.wait()

    def begin(self, trainer: str) -> None:
        """A trainer's thread starts: wait for the baton."""
        with self.cond:
            self._wait(trainer)
        self.world.resume()

    def point(self, trainer: str, index: int) -> None:
        """A trainer reaches its ``index``-th point: pass the baton, wait for its turn."""
        self.world.suspend()
        with self.cond:
            self.waiting[trainer] = index
            self._hand_over()
            self._wait(trainer)
        self.world.resume()

    def end(self, trainer: str) -> None:
        """A trainer's main ended."""
        self.world.suspend()
        with self.cond:
            self.finished.add(trainer)
            self._hand_over()


class _Reference:
    """The local training names of every worker, and what the contexts did."""

    def __init__(self, scenario: Scenario, world: LocalWorld, local: LocalRpc) -> None:
        self.scenario = scenario
        self.world = world
        self.local = local
        self.baton: Baton | None = None
        self.contexts: dict[int, _LocalContext] = {}
        self.done: list[_LocalContext] = []
        self.counts: dict[str, int] = {}
        self.ids = itertools.count(1)
        self.owner: dict[int, str] = {}
        self.main_ns: dict[str, dict[str, Any]] = {}
        self.points: dict[str, list[str]] = {}

    def point(self, kind: str) -> None:
        """The running trainer reaches a point (``context``, ``rpc``, ``step``): its turn."""
        trainer = self.world.trainer
        seen = self.points.setdefault(trainer, [])
        seen.append(kind)
        if self.baton is not None:
            self.baton.point(trainer, len(seen))

    def names(self) -> dict[str, Any]:
        autograd = Namespace("dist_autograd", {
            "context": lambda: _LocalContextManager(self), "backward": self.backward,
            "get_gradients": self.get_gradients})

        def optimizer(cls: Any, params: Any, *args: Any, **kwargs: Any) -> Any:
            return _LocalOptimizer(self, cls, params, *args, **kwargs)

        def rref(value: Any, *args: Any) -> LocalRRef:
            return LocalRRef(value, self.world.current, self.local)

        def remote_module(device: str, cls: Any, args: Any = (), kwargs: Any = None) -> Any:
            return _LocalRemoteModule(self, device, cls, args, kwargs)
        return {"dist_autograd": autograd, "DistributedOptimizer": optimizer, "RRef": rref,
                "RemoteModule": remote_module}

    # -- naming -------------------------------------------------------------------------------
    def own_names(self, worker: str, made: bool = True) -> list[tuple[Any, str]]:
        """A worker's names for its tensors, in the recorder's order: state, modules, then
        (with ``made``) the leaves made by creation functions."""
        ns = self.world.namespaces[worker]
        state = [(label, value) for label, value in state_names(self.scenario, worker, ns)]
        out = [pair for label, value in state for pair in expand(label, value)]
        labels = modules.module_variables(worker, [(n.split(".", 1)[-1], v) for n, v in state],
                                          worker)
        for k, v in modules.module_variables(worker, list(self.main_ns.get(worker, {}).items()),
                                             worker).items():
            labels.setdefault(k, v)
        out.extend(modules.names(worker, labels))
        if made:
            out.extend(ns["_dv_made"])
        return out

    def leaf_names(self, trainer: str, variables: dict[str, Any]) -> dict[int, str]:
        """``{id(leaf): name}`` as the real run names leaves: a worker's own names for its
        tensors; the trainer's variables first for the trainer's."""
        out: dict[int, str] = {}
        owned: dict[int, str] = {}
        for w in self.scenario.workers:
            for t, label in self.own_names(w):
                owned.setdefault(id(t), w)
                if w != trainer:
                    out.setdefault(id(t), label)
        self.owner = owned
        for label, value in variables.items():
            if label.startswith("_"):
                continue
            for t, lab in expand(label, value):
                if owned.get(id(t), trainer) == trainer:
                    out.setdefault(id(t), lab)
        for t, label in self.own_names(trainer):
            out.setdefault(id(t), label)
        return out

    # -- dist_autograd ------------------------------------------------------------------------
    def backward(self, context_id: int, roots: Any, retain_graph: bool = False) -> None:
        ctx = self.contexts[int(context_id)]
        roots = list(roots) if isinstance(roots, (list, tuple)) else [roots]
        frame = sys._getframe(1)
        variables = dict(self.main_ns.get(ctx.trainer, {}))
        variables.update(frame.f_locals)
        leaves = _leaves(roots)
        grads = torch.autograd.grad(roots, leaves, retain_graph=retain_graph, allow_unused=True)
        names = self.leaf_names(ctx.trainer, variables)
        for leaf, g in zip(leaves, grads, strict=True):
            if g is None:
                continue
            old = ctx.grads.get(id(leaf))
            ctx.grads[id(leaf)] = (leaf, g if old is None else old[1] + g)
            if id(leaf) in names:
                ctx.names[id(leaf)] = names[id(leaf)]
        ctx.loss.extend(float(r.detach().double().sum()) for r in roots)

    def get_gradients(self, context_id: int) -> dict[torch.Tensor, torch.Tensor]:
        ctx = self.contexts[int(context_id)]
        here = self.world.current
        return {leaf: g for leaf, g in ctx.grads.values()
                if self.owner.get(id(leaf), ctx.trainer) == here}

    def enter(self, trainer: str) -> int:
        index = self.counts.get(trainer, 0) + 1
        self.counts[trainer] = index
        self.point("context")
        cid = next(self.ids)
        self.contexts[cid] = _LocalContext(trainer=trainer, index=index)
        return cid

    def exit(self, cid: int) -> None:
        self.done.append(self.contexts.pop(cid))

    # -- results ------------------------------------------------------------------------------
    def result(self) -> dict[str, Any]:
        contexts = []
        for ctx in self.done:
            budget = [MAX_VALUES]
            grads = {}
            for key, (_leaf, g) in ctx.grads.items():
                name = ctx.names.get(key)
                if name is not None:
                    grads[name] = dict(summarize(g), all=tensor_values(g, budget))
            contexts.append({"trainer": ctx.trainer, "index": ctx.index, "loss": ctx.loss,
                             "gradients": grads, "steps": ctx.steps})
        final: dict[str, Any] = {}
        budget = [MAX_VALUES]
        for w in self.scenario.workers:
            for t, label in self.own_names(w, made=False):
                if label in final or not isinstance(t, torch.Tensor) or not t.requires_grad \
                        or t.grad_fn is not None:
                    continue
                final[label] = dict(summarize(t.detach()), all=tensor_values(t, budget), worker=w)
        return {"outcome": "completed", "error": None, "contexts": contexts, "final": final,
                "points": self.points}


def _leaves(roots: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Every leaf that requires grad reachable from the roots' graphs (an explicit stack)."""
    nodes = reachable([r.grad_fn for r in roots], depth_first=True)
    return [v for fn in nodes if isinstance(v := getattr(fn, "variable", None), torch.Tensor)]


class _LocalContextManager:
    def __init__(self, ref: _Reference) -> None:
        self.ref = ref
        self.cid = -1

    def __enter__(self) -> int:
        trainer = self.ref.world.trainer
        self.cid = self.ref.enter(trainer)
        return self.cid

    def __exit__(self, *exc: Any) -> None:
        self.ref.exit(self.cid)


class _LocalOptimizer:
    """``DistributedOptimizer`` in the reference: one optimizer per owner over its parameters,
    stepped with the context's gradients (``.grad`` is set for the step only)."""

    def __init__(self, ref: _Reference, cls: Any, params: Any, *args: Any, **kwargs: Any) -> None:
        self.ref = ref
        self.name = getattr(cls, "__name__", "optimizer")
        groups: dict[str, list[torch.Tensor]] = {}
        for p in params:
            owner = p.owner_name() if isinstance(p, LocalRRef) else ref.world.current
            groups.setdefault(owner, []).append(p.local_value() if isinstance(p, LocalRRef)
                                                else p)
        self.groups = {w: (ps, cls(ps, *args, **kwargs)) for w, ps in groups.items()}

    def step(self, context_id: int) -> None:
        self.ref.point("step")
        ctx = self.ref.contexts[int(context_id)]
        labels: dict[int, str] = {}
        for w in self.groups:
            for t, label in self.ref.own_names(w):
                labels.setdefault(id(t), label)
        moved = []
        with torch.no_grad():
            for w, (params, opt) in self.groups.items():
                before = [p.detach().clone() for p in params]
                for p in params:
                    found = ctx.grads.get(id(p))
                    p.grad = found[1].detach().clone() if found is not None else None
                opt.step()
                for p, old in zip(params, before, strict=True):
                    p.grad = None
                    moved.append({"worker": w, "name": labels.get(id(p), f"{w}.parameter"),
                                  "norm": float((p.detach().double() - old.double()).norm())})
        ctx.steps.append({"optimizer": self.name, "updates": moved})


class _LocalRemoteModule:
    """``RemoteModule("ps/cpu", cls, args)`` in the reference: the module, made on its owner."""

    def __init__(self, ref: _Reference, device: str, cls: Any, args: Any, kwargs: Any) -> None:
        self.owner = worker_name(str(device).split("/", 1)[0])
        ns = ref.world.namespaces[self.owner]
        target = ref.local._translate(cls, ns)
        self.ref = ref
        self.module = ref.world.run(self.owner, target, *tuple(args or ()), **dict(kwargs or {}))

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        self._point()
        return self.ref.world.run(self.owner, self.module, *args, **kwargs)

    def _point(self) -> None:
        """A call to the owner from a trainer's main: a point, as in the real run
        (``TrainingSession.remote_module``)."""
        world = self.ref.world
        if world.stack == [world.trainer]:
            self.ref.point("rpc")

    __call__ = forward

    def forward_async(self, *args: Any, **kwargs: Any) -> Any:
        from distviz.runner.sandbox.rpc_proxy import LocalFuture
        return LocalFuture(self.forward(*args, **kwargs))

    def remote_parameters(self, recurse: bool = True) -> list[LocalRRef]:
        self._point()
        return [LocalRRef(p, self.owner, self.ref.local) for p in self.module.parameters(recurse)]

    def get_module_rref(self) -> LocalRRef:
        return LocalRRef(self.module, self.owner, self.ref.local)


def run_training_reference(scenario: Scenario, options: WorkerOptions,
                           order: Sequence[tuple[str, int]]) -> dict[str, Any]:
    """Run the training scenario in this process (see the module docstring); never raises:
    a failure comes back as ``{"outcome": "error", "error": ...}``."""
    world = LocalWorld()
    local = LocalRpc(world)
    ref = _Reference(scenario, world, local)
    local.clock = ref.point
    modules.use_scope("reference")
    try:
        with torch.enable_grad():
            for rank, w in enumerate(scenario.workers):
                world.namespaces[w] = world.run(w, build_namespace, scenario, w, rank, local,
                                                options, reference=True, extras=ref.names())
            _run_mains(scenario, world, ref, order)
        return ref.result()
    except Exception as exc:  # noqa: BLE001 - reported, never raised
        text = str(exc).strip()
        return {"outcome": "error", "error": text.splitlines()[0] if text
                else type(exc).__name__, "contexts": [], "final": {}}
    finally:
        modules.use_scope("run")


def _run_mains(scenario: Scenario, world: LocalWorld, ref: _Reference,
               order: Sequence[tuple[str, int]]) -> None:
    """Each trainer's main, one at a time (``Baton``) when there are several."""
    trainers = scenario.trainers
    errors: list[BaseException] = []

    def run(trainer: str) -> None:
        main_ns = dict(world.namespaces[trainer])
        ref.main_ns[trainer] = main_ns
        world.trainer = trainer
        world.run(trainer, exec, scenario.mains[trainer].compile(), main_ns)

    if len(trainers) == 1:
        run(trainers[0])
        return
    baton = Baton(trainers, order, world)
    ref.baton = baton

    def thread(trainer: str) -> None:
        baton.begin(trainer)
        try:
            run(trainer)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
            errors.append(exc)
        finally:
            baton.end(trainer)
    in_threads([functools.partial(thread, t) for t in trainers], None, "distviz-trainer")
    if errors:
        raise errors[0]


def reference_main(conn: Any, lifeline: Any, spec: ReferenceSpec) -> None:
    """Process target: run the reference and send ``ReferenceDone``; always ends the process."""
    from distviz.runner.procs import redirect_stderr, watch_lifeline
    redirect_stderr("reference")
    watch_lifeline(lifeline)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # the program's print output was shown once, by the real run
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
    try:
        import warnings
        warnings.filterwarnings("ignore", category=UserWarning)
        torch.set_num_threads(1)
        result = run_training_reference(spec.scenario, spec.options, spec.schedule)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        result = {"outcome": "error", "error": f"{type(exc).__name__}: {exc}", "contexts": [],
                  "final": {}}
    try:
        send(conn, ReferenceDone(result=result))
    finally:
        os._exit(limits.WorkerStatus.DONE)
