"""The RPCs a thread is inside now, read from the wrappers' own frames on the threads' stacks
(``distviz snapshot`` of a job stuck in a forward RPC; torch side): a call pays nothing for
this."""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from distviz.frames import outwards
from distviz.recorder.contexts import context_or_none
from distviz.tracing.callsites.labels import argument_hint
from distviz.tracing.callsites.registry import Call, calls_of, rpc_calls
from distviz.tracing.callsites.wrappers import CALL_CODE

if TYPE_CHECKING:  # pragma: no cover - the trace model loads when a context is recorded
    from distviz.trace import RpcCall


def peek(context_id: int) -> list[RpcCall]:
    """This process's calls for ``context_id`` so far, kept for ``take``, and those a thread
    is inside now (``waiting``): ``distviz snapshot`` of a running job."""
    return rpc_calls(context_id, calls_of(context_id) + waiting(context_id, sys._current_frames()))


def waiting(context_id: int, stacks: dict[int, types.FrameType]) -> list[Call]:
    """The RPCs of ``context_id`` that a thread is inside now (``stacks``: innermost frame by
    thread, as ``sys._current_frames()`` gives them), read from the wrapper's own frame
    (``wrap_call``'s ``call``, which notes a call only once it returns): a call pays nothing
    for this. Their messages are the sends made in the context since the call began."""
    ctx = context_or_none(context_id)
    if ctx is None:
        return []
    sends = ctx._send_functions()
    return [call for _, local in _in_wrappers(stacks)
            if (call := _in_call(local, context_id, sends)) is not None]


def waiting_contexts(stacks: dict[int, types.FrameType]) -> dict[int, int]:
    """The contexts that some thread is inside an RPC of now (``waiting``), each with the
    first such thread: on a callee, the contexts of the RPCs it serves whose function makes
    an RPC of its own."""
    out: dict[int, int] = {}
    for ident, local in _in_wrappers(stacks):
        cid = local.get("cid")
        if isinstance(cid, int) and _sent_not_returned(local):
            out.setdefault(cid, ident)
    return out


def _sent_not_returned(local: Any) -> bool:
    """Whether the wrapper frame with the locals ``local`` has read the context's sends
    before its call (``before``) and has no result yet."""
    return "before" in local and "result" not in local


def _in_wrappers(stacks: dict[int, types.FrameType]) -> list[tuple[int, Any]]:
    """``(thread, locals)`` of every ``wrap_call`` wrapper frame on the threads' stacks."""
    out: list[tuple[int, Any]] = []
    for ident, top in stacks.items():
        out.extend((ident, f.f_locals) for f in outwards(top) if f.f_code is CALL_CODE)
    return out


def _in_call(local: Any, context_id: int, sends: dict[int, Any]) -> Call | None:
    """The call whose wrapper frame has the locals ``local``, when it is a call of
    ``context_id`` that has sent and not returned."""
    if local.get("cid") != context_id or not _sent_not_returned(local):
        return None
    args, kwargs, before = local["args"], local["kwargs"], local["before"]
    return Call(local["api"], args[0] if args else kwargs.get("to"),
                args[1] if len(args) > 1 else kwargs.get("func"),
                argument_hint(args[2] if len(args) > 2 else kwargs.get("args")),
                bool(local.get("grad", True)), list(local.get("frames") or []),
                sorted(m for m in sends if m not in before))
