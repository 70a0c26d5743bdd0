"""The ``rpc`` object scenario programs see, in real (distributed) and local (reference) form.

``ScenarioRpc`` forwards to ``torch.distributed.rpc`` (builtins stay builtins, so
``rpc.rpc_sync("worker1", torch.add, ...)`` is a real builtin RPC) and logs each call made inside
a dist autograd context with the message ids it created on the caller. ``LocalRpc`` runs every
call in-process against the target worker's namespace, for the single-process reference run.

A call of a scenario function carries the chain of calls that led to it (``run_nested`` runs the
function on the callee with that chain): a call that would nest deeper than the limit raises
``RpcDepthError`` naming the cycle, instead of taking every RPC thread of the workers and hanging.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc

from distviz import limits
from distviz.recorder import log_call
from distviz.trace import RpcCall

SCENARIO_MODULE = "distviz_scenario"

#: The chain of RPC calls running on this thread: ``[(function, worker), ...]`` from ``main``.
_CHAIN = threading.local()


class RpcDepthError(RuntimeError):
    """RPC calls of scenario functions nest deeper than ``--max-rpc-depth``."""


def _chain() -> list[tuple[str, str]]:
    frames: list[tuple[str, str]] = getattr(_CHAIN, "frames", [])
    return frames


def run_nested(frames: list[tuple[str, str]], func: Callable[..., Any], /, *args: Any,
               **kwargs: Any) -> Any:
    """Run ``func(*args, **kwargs)``, the callee's side of an RPC made by a scenario function,
    with ``frames`` (the calls that led here, this one last) as this thread's chain.

    Torch wraps a remote error once per hop and repeats its text twice, so an error that crosses
    many nested calls doubles in size at each; an ``RpcDepthError`` is cut back here to the
    innermost hop, which names the cycle and the scenario line.
    """
    saved = _chain()
    _CHAIN.frames = [(str(f), str(w)) for f, w in frames]
    try:
        return func(*args, **kwargs)
    except RpcDepthError as exc:
        text = str(exc)
        innermost = text.rfind("On WorkerInfo(")
        if innermost <= 0:
            raise
        raise RpcDepthError(text[innermost:]) from None
    finally:
        _CHAIN.frames = saved


def _depth_message(frames: list[tuple[str, str]], limit: int) -> str:
    """Why the call ``frames[-1]`` is refused: the cycle it repeats, or the whole chain."""
    last = frames[-1]
    earlier = [i for i, f in enumerate(frames[:-1]) if f == last]
    shown = frames[earlier[-1]:] if earlier else frames
    path = " -> ".join(f"{fn} on {w}" for fn, w in shown)
    what = (f"the calls {path} repeat without end (a recursion across workers)" if earlier
            else f"the chain {path}")
    return (f"RPC calls nest more than {limit} deep: {what}; each nested call holds an RPC "
            "thread until it returns (raise the limit with --max-rpc-depth)")


def _func_name(func: Any) -> tuple[str, bool]:
    mod = getattr(func, "__module__", None) or ""
    name = getattr(func, "__name__", repr(func))
    if mod == SCENARIO_MODULE:
        return name, False
    return f"torch.{name}", True


class _Snapshot:
    """Message ids present in the caller's current context before a call."""

    def __init__(self) -> None:
        self.ctx: Any = None
        self.sends: set[int] = set()
        self.recvs: set[int] = set()
        try:
            self.ctx = dist_autograd._current_context()
        except RuntimeError:
            return
        self.sends = set(self.ctx._send_functions())
        self.recvs = set(self.ctx._recv_functions())

    def new_ids(self) -> list[int]:
        if self.ctx is None:
            return []
        sends = set(self.ctx._send_functions()) - self.sends
        recvs = set(self.ctx._recv_functions()) - self.recvs
        return sorted(sends | recvs)


class FutureProxy:
    """What ``rpc.rpc_async`` returns in a scenario: ``.wait()`` gives the result."""

    def __init__(self, fut: Any, finish: Callable[[], None]) -> None:
        self._fut = fut
        self._finish = finish
        self._done = False

    def wait(self) -> Any:
        value = self._fut.wait()
        if not self._done:
            self._done = True
            self._finish()
        return value


class RRefProxy:
    """What ``rpc.remote`` returns in a scenario: ``to_here()`` and ``local_value()``."""

    def __init__(self, rref: Any, owner: Any, log: Callable[[str, _Snapshot, int | None,
                                                             str | None], None]) -> None:
        self._rref = rref
        self._owner = owner
        self._log = log

    def to_here(self, *args: Any, _dv_line: int | None = None,
                _dv_target: str | None = None) -> Any:
        snap = _Snapshot()
        value = self._rref.to_here(*args)
        self._log("to_here", snap, _dv_line, _dv_target)
        return value

    def local_value(self) -> Any:
        return self._rref.local_value()

    def owner_name(self) -> str:
        return str(self._rref.owner_name())


def _unwrap(args: Any) -> Any:
    if isinstance(args, RRefProxy):
        return args._rref
    if isinstance(args, (list, tuple)):
        return type(args)(_unwrap(a) for a in args)
    if isinstance(args, dict):
        return {k: _unwrap(v) for k, v in args.items()}
    return args


