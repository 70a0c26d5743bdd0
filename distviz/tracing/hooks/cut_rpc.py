"""The RPC side of the cuts (torch side; ``distviz.tracing.hooks.cut_watch`` is the rest).

* ``wrap_run`` wraps ``torch.distributed.rpc.internal._run_function``, which runs every Python
  function an RPC calls on its callee: for a context the callee watches (``callee_watches``),
  the watch is on while the program's function runs, a profile function finds the program's
  line that returns an ``nn.Parameter`` (sent as plain data, with no send attached), the
  result's tensors go on to the caller, and the cuts of computed tensors are logged as it
  returns.
* ``outside``: the results of an RPC made outside any context, kept weakly; ``sent``: one of
  them sent by an RPC of a watched context (``callsites.wrappers`` calls both).
"""

from __future__ import annotations

import sys
import threading
import types
import weakref
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed.autograd as dist_autograd

from distviz import limits
from distviz.cuts import CutKind, RpcRef
from distviz.frames import own_frames, own_path, site_text
from distviz.tracing.callsites import wrappers
from distviz.tracing.hooks import cut_sites
from distviz.tracing.hooks.cut_watch import (
    LOCK,
    OUTSIDE,
    PARAMETER,
    TLS,
    Pending,
    add,
    consume,
    guarded,
    log_pending,
    named,
    outside_used,
    start,
    stop,
    tensors,
    watched,
)
from distviz.tracing.shared import process

_CALLEE: dict[int, set[int]] = {}      # the contexts watched, by initiator rank


def callee_watches(cid: int) -> bool:
    """Whether a callee watches an RPC of ``cid``: a context of its own that may be recorded;
    another initiator's when it is one of the first ``limits.CUT_CALLEE_CONTEXTS`` seen from it,
    or ``--contexts`` selects its number there (ids count from 0 per initiator) and fewer than
    ``limits.CUT_WATCHED_CONTEXTS`` of that initiator's are watched."""
    proc = process.PROCESS
    if proc is None:
        return False
    rank = cid >> 48
    if proc.rank is not None and rank == proc.rank:
        return proc.may_record(cid) and watched(cid)
    seen = _CALLEE.setdefault(rank, set())
    if cid in seen:
        return True
    number = (cid & ((1 << 48) - 1)) + 1
    if len(seen) < limits.CUT_CALLEE_CONTEXTS or (
            proc.spec.selects(number) and len(seen) < limits.CUT_WATCHED_CONTEXTS):
        seen.add(cid)
        return True
    return False


