"""Where each ``dist_autograd.backward`` of a traced process goes (torch side, light).

``traced_backward`` replaces ``torch.distributed.autograd.backward`` in a traced process
(``patches.install``; TorchScript compiles it to PyTorch's own op, ``distviz.tracing.hooks.jit``).
Each call goes one of four ways:

* a context ``--contexts`` selects (counted per initiator, in the order contexts reach the
  backward), with a ``--max-contexts`` slot left: recorded in full
  (``observe.record_and_observe``), and its later passes too (``observe.record_again``);
* any other context: watched (``distviz.tracing.watch.watcher``, through ``watch_hook``: a deadline,
  no recording unless it passes), or straight to PyTorch's backward where nothing watches;
* a call PyTorch rejects (wrong arguments, a context that does not exist: ``observe_args``),
  or one made while ``torch.jit.trace`` traces (distviz's own steps would join the traced
  graph): to PyTorch exactly as it was made, and the summary notes it.

The recording machinery (``distviz.tracing.recording.observe`` and what it loads: the trace model, the
recorder, the observer, the replay) is imported at the first context recorded in full, so a
process whose backwards are all watched (``--contexts none``, or every process but the
initiator's) does not pay for loading it.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
import types
from typing import Any

import torch

from distviz.recorder.contexts import BACKWARD, context_here
from distviz.tracing import callsites
from distviz.tracing.hooks import observe_args
from distviz.tracing.shared import journal, process
from distviz.tracing.shared.inflight import InFlight
from distviz.tracing.shared.process import Process
from distviz.tracing.watch import hook as watch_hook

_is_tracing = torch._C._is_tracing    # ``torch.jit.is_tracing`` from Python
#: Called with ``(args, kwargs)`` as each call starts, when set (``distviz.tracing.hooks.cut_watch``).
STARTS: list[Any] = []


def traced_backward(*args: Any, **kwargs: Any) -> None:
    """``dist_autograd.backward`` as a traced program sees it; see the module docstring."""
    return backward_at(sys._getframe(1), args, kwargs)


def backward_at(frame: types.FrameType | None, args: tuple[Any, ...],
                kwargs: dict[str, Any], entry: str = observe_args.DIST_BACKWARD) -> None:
    """``traced_backward(*args, **kwargs)`` called from ``frame`` (the program's line, whose
    variables name the roots): ``distviz.tracing.hooks.rref`` gives the caller's frame of an
    ``RRef.backward``, or on the owner a stand-in for the frame of a caller on another
    worker, and ``entry`` ``observe_args.RREF_BACKWARD`` (the summary's notes name it)."""
    proc = process.PROCESS
    if proc is None:
        return BACKWARD(*args, **kwargs)
    for hook in STARTS:
        hook(args, kwargs)
    if _is_tracing():  # even reading the roots' sizes would join the traced graph
        cid = args[0] if args else kwargs.get("contextId")
        if type(cid) is int:
            proc.number(cid)    # a backward of the context came through Python
        _log_unrecorded(proc, f"{observe_args.a_call(entry)} inside torch.jit.trace was not "
                              "recorded")
        return BACKWARD(*args, **kwargs)
    call = observe_args.recordable(args, kwargs)
    if call is None:
        return observe_args.unrecorded(args, kwargs, None,
                                       functools.partial(_log_unrecorded, proc), entry)
    context_id, roots, retain_graph = call
    if not context_here(context_id):   # no context of the program's
        return observe_args.unrecorded(args, kwargs, context_id,
                                       functools.partial(_log_unrecorded, proc), entry)
    k, first = proc.number(context_id)
    if not first and context_id in proc.runs:
        from distviz.tracing.recording import observe

        watch_hook.counted(_in_flight(context_id, k, roots, retain_graph), observe.record_again,
                           proc.runs[context_id], roots, retain_graph, frame)
        return None
    if not first or not proc.spec.selects(k) or not proc.claim_slot():
        if not first:
            _unfollowed(proc, context_id)
        if watch_hook.WATCH is not None:    # watched, not recorded in full (tracing/watch/watcher.py)
            return watch_hook.WATCH.watched(proc, context_id, roots, retain_graph, k,
                                            frame)
        callsites.drop(context_id)
        return watch_hook.counted(_in_flight(context_id, k, roots, retain_graph),
                                  BACKWARD, *args, **kwargs)
    from distviz.tracing.recording import observe

    watch_hook.counted(_in_flight(context_id, k, roots, retain_graph),
                       observe.record_and_observe, proc.config, context_id, roots,
                       retain_graph, k, frame)
    return None


def context_ended(context_id: int) -> None:
    """The program leaves ``with dist_autograd.context()``: the call sites of its RPCs are let
    go of (those made after its backward, such as the optimizer's, would otherwise be kept
    until ``callsites.KEEP_CONTEXTS`` later contexts push them out), and a context recorded in
    full lets go of what it kept for later passes (``observe.context_ended``)."""
    callsites.drop(context_id)
    proc = process.PROCESS
    if proc is None or (context_id not in proc.runs and context_id not in proc.ended):
        return
    from distviz.tracing.recording import observe

    observe.context_ended(proc, context_id)


def _in_flight(context_id: int, k: int, roots: list[torch.Tensor],
               retain_graph: bool) -> InFlight:
    """The table entry of a backward starting now in this thread."""
    return InFlight(context_id, k, roots, retain_graph, time.monotonic(),
                    threading.get_ident())


def _log_unrecorded(proc: Process, message: str) -> None:
    """Note in the summary, once per process, that a call was not recorded."""
    if message not in proc.unrecorded:
        proc.unrecorded.add(message)
        journal.append(proc.config.session_dir, journal.Event(
            kind=journal.EventKind.NOT_RECORDED, pid=os.getpid(), worker=proc.worker,
            message=message))


def _unfollowed(proc: Process, context_id: int) -> None:
    """Log, once, that a later pass of a recorded context runs unrecorded, and why."""
    why = proc.ended.get(context_id)
    if why:
        proc.ended[context_id] = ""
        journal.append(proc.config.session_dir, journal.Event(
            kind=journal.EventKind.NOT_RECORDED, pid=os.getpid(), worker=proc.worker, message=why))