class ScenarioRpc:
    """The ``rpc`` name inside scenario programs on a real worker."""

    def __init__(self, worker: str, max_depth: int = limits.DEFAULT_MAX_RPC_DEPTH) -> None:
        self._worker = worker
        self._max_depth = max_depth

    def _logger(self, callee: str, func: Any) -> Callable[[str, _Snapshot, int | None,
                                                           str | None], None]:
        fname, builtin = _func_name(func)
        grad_enabled = torch.is_grad_enabled()

        def log(api: str, snap: _Snapshot, line: int | None, target: str | None) -> None:
            if snap.ctx is None:
                return
            log_call(int(snap.ctx._context_id()), RpcCall(
                caller=self._worker, callee=callee, api=api, func=fname, builtin=builtin,
                grad_enabled=grad_enabled, line=line, result_var=target, msg_ids=snap.new_ids()))
        return log

    def _send(self, api: str, to: Any, func: Any, args: Any, kwargs: Mapping[str, Any] | None,
              timeout: float) -> tuple[Any, Callable[[str, _Snapshot, int | None, str | None],
                                                   None], _Snapshot]:
        """Make the real call; return its result, the call logger and the pre-call snapshot.

        A scenario function runs on the callee through ``run_nested`` with the chain of calls;
        raises ``RpcDepthError`` when that chain would nest deeper than the limit.
        """
        log = self._logger(str(to), func)
        fname, builtin = _func_name(func)
        call_args = tuple(_unwrap(args))
        if not builtin:
            frames = [*(_chain() or [("main", self._worker)]), (fname, str(to))]
            if len(frames) - 1 > self._max_depth:
                raise RpcDepthError(_depth_message(frames, self._max_depth))
            func, call_args = run_nested, (frames, func, *call_args)
        snap = _Snapshot()
        kw = {} if timeout is None or timeout < 0 else {"timeout": timeout}
        call = {"rpc_sync": rpc.rpc_sync, "rpc_async": rpc.rpc_async, "remote": rpc.remote}[api]
        result = call(to, func, args=call_args, kwargs=_unwrap(dict(kwargs or {})), **kw)
        return result, log, snap

    def rpc_sync(self, to: Any, func: Any, args: Any = (), kwargs: Mapping[str, Any] | None = None,
                 timeout: float = -1.0, _dv_line: int | None = None,
                 _dv_target: str | None = None) -> Any:
        result, log, snap = self._send("rpc_sync", to, func, args, kwargs, timeout)
        log("rpc_sync", snap, _dv_line, _dv_target)
        return result

    def rpc_async(self, to: Any, func: Any, args: Any = (), kwargs: Mapping[str, Any] | None = None,
                  timeout: float = -1.0, _dv_line: int | None = None,
                  _dv_target: str | None = None) -> FutureProxy:
        fut, log, snap = self._send("rpc_async", to, func, args, kwargs, timeout)
        return FutureProxy(fut, lambda: log("rpc_async", snap, _dv_line, _dv_target))

    def remote(self, to: Any, func: Any, args: Any = (), kwargs: Mapping[str, Any] | None = None,
               timeout: float = -1.0, _dv_line: int | None = None,
               _dv_target: str | None = None) -> RRefProxy:
        rref, log, snap = self._send("remote", to, func, args, kwargs, timeout)
        log("remote", snap, _dv_line, _dv_target)
        return RRefProxy(rref, to, log)

    def get_worker_info(self, name: str | None = None) -> Any:
        return rpc.get_worker_info(name) if name else rpc.get_worker_info()


# -- the single-process reference ---------------------------------------------------------------

class _LocalFuture:
    def __init__(self, value: Any) -> None:
        self._value = value

    def wait(self) -> Any:
        return self._value


class _LocalRRef:
    def __init__(self, value: Any) -> None:
        self._value = value

    def to_here(self, *args: Any, **kwargs: Any) -> Any:
        return self._value

    def local_value(self) -> Any:
        return self._value


class LocalRpc:
    """``rpc`` for the reference run: each call runs in-process in the target worker's namespace."""

    def __init__(self, namespaces: Mapping[str, dict[str, Any]]) -> None:
        self._ns = namespaces

    def _call(self, to: Any, func: Any, args: Any, kwargs: Mapping[str, Any] | None) -> Any:
        target = func
        if getattr(func, "__module__", None) == SCENARIO_MODULE:
            target = self._ns[str(to)][func.__name__]
        return target(*tuple(args or ()), **dict(kwargs or {}))

    def rpc_sync(self, to: Any, func: Any, args: Any = (), kwargs: Mapping[str, Any] | None = None,
                 timeout: float = -1.0, **_: Any) -> Any:
        return self._call(to, func, args, kwargs)

    def rpc_async(self, to: Any, func: Any, args: Any = (), kwargs: Mapping[str, Any] | None = None,
                  timeout: float = -1.0, **_: Any) -> _LocalFuture:
        return _LocalFuture(self._call(to, func, args, kwargs))

    def remote(self, to: Any, func: Any, args: Any = (), kwargs: Mapping[str, Any] | None = None,
               timeout: float = -1.0, **_: Any) -> _LocalRRef:
        return _LocalRRef(self._call(to, func, args, kwargs))
