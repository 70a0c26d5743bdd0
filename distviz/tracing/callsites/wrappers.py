"""The wrappers around ``rpc.rpc_sync``, ``rpc_async``, ``remote`` and ``RRef.to_here`` that
note each RPC made in a context (torch side): what the call was given and what cannot be read
later (the program's frames, the message ids of its sends, its result's recv functions)."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed.autograd as dist_autograd

from distviz.frames import own_frames
from distviz.tracing.callsites.labels import argument_hint
from distviz.tracing.callsites.messages import current_context, result_functions
from distviz.tracing.callsites.registry import QUIET, Call, log, skipped

#: Called with ``(api, args, kwargs, result, frame)`` after each RPC made outside any context,
#: and with ``(args, kwargs)`` before each RPC of a context that may be recorded, when set
#: (``distviz.tracing.hooks.cut_watch``, in a process that may record a context).
OUTSIDE: list[Callable[..., None]] = []
INSIDE: list[Callable[..., None]] = []


def wrap_call(api: str, orig: Callable[..., Any],
              gate: Callable[[int], bool] | None) -> Callable[..., Any]:
    """Wrap ``rpc.rpc_sync`` / ``rpc_async`` / ``remote`` to record calls made in a context.

    ``gate(context_id)`` says whether the context may be recorded (``None``: every context may
    be, as when every backward is watched).
    The call keeps only what it was given and what it cannot read later (the frames' lines,
    the message ids of its sends, its result's recv functions); the rest is named when the
    context is recorded (``Call``).
    """
    grad_enabled, frame_of = torch.is_grad_enabled, sys._getframe
    current, quiet = dist_autograd._current_context, QUIET

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            ctx = current()
        except RuntimeError:    # no context in this thread
            if not OUTSIDE:
                return orig(*args, **kwargs)
            result = orig(*args, **kwargs)
            for hook in OUTSIDE:
                hook(api, args, kwargs, result, frame_of(1))
            return result
        cid = ctx._context_id()
        if cid in quiet or (gate is not None and not gate(cid)):    # ``skipped``, inline
            return orig(*args, **kwargs)
        for hook in INSIDE:
            hook(args, kwargs)
        before = ctx._send_functions()
        frames = own_frames(frame_of(1))
        grad = grad_enabled()
        result = orig(*args, **kwargs)
        after = ctx._send_functions()
        rec = Call(api, args[0] if args else kwargs.get("to"),
                   args[1] if len(args) > 1 else kwargs.get("func"),
                   argument_hint(args[2] if len(args) > 2 else kwargs.get("args")), grad,
                   frames, [m for m in after if m not in before]
                   if len(after) != len(before) else [])
        if api == "rpc_sync":
            rec.recvs = result_functions(result)
        elif api == "rpc_async" and hasattr(result, "done"):
            rec.pending = result
        log(cid, rec)
        return result
    call.__wrapped__ = orig    # type: ignore[attr-defined]
    call.__name__ = getattr(orig, "__name__", api)
    call.__doc__ = getattr(orig, "__doc__", None)
    return call


#: the code of ``wrap_call``'s wrapper: a thread inside it is waiting for that RPC (``waiting``)
CALL_CODE = next(c for c in wrap_call.__code__.co_consts
                  if isinstance(c, types.CodeType) and c.co_name == "call")


def wrap_to_here(orig: Callable[..., Any],
                 gate: Callable[[int], bool] | None) -> Callable[..., Any]:
    """Wrap ``RRef.to_here``: the fetched value's ``RecvRpcBackward`` is the call's message."""
    def to_here(self: Any, *args: Any, **kwargs: Any) -> Any:
        ctx = current_context()
        cid = None if ctx is None else ctx._context_id()
        if cid is None or skipped(cid, gate):
            return orig(self, *args, **kwargs)
        grad = torch.is_grad_enabled()
        frames = own_frames(sys._getframe(1))
        value = orig(self, *args, **kwargs)
        try:
            owner = str(self.owner_name())
        except Exception:  # noqa: BLE001
            owner = "?"
        log(cid, Call("to_here", owner, "RRef", None, grad, frames,
                      recvs=result_functions(value)))
        return value
    to_here.__wrapped__ = orig    # type: ignore[attr-defined]
    to_here.__doc__ = getattr(orig, "__doc__", None)
    return to_here
