"""The calls of each context, as the wrappers noted them (torch side): kept per context until
the context is recorded (``take``) or the program leaves its ``with dist_autograd.context()``
(``drop``), for at most ``KEEP_CONTEXTS`` contexts (the oldest are dropped: a worker that never
enters the contexts it serves). Once a context's watched backward has returned or raised here
(``quiet``), its later RPCs (an optimizer's step) are not noted: they are not in that
backward's graph, and a later backward of the same context would name their messages without
call sites."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from distviz.frames import Frame, site_text
from distviz.recorder.contexts import context_or_none
from distviz.tracing.callsites.labels import func_label
from distviz.tracing.callsites.messages import recv_functions, recv_ids
from distviz.tracing.callsites.source import result_var

if TYPE_CHECKING:  # pragma: no cover - the trace model loads when a context is recorded
    from distviz.trace import RpcCall

KEEP_CONTEXTS = 256


@dataclass(slots=True)
class Call:
    """One RPC made inside a context, as the wrapper saw it. The wrapper keeps what it was
    given and names it only when the context is recorded (``label``, ``callee_name``): most
    contexts never are, and every operation in an RPC's path costs more than it would in a
    loop of its own (caches cold after the RPC's C++)."""

    api: str
    #: the ``to`` argument as given (a name, a ``WorkerInfo``), or the callee's name
    callee: Any
    #: the function as given, or its name (``label``)
    func: Any
    #: what ``func_label`` reads of the function's arguments (``argument_hint``)
    hint: Any
    grad_enabled: bool
    frames: list[Frame]
    msg_ids: list[int] = field(default_factory=list)
    #: the ``RecvRpcBackward`` functions behind the result's tensors (for a tensor result,
    #: its ``grad_fn``, which ``message_ids`` ignores when it is no recv), whose message ids
    #: are read only when the context is recorded (``message_ids``): most contexts never are
    recvs: list[Any] = field(default_factory=list)
    #: ``rpc_async``: its future until the result is read (``resolve``: when the context is
    #: recorded, or at the process's next call once the future is done; a callback on the
    #: future would take the GIL in an RPC thread at every call)
    pending: Any = None
    #: the caller's worker name ("": this worker, named when the call is taken)
    caller: str = ""

    def label(self) -> tuple[str, bool]:
        """``(name, builtin)`` of the call's function (``func_label``)."""
        if isinstance(self.func, str):
            return self.func, self.func.startswith("torch.")
        return func_label(self.func, self.hint)

    def callee_name(self) -> str:
        """The callee's worker name."""
        return getattr(self.callee, "name", None) or str(self.callee)

    def resolve(self) -> None:
        """Note the recv functions of a finished ``rpc_async``'s result (once)."""
        fut = self.pending
        if fut is None or not fut.done():
            return
        self.pending = None
        try:
            self.recvs.extend(recv_functions(fut.value()))
        except Exception:  # noqa: BLE001 - the call failed: nothing arrived
            pass

    def message_ids(self, recv_id: dict[Any, int]) -> list[int]:
        """Its messages: the sends it made and its result's recvs (``recv_id``: the context's
        recv functions by message id, inverted)."""
        return sorted({*self.msg_ids, *(recv_id[f] for f in self.recvs if f in recv_id)})


_CALLS: OrderedDict[int, list[Call]] = OrderedDict()
#: contexts whose watched backward ended (in order, bounded; the wrappers read it: never rebound)
QUIET: dict[int, None] = {}
_PENDING: list[Call] = []       # rpc_async calls whose result has not been read yet
_LOCK = threading.Lock()


def log(context_id: int, call: Call) -> None:
    """Keep ``call`` for ``context_id`` (dropping the oldest context beyond the limit). A
    context's list is made under the lock; appending to it needs only the GIL (a call that
    lands as its context is taken or dropped is dropped with it)."""
    calls = _CALLS.get(context_id)
    if calls is None:
        with _LOCK:
            calls = _CALLS.setdefault(context_id, [])
            while len(_CALLS) > KEEP_CONTEXTS:
                _CALLS.popitem(last=False)
    calls.append(call)
    if _PENDING or call.pending is not None:
        with _LOCK:
            if _PENDING:    # results that arrived since: read them now and let go of them
                for earlier in _PENDING:
                    earlier.resolve()
                _PENDING[:] = [c for c in _PENDING if c.pending is not None]
            if call.pending is not None:
                _PENDING.append(call)


def take(context_id: int) -> list[RpcCall]:
    """Remove and return this process's calls for ``context_id`` as the trace's ``RpcCall``s
    (while the context exists here: the message ids of their results are read from it)."""
    with _LOCK:
        calls = _CALLS.pop(context_id, [])
    return rpc_calls(context_id, calls)


def calls_of(context_id: int) -> list[Call]:
    """This process's calls for ``context_id`` so far (a copy; they stay kept for ``take``)."""
    with _LOCK:
        return list(_CALLS.get(context_id, []))


def rpc_calls(context_id: int, calls: list[Call]) -> list[RpcCall]:
    """``calls`` of ``context_id`` named as the trace's ``RpcCall``s: caller and callee, the
    function as the program wrote it, the variable its result went to, its messages (read from
    the context while it exists here) and its site."""
    from distviz.trace import RpcCall

    recv_id = recv_ids(context_or_none(context_id)) if calls else {}
    here = _worker_name() if calls else ""
    out: list[RpcCall] = []
    for c in calls:
        c.resolve()
        func, builtin = c.label()
        out.append(RpcCall(caller=c.caller or here, callee=c.callee_name(), api=c.api,
                           func=func, builtin=builtin, grad_enabled=c.grad_enabled, line=None,
                           result_var=result_var(c.frames, c.api),
                           msg_ids=c.message_ids(recv_id), site=site_text(c.frames)))
    return out


def _worker_name() -> str:
    """This worker's name (its RPC agent runs while a context of it is recorded)."""
    import torch.distributed.rpc as rpc
    try:
        return str(rpc.get_worker_info().name)
    except RuntimeError:    # the agent is gone
        return "?"


def quiet(context_id: int) -> None:
    """The watched backward of ``context_id`` returned or raised: note no more of its calls
    (see the module docstring)."""
    QUIET[context_id] = None
    if len(QUIET) > KEEP_CONTEXTS:     # contexts never left through ``with``
        with _LOCK:
            while len(QUIET) > KEEP_CONTEXTS:
                del QUIET[next(iter(QUIET))]


def drop(context_id: int) -> None:
    """Forget the calls of a context that is not recorded, or has ended."""
    QUIET.pop(context_id, None)
    if context_id not in _CALLS:
        return
    with _LOCK:
        calls = _CALLS.pop(context_id, None)
        if calls and _PENDING:      # and the futures of its unread rpc_async results
            gone = {id(c) for c in calls}
            _PENDING[:] = [c for c in _PENDING if id(c) not in gone]


def reset() -> None:
    """Forget everything (a forked child starts afresh)."""
    with _LOCK:
        _CALLS.clear()
        _PENDING.clear()
        QUIET.clear()


def skipped(context_id: int, gate: Callable[[int], bool] | None) -> bool:
    """Whether an RPC of ``context_id`` goes unnoted: its watched backward ended (``quiet``),
    or ``gate`` says the context is never recorded."""
    return context_id in QUIET or (gate is not None and not gate(context_id))


def has_calls(context_id: int) -> bool:
    """Whether the wrappers kept any call of ``context_id`` in this process."""
    with _LOCK:
        return bool(_CALLS.get(context_id))