def wrap_run(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
    current = dist_autograd._current_context

    def _run_function(python_udf: Any) -> Any:
        try:
            cid = int(current()._context_id())
        except RuntimeError:    # no context: a plain RPC
            return original(python_udf)
        func = getattr(python_udf, "func", None)
        if TLS.mode is not None or str(getattr(func, "__module__", "")).startswith("distviz") \
                or not callee_watches(cid):
            return original(python_udf)
        started = guarded(start, cid, _served_name(python_udf))
        profile = sys.getprofile()
        if started and profile is None:     # a profiler or debugger of the program's stays
            TLS.returned = None
            sys.setprofile(_on_return)
        try:
            result = original(python_udf)
            if started:     # its tensors go on to the caller
                guarded(consume, result if isinstance(result, (list, tuple)) else (result,))
        finally:
            if started:
                if profile is None:
                    sys.setprofile(None)
                guarded(stop)
        if started:
            guarded(_returned, cid, python_udf, result)
            guarded(log_pending, threading.get_ident())
        return result
    _run_function.__wrapped__ = original  # type: ignore[attr-defined]
    return _run_function


def _on_return(frame: types.FrameType, event: str, arg: Any) -> None:
    """The profile function of a served RPC: the innermost of the program's functions that
    returns an ``nn.Parameter`` (or a list or tuple holding one), and its line."""
    if event != "return" or TLS.returned is not None or arg is None:
        return
    if isinstance(arg, PARAMETER) or (isinstance(arg, (list, tuple)) and any(
            isinstance(a, PARAMETER) for a in arg[:16])):
        path = own_path(frame.f_code.co_filename)
        if path:
            TLS.returned = (path, frame.f_lineno, frame.f_code.co_name)


def _target(python_udf: Any) -> Any:
    """The program's function an RPC runs (an RRef's method for ``rref.rpc_sync().f()``)."""
    func = getattr(python_udf, "func", None)
    if getattr(func, "__module__", "") == "torch.distributed.rpc.rref_proxy":
        args: tuple[Any, ...] = tuple(getattr(python_udf, "args", ()))
        if len(args) > 1 and isinstance(args[1], str):
            try:
                return getattr(type(args[0].local_value()), args[1], func)
            except Exception:  # noqa: BLE001 - not an RRef of this worker
                return func
    return func


def _served_name(python_udf: Any) -> str | None:
    func = _target(python_udf)
    return getattr(func, "__qualname__", None) or getattr(func, "__name__", None)


def _returned(cid: int, python_udf: Any, result: Any) -> None:
    """The program's RPC function returned ``result``: its tensors go on to the caller; an
    ``nn.Parameter`` in it goes as plain data."""
    params = [t for t in tensors(result if isinstance(result, (list, tuple)) else (result,))
              if isinstance(t, PARAMETER) and t.requires_grad]
    if isinstance(result, dict):
        params += [t for t in tensors(result.values()) if isinstance(t, PARAMETER)
                   and t.requires_grad]
    if not params:
        return
    frames = [TLS.returned] if TLS.returned is not None else []
    code = getattr(_target(python_udf), "__code__", None)
    if not frames and isinstance(code, types.CodeType) and own_path(code.co_filename):
        frames = [(own_path(code.co_filename), cut_sites.return_line(code), code.co_name)]
    if not frames:
        return
    add(Pending(CutKind.PARAMETER_SENT, cid, frames, None, named(params), [],
                  _served_name(python_udf)))


def outside(api: str, args: tuple[Any, ...], kwargs: dict[str, Any], result: Any,
             frame: types.FrameType | None) -> None:
    """An RPC made outside any context (``callsites.wrappers``): its tensors that require
    grad are kept (weakly, the last ``limits.CUT_OUTSIDE_KEPT``) to tell a use in a context."""
    if api != "rpc_sync":
        return
    ts = [t for t in tensors(result if isinstance(result, (list, tuple)) else (result,))
          if t.requires_grad and t.grad_fn is None]
    if not ts:
        return
    frames = own_frames(frame)
    if not frames:
        return
    from distviz.tracing.callsites.labels import argument_hint, func_label

    to = args[0] if args else kwargs.get("to")
    func = args[1] if len(args) > 1 else kwargs.get("func")
    label = func_label(func, argument_hint(args[2] if len(args) > 2 else kwargs.get("args")))[0]
    ref = RpcRef(api, label, getattr(to, "name", None) or str(to), site_text(frames))
    with LOCK:
        for t in ts:
            OUTSIDE[id(t)] = (weakref.ref(t), ref, frames)
        while len(OUTSIDE) > limits.CUT_OUTSIDE_KEPT:
            OUTSIDE.popitem(last=False)


def sent(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """An RPC of a watched context sends ``args``: a result of an RPC made outside any
    context among them is used there (``rref.rpc_sync().forward(early)``); an
    ``nn.Parameter`` among them goes as plain data (PyTorch attaches no send to it: the
    callee gets a new leaf), a cut at the call's line unless the parameter is used with grad
    enabled elsewhere in the context."""
    if TLS.mode is None:
        return
    given = kwargs.get("kwargs") if len(args) < 4 else args[3]
    todo: list[tuple[Any, int]] = [(args[2] if len(args) > 2 else kwargs.get("args"), 0),
                                   (list(given.values()) if isinstance(given, dict) else (), 0)]
    params: list[torch.Tensor] = []
    while todo:
        v, depth = todo.pop()
        if isinstance(v, torch.Tensor):
            if id(v) in OUTSIDE:
                outside_used(v)
            if isinstance(v, PARAMETER) and v.requires_grad:
                params.append(v)
        elif isinstance(v, (list, tuple)) and depth < 3:
            todo.extend((x, depth + 1) for x in v[:64])
    if params:
        frames = own_frames(sys._getframe(1))
        if frames:
            add(Pending(CutKind.PARAMETER_ARG, TLS.cid, frames, None, named(params), [], None))


def install() -> None:
    """Wrap ``_run_function`` and hook the RPC wrappers (``distviz.tracing.hooks.cut_watch.install``
    first; once per process, as ``patches.install`` is)."""
    import torch.distributed.rpc.internal as rpc_internal

    rpc_internal._run_function = wrap_run(rpc_internal._run_function)
    wrappers.OUTSIDE.append(lambda *a: guarded(outside, *a))
    wrappers.INSIDE.append(lambda *a: guarded(sent, *a))
