"""The Python API behind ``distviz.backward`` and ``distviz.record(..., observe=True)``
(torch side).

Both do in the program's own code what ``distviz trace`` does at each selected backward:
record the whole graph of the context on every worker, replay it, observe PyTorch's real
backward with hooks on every worker, collect ``get_gradients`` and compare. Inside a
``distviz trace`` run they use its settings and its summary; otherwise traces go where the
caller says, and a predicted hang raises ``HangPredicted`` instead of stopping the program.
"""

from __future__ import annotations

import functools
import os
import types
from pathlib import Path
from typing import Any, cast

import torch.distributed.autograd as dist_autograd

from distviz.frames import own_frames
from distviz.limits import TRACE_HANG_TIMEOUT
from distviz.recorder.contexts import BACKWARD
from distviz.trace import Trace
from distviz.tracing import callsites
from distviz.tracing.config import TraceConfig
from distviz.tracing.hooks import jit
from distviz.tracing.recording import observe
from distviz.tracing.shared import process
from distviz.tracing.shared.process import Process

_ARMED: dict[int, observe.Run] = {}


def _process(out_dir: str, hang_timeout: float) -> Process:
    proc = process.PROCESS
    if proc is None:    # not under distviz trace: this process's own settings, and call
        proc = process.start(TraceConfig(out_dir=out_dir, contexts="all",
                                         hang_timeout=hang_timeout))
        from distviz.tracing.hooks import patches, rref
        patches.install_callsites(proc)
        rref.install()
    return proc


def _guess_sites(context_id: int, frame: types.FrameType | None) -> None:
    """The first context of a process ran its forward before distviz wrapped the RPC
    functions: name its RPC results from the program's source, as ``distviz trace`` would."""
    if callsites.has_calls(context_id):
        return
    import torch.distributed.rpc as rpc
    infos = rpc._get_current_rpc_agent().get_worker_infos()
    callsites.guess_from_frames(context_id, frame, rpc.get_worker_info().name,
                                {int(i.id): i.name for i in infos})


def _names(names: Any) -> list[tuple[Any, str]]:
    """``names`` as ``distviz.record`` takes them (``{"w": w}`` or ``{w: "w"}``)."""
    from distviz.recorder.names import names_list

    return names_list(names)


def backward(context_id: int, roots: Any, retain_graph: bool = False, *,
             names: Any = None, path: str | os.PathLike[str] | None = None,
             out_dir: str = "distviz-traces", hang_timeout: float = TRACE_HANG_TIMEOUT,
             frame: types.FrameType | None = None) -> Trace:
    """See ``distviz.backward``."""
    from distviz.tracing.hooks import rref

    if rref.is_rref(roots):
        options = {"names": names, "path": path, "out_dir": out_dir,
                   "hang_timeout": hang_timeout}
        if roots.is_owner():
            value = roots.local_value()
            return backward(context_id, [value], retain_graph,
                            frame=rref.with_variable(frame, roots, value), **options)
        site = rref.CallerSite(own_frames(frame), rref.rref_variable(frame, roots))
        return cast(Trace, rref.pytorch_rpc_sync()(
            roots.owner(), backward_on_owner, args=(roots, context_id, retain_graph, site,
                                                     options)))
    proc = _process(out_dir, hang_timeout)
    index, _ = proc.number(context_id)
    _guess_sites(context_id, frame)
    run = observe.prepare(proc.config, context_id, roots, retain_graph, index, frame,
                          names=_names(names), path=Path(path) if path is not None else None)
    if run is None:
        BACKWARD(context_id, roots, retain_graph=retain_graph)
        raise RuntimeError(f"distviz could not record context id {context_id}, but PyTorch's "
                           "backward ran")
    return observe.run_backward(run, roots, retain_graph)


def backward_on_owner(handle: Any, context_id: int, retain_graph: bool, site: Any,
                      options: dict[str, Any]) -> Trace:
    """``distviz.backward(context_id, rref)`` from another worker, run on the RRef's owner:
    its value is the root, the caller's line (``site``, a ``hooks.rref.CallerSite``) the call
    site; the owner writes the trace and returns it."""
    from distviz.tracing.hooks import rref

    value = handle.local_value()
    return backward(context_id, [value], retain_graph, frame=rref.stand_in(site, value),
                    **options)


def record(context_id: int, roots: Any, names: Any = None, *, path: str | os.PathLike[str] | None = None,
           hang_timeout: float = TRACE_HANG_TIMEOUT, frame: types.FrameType | None = None) -> Trace:
    """See ``distviz.record`` with ``observe=True``: record now, observe the next
    ``dist_autograd.backward`` of this context (which fills ``trace.real`` in place)."""
    proc = _process("distviz-traces", hang_timeout)
    index, _ = proc.number(context_id)
    _guess_sites(context_id, frame)
    run = observe.prepare(proc.config, context_id, roots, False, index, frame,
                          names=_names(names), path=Path(path) if path is not None else None)
    if run is None:
        raise RuntimeError(f"distviz could not record context id {context_id}; is the program "
                           "inside `with dist_autograd.context() as context_id:`?")
    if path is None:
        run.path = None
    _ARMED[context_id] = run
    _arm()
    return run.trace


def _arm() -> None:
    """Route ``dist_autograd.backward`` through ``_observed`` (once per process)."""
    current = dist_autograd.backward
    if getattr(current, "_distviz_armed", False):
        return

    @functools.wraps(current)
    def armed(context_id: int, roots: Any, retain_graph: bool = False) -> Any:
        run = _ARMED.pop(int(context_id), None)
        if run is None:
            return current(context_id, roots, retain_graph=retain_graph)
        observe.run_backward(run, roots, retain_graph)
        return None
    armed._distviz_armed = True    # type: ignore[attr-defined]
    jit.as_builtin(armed, current)     # TorchScript compiles it to PyTorch's op
    dist_autograd.backward = armed
