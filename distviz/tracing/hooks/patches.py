"""The torch-side patches of a traced process (applied right after the program imports torch).

* ``--interop-threads N``: ``torch.set_num_interop_threads(N)`` before any parallel work or
  RPC starts; the program's own later call to it is then ignored (PyTorch would raise).
* PyTorch's global module hooks, for leaf names (``distviz.tracing.shared.naming``).
* ``rpc.rpc_sync`` / ``rpc_async`` / ``remote`` and ``RRef.to_here`` record their call sites
  inside dist autograd contexts (``distviz.tracing.callsites``). The RRef helpers
  (``rref.rpc_sync().forward(x)``) reach the same functions: PyTorch's C++ RPC handler looks them
  up in ``torch.distributed.rpc.api`` when RPC starts, after this patch.
* ``rpc.init_rpc`` notes this worker's name and rank, and logs a failure (a port already in
  use) for ``distviz trace``'s summary.
* ``rpc.shutdown`` first waits for the RPC rounds distviz's helper thread still has to send
  (``fanout.settle``: the node references of the last context, dropped after it ends), and
  hands the process's backward statistics to the session (``watch.hand_over``).
* every ``dist_autograd.backward`` not recorded in full is watched (``distviz.tracing.watch.watcher``);
  the RPCs of every context then note their call sites, since any context may be recorded.
* ``dist_autograd.backward`` becomes ``distviz.tracing.hooks.dispatch.traced_backward``, which
  TorchScript compiles to PyTorch's own op (``distviz.tracing.hooks.jit``), and leaving
  ``with dist_autograd.context()`` tells ``dispatch.context_ended`` (a recorded context's node
  references are kept on its workers for later passes until then), and logs a backward the
  context ran from TorchScript (not recorded: it never reaches Python); a call of a scripted
  function that runs one is watched with its deadline (``distviz.tracing.hooks.scripted``).
* ``RRef.backward(context_id)`` goes the way ``dist_autograd.backward`` goes, on the RRef's
  owner (``distviz.tracing.hooks.rref``; from another worker through an RPC of distviz's own).
* ``torch.autograd``'s ``_engine_run_backward`` (under ``loss.backward()``,
  ``torch.autograd.backward`` and ``torch.autograd.grad``) explains a local backward inside a
  dist autograd context, and names the parameters whose ``.grad`` a local backward nested in a
  distributed one wrote (``distviz.tracing.hooks.local_backward``).
* ``DistributedOptimizer.step``, once the program imports ``torch.distributed.optim``: the
  parameters that got no gradient in any backward of the run are named after ``rpc.shutdown``
  (``distviz.tracing.hooks.optimizer``).
* Where ``--contexts`` may record a context: the cuts of a parameter's path to the loss
  (``distviz.tracing.hooks.cut_watch``, not imported under ``--contexts none``): a watch of the torch
  functions the program calls in a recorded context, entered with the context and left when
  its backward starts or the program leaves it.
* ``torch.optim``'s optimizers, once the process meets a dist autograd context (it enters one,
  or an RPC function runs in one: ``rpc.internal._run_function``): a local optimizer's step
  over parameters whose gradients a distributed backward left in the context is named with
  its line (``distviz.tracing.hooks.applied``).
* For ``distviz snapshot`` (``distviz.tracing.snapshot.listener``): entering and leaving a
  context are noted, and ``rpc.init_rpc`` starts the listener (the backwards in flight are
  the table ``traced_backward`` and the watch keep, ``distviz.tracing.shared.inflight``).

Each patched function keeps the original as ``__wrapped__``.
"""

from __future__ import annotations

import functools
import os
from types import ModuleType
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
import torch.distributed.rpc.api as rpc_api

from distviz.recorder.contexts import BACKWARD
from distviz.tracing import callsites
from distviz.tracing.config import TraceConfig
from distviz.tracing.hooks import applied, dispatch, jit, local_backward, optimizer, rref, scripted
from distviz.tracing.shared import fanout, journal, live, naming, process, writer
from distviz.tracing.shared.process import Process
from distviz.tracing.snapshot import listener as snapshot_listener
from distviz.tracing.watch import hook as watch_hook
from distviz.tracing.watch import watcher as watch

if TYPE_CHECKING:  # pragma: no cover - the snapshot's modules load at the first snapshot
    from distviz.tracing.snapshot.client import ProcessSnapshot

_INSTALLED: list[bool] = []
_CUTS: list[ModuleType] = []    # ``distviz.tracing.hooks.cut_watch``, where a context may be recorded


def _interop(n: int) -> None:
    original = torch.set_num_interop_threads
    try:
        original(n)
    except RuntimeError as exc:  # parallel work already started (the program forked late)
        print(f"distviz: --interop-threads {n} not applied in process {os.getpid()}: "
              f"{exc}", flush=True)
        return

    @functools.wraps(original)
    def set_num_interop_threads(num: int) -> None:
        return None     # distviz trace --interop-threads already set it for this process
    setattr(torch, "set_num_interop_threads", set_num_interop_threads)  # noqa: B010


def _init_rpc(original: Any, proc: Process) -> Any:
    @functools.wraps(original)
    def init_rpc(name: str, *args: Any, **kwargs: Any) -> Any:
        try:
            result = original(name, *args, **kwargs)
        except Exception as exc:
            journal.append(proc.config.session_dir, journal.Event(
                kind=journal.EventKind.RPC_FAILED, pid=os.getpid(), worker=str(name),
                message=" ".join(str(exc).split())[:400] or type(exc).__name__))
            raise
        try:
            info = rpc.get_worker_info()
        except RuntimeError:   # init_rpc returned, yet no agent runs (a backend of the
            return result      # program's own that starts none, a mocked start): nothing to name
        here = process.PROCESS or proc     # a forked child has state of its own (_after_fork)
        here.worker, here.rank = info.name, int(info.id)
        try:
            snapshot_listener.start(here.config.session_dir, here.worker, _take_snapshot)
        except Exception as exc:  # noqa: BLE001 - never break the program for a snapshot
            live.say(f"no snapshot listener in process {os.getpid()}: {exc}")
        return result
    return init_rpc


def _take_snapshot(folder: str) -> ProcessSnapshot:
    """``snapshot_take.take``, imported at the first snapshot (it loads the replay)."""
    from distviz.tracing.snapshot import take as snapshot_take

    return snapshot_take.take(folder)


def _shutdown(original: Any) -> Any:
    @functools.wraps(original)
    def shutdown(*args: Any, **kwargs: Any) -> Any:
        for cuts in _CUTS:
            cuts.flush()
        writer.settle()
        fanout.settle()
        watch.hand_over()
        result = original(*args, **kwargs)
        optimizer.report()      # every optimizer step of the session has been served
        applied.report()
        return result
    return shutdown


def _context_exit(original: Any) -> Any:
    @functools.wraps(original)
    def __exit__(self: Any, *exc: Any) -> Any:
        ctx = getattr(self, "autograd_context", None)
        if ctx is not None:
            cid = int(ctx._context_id())
            snapshot_listener.left(cid)
            proc = process.PROCESS
            if proc is not None and jit.scripted_backward(cid, cid in proc.index):
                journal.append(proc.config.session_dir, journal.Event(
                    kind=journal.SCRIPTED, pid=os.getpid(), worker=proc.worker))
            for cuts in _CUTS:
                cuts.left(cid)
            dispatch.context_ended(cid)
            applied.leaving(cid)
        return original(self, *exc)
    return __exit__


def _context_enter(original: Any) -> Any:
    @functools.wraps(original)
    def __enter__(self: Any) -> Any:
        context_id = original(self)
        snapshot_listener.entered(int(context_id))
        for cuts in _CUTS:
            cuts.entered(int(context_id))
        applied.seen(int(context_id))
        return context_id
    return __enter__


def _after_fork() -> None:
    """A forked child counts its own contexts and keeps no calls of its parent."""
    if process.PROCESS is not None:
        process.start(process.PROCESS.config)
        if watch_hook.WATCH is not None:
            watch.start(process.PROCESS.config)
        callsites.reset()


def install_callsites(proc: Process) -> None:
    """Wrap the RPC functions and ``RRef.to_here`` to record call sites (once per process)."""
    if getattr(rpc_api.rpc_sync, "_distviz_callsites", False):
        return
    gate = proc.may_record if watch_hook.WATCH is None else None    # None: every context
    for api in ("rpc_sync", "rpc_async", "remote"):
        wrapped = callsites.wrap_call(api, getattr(rpc_api, api), gate)
        wrapped._distviz_callsites = True    # type: ignore[attr-defined]
        setattr(rpc_api, api, wrapped)
        setattr(rpc, api, wrapped)
    try:
        from torch.distributed.rpc import rref_proxy
        rref_proxy.rpc_async = rpc_api.rpc_async   # its "is rpc_async" test must still hold
    except ImportError:  # pragma: no cover - older torch
        pass
    setattr(rpc.PyRRef, "to_here",  # noqa: B010 - a method of a C++ class
            callsites.wrap_to_here(rpc.PyRRef.to_here, gate))


def install(config: TraceConfig) -> None:
    """Apply every patch once in this process; see the module docstring."""
    if _INSTALLED:
        return
    _INSTALLED.append(True)
    proc = process.start(config)
    watch.start(config)     # every backward not recorded in full is watched
    if config.interop_threads is not None:
        _interop(config.interop_threads)
    naming.install()
    install_callsites(proc)
    rref.install()
    rpc.init_rpc = _init_rpc(rpc.init_rpc, proc)
    rpc.shutdown = rpc_api.shutdown = _shutdown(rpc_api.shutdown)
    traced = functools.wraps(BACKWARD)(dispatch.traced_backward)
    traced.__wrapped__ = BACKWARD
    dist_autograd.backward = traced
    jit.as_builtin(traced, BACKWARD)
    jit.watch_compiles()
    scripted.install()
    local_backward.install()
    optimizer.arm()
    applied.install()
    if config.spec.kind != "none":
        from distviz.tracing.hooks import cut_rpc, cut_watch
        cut_watch.install()
        cut_rpc.install()
        _CUTS.append(cut_watch)
    dist_autograd.context.__enter__ = _context_enter(  # type: ignore[method-assign]
        dist_autograd.context.__enter__)
    dist_autograd.context.__exit__ = _context_exit(  # type: ignore[method-assign]
        dist_autograd.context.__exit__)
    os.register_at_fork(after_in_child=_after_fork)
