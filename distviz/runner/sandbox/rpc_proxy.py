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
from distviz.recorder.contexts import log_call
from distviz.recorder.gather import before_gather
from distviz.runner.sandbox import served
from distviz.torch_errors import innermost_hop
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
    note = served.begin(_CHAIN.frames)
    try:
        return func(*args, **kwargs)
    except RpcDepthError as exc:
        innermost = innermost_hop(str(exc))
        if innermost is None:
            raise
        raise RpcDepthError(innermost) from None
    finally:
        served.end(note)
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
    """``(name, builtin)`` of an RPC's function: a scenario function or class by its name
    (``my_add``, ``EmbeddingTable``), a method of one by its qualified name, an ``nn`` class
    as ``nn.Linear``, a torch function as ``torch.add`` (a builtin RPC)."""
    mod = getattr(func, "__module__", None) or ""
    name = getattr(func, "__name__", repr(func))
    if mod == SCENARIO_MODULE:
        return str(getattr(func, "__qualname__", name)), False
    if func is invoke_method:
        return "rref method", False
    if isinstance(func, type):
        return (f"nn.{name}" if mod.startswith("torch.nn") else name), False
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


_REPLIES: dict[int, list[Any]] = {}   # context id -> futures of calls not waited for yet
_REPLIES_LOCK = threading.Lock()


def _expect_reply(snap: _Snapshot, fut: Any) -> None:
    """Keep the future of a call made in a context (``rpc_async``, ``remote``) until its
    reply came (then ``_replied`` drops it) or the context is recorded (``wait_replies``)."""
    if snap.ctx is None:
        return
    cid, key = int(snap.ctx._context_id()), id(fut)
    with _REPLIES_LOCK:
        _REPLIES.setdefault(cid, []).append(fut)
    fut.add_done_callback(lambda _done: _replied(cid, key))  # ids only: no cycle via fut


def _replied(cid: int, key: int) -> None:
    with _REPLIES_LOCK:
        pending = _REPLIES.get(cid)
        if pending is None:
            return
        pending[:] = [f for f in pending if id(f) != key]
        if not pending:
            del _REPLIES[cid]


def wait_replies(context_id: int) -> None:
    """Wait for the reply to every call made in the context that nobody waited for (an
    ``rpc.remote`` whose RRef is never fetched): a reply means the callee read the request
    and holds its recv function, so the recording that follows sees the whole graph. Bounded
    by each call's RPC time-out; a failed call is not raised here (the program meets it where
    PyTorch raises it)."""
    with _REPLIES_LOCK:
        pending = _REPLIES.pop(int(context_id), [])
    for fut in pending:
        try:
            fut.wait()
        except Exception:  # noqa: BLE001, S112 - raised where the program uses the result
            continue


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


def worker_name(to: Any) -> str:
    """The worker name of an RPC destination: a name, or a ``WorkerInfo`` (``rref.owner()``)."""
    return str(getattr(to, "name", to))


def invoke_method(rref: Any, name: str, args: Any, kwargs: Any) -> Any:
    """Run ``rref``'s value's method ``name`` on its owner (``rref.rpc_sync().name(...)``).

    ``name`` comes from a checked scenario (a whitelisted or declared method name), never
    private."""
    if name.startswith("_"):
        raise AttributeError(f"method {name!r} is not available in scenarios")
    return getattr(rref.local_value(), name)(*args, **kwargs)


class MethodCaller:
    """``rref.rpc_sync()``, ``rref.rpc_async()`` or ``rref.remote()``: ``.method(...)`` runs
    the method of the RRef's value on its owner, through the scenario's ``rpc``."""

    def __init__(self, rref: Any, api: str, rpc_obj: Any, timeout: float = -1.0) -> None:
        self._rref = rref
        self._api = api
        self._rpc = rpc_obj
        self._timeout = timeout

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)

        def call(*args: Any, **kwargs: Any) -> Any:
            fn = getattr(self._rpc, self._api)
            return fn(self._rref.owner(), invoke_method,
                      args=(self._rref, name, args, kwargs), timeout=self._timeout)
        return call


class MethodCalls:
    """``rref.rpc_sync()``, ``rref.rpc_async()`` and ``rref.remote()`` of both RRefs programs
    see (the real run's ``RRefProxy``, the reference's ``LocalRRef``), through ``_rpc``."""

    _rpc: Any

    def rpc_sync(self, timeout: float = -1.0) -> MethodCaller:
        return MethodCaller(self, "rpc_sync", self._rpc, timeout)

    def rpc_async(self, timeout: float = -1.0) -> MethodCaller:
        return MethodCaller(self, "rpc_async", self._rpc, timeout)

    def remote(self, timeout: float = -1.0) -> MethodCaller:
        return MethodCaller(self, "remote", self._rpc, timeout)


class RRefProxy(MethodCalls):
    """What ``rpc.remote`` returns in a scenario: PyTorch's RRef methods, with ``to_here()``
    and ``rpc_sync()/rpc_async()/remote()`` going through the scenario's ``rpc``."""

    def __init__(self, rref: Any, owner: Any, log: Callable[[str, _Snapshot, int | None,
                                                             str | None], None],
                 rpc_obj: Any = None) -> None:
        self._rref = rref
        self._owner = owner
        self._log = log
        self._rpc = rpc_obj

    def __reduce__(self) -> tuple[Any, tuple[Any]]:
        # sent over RPC by PyTorch's own calls (a RemoteModule's forward), it is the RRef
        return _as_is, (self._rref,)

    def to_here(self, *args: Any, _dv_line: int | None = None,
                _dv_target: str | None = None) -> Any:
        snap = _Snapshot()
        value = self._rref.to_here(*args)
        self._log("to_here", snap, _dv_line, _dv_target)
        return value

    def local_value(self) -> Any:
        return self._rref.local_value()

    def owner(self) -> Any:
        return self._rref.owner()

    def owner_name(self) -> str:
        return str(self._rref.owner_name())

    def is_owner(self) -> bool:
        return bool(self._rref.is_owner())

    def confirmed_by_owner(self) -> bool:
        return bool(self._rref.confirmed_by_owner())


def _nothing() -> None:
    return None


def _as_is(value: Any) -> Any:
    return value


def unwrap_rrefs(args: Any) -> Any:
    if isinstance(args, RRefProxy):
        return args._rref
    if isinstance(args, (list, tuple)):
        return type(args)(unwrap_rrefs(a) for a in args)
    if isinstance(args, dict):
        return {k: unwrap_rrefs(v) for k, v in args.items()}
    return args


def _wait_built(rref: Any) -> None:
    """Wait until the owner has built the object an ``rpc.remote(to, SomeClass, ...)`` asked
    for (``_get_future()``: the owner's reply to the remote call).

    Objects built at the same time on one worker draw their initial values (a module's weights)
    from that worker's one random generator in an order that changes from run to run (PyTorch's
    distributed RNN tutorial builds its embedding table and decoder that way); built one at a
    time, in the order the program asked, they get the values the single-process reference
    gives them. A failed build is not raised here: the program meets it where PyTorch raises it
    (``to_here()``, a call on the RRef).
    """
    try:
        rref._get_future().wait()
    except Exception:  # noqa: BLE001 - raised again where the program uses the RRef
        return


class ScenarioRpc:
    """The ``rpc`` name inside scenario programs on a real worker."""

    def __init__(self, worker: str, max_depth: int = limits.DEFAULT_MAX_RPC_DEPTH) -> None:
        self._worker = worker
        self._max_depth = max_depth
        #: ``clock("rpc")`` at each call the worker's own code makes (not one it serves):
        #: returns what to call when the call's result is in (the training form's order)
        self.clock: Callable[[str], Callable[[], None]] | None = None
        before_gather(wait_replies)

    def _began(self) -> Callable[[], None]:
        if self.clock is None or _chain():
            return _nothing
        return self.clock("rpc")

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
        log = self._logger(worker_name(to), func)
        fname, builtin = _func_name(func)
        call_args = tuple(unwrap_rrefs(args))
        if not builtin:
            frames = [*(_chain() or [("main", self._worker)]), (fname, worker_name(to))]
            if len(frames) - 1 > self._max_depth:
                raise RpcDepthError(_depth_message(frames, self._max_depth))
            func, call_args = run_nested, (frames, func, *call_args)
        snap = _Snapshot()
        kw = {} if timeout is None or timeout < 0 else {"timeout": timeout}
        call = {"rpc_sync": rpc.rpc_sync, "rpc_async": rpc.rpc_async, "remote": rpc.remote}[api]
        result = call(to, func, args=call_args, kwargs=unwrap_rrefs(dict(kwargs or {})), **kw)
        return result, log, snap

    def rpc_sync(self, to: Any, func: Any, args: Any = (), kwargs: Mapping[str, Any] | None = None,
                 timeout: float = -1.0, _dv_line: int | None = None,
                 _dv_target: str | None = None) -> Any:
        done = self._began()
        result, log, snap = self._send("rpc_sync", to, func, args, kwargs, timeout)
        done()
        log("rpc_sync", snap, _dv_line, _dv_target)
        return result

    def rpc_async(self, to: Any, func: Any, args: Any = (), kwargs: Mapping[str, Any] | None = None,
                  timeout: float = -1.0, _dv_line: int | None = None,
                  _dv_target: str | None = None) -> FutureProxy:
        done = self._began()
        fut, log, snap = self._send("rpc_async", to, func, args, kwargs, timeout)
        _expect_reply(snap, fut)

        def finish() -> None:
            done()
            log("rpc_async", snap, _dv_line, _dv_target)
        return FutureProxy(fut, finish)

    def remote(self, to: Any, func: Any, args: Any = (), kwargs: Mapping[str, Any] | None = None,
               timeout: float = -1.0, _dv_line: int | None = None,
               _dv_target: str | None = None) -> RRefProxy:
        done = self._began()  # ends when the owner says it made the value
        rref, log, snap = self._send("remote", to, func, args, kwargs, timeout)
        _expect_reply(snap, rref._get_future())
        log("remote", snap, _dv_line, _dv_target)
        if isinstance(func, type):
            _wait_built(rref)
            done()
        else:
            rref._get_future().add_done_callback(lambda _fut: done())
        return RRefProxy(rref, to, log, self)

    def get_worker_info(self, name: str | None = None) -> Any:
        return rpc.get_worker_info(name) if name else rpc.get_worker_info()

    def RRef(self, value: Any, type_hint: Any = None) -> Any:  # noqa: N802 - PyTorch's name
        """``rpc.RRef(x)``: an RRef owned by this worker."""
        return rpc.RRef(value) if type_hint is None else rpc.RRef(value, type_hint)


# -- the single-process reference ---------------------------------------------------------------

class LocalWorld:
    """The workers of the reference run, in one process: their namespaces, which one's code is
    running (per thread, a stack: an RPC runs on its destination; ``trainer`` is the thread's
    trainer), and each one's global random generator state, swapped in while its code runs
    (``nn`` layers draw initial weights and dropout masks from it, as each real worker does
    from its own). ``suspend``/``resume`` save and restore around a switch of threads."""

    def __init__(self) -> None:
        self.namespaces: dict[str, dict[str, Any]] = {}
        self.rng: dict[str, torch.Tensor] = {}
        self._local = threading.local()

    @property
    def stack(self) -> list[str]:
        found: list[str] | None = getattr(self._local, "stack", None)
        if found is None:
            found = []
            self._local.stack = found
        return found

    @property
    def trainer(self) -> str:
        return str(getattr(self._local, "trainer", ""))

    @trainer.setter
    def trainer(self, name: str) -> None:
        self._local.trainer = name

    @property
    def current(self) -> str:
        stack = self.stack
        return stack[-1] if stack else ""

    def suspend(self) -> None:
        """This thread stops running: keep its worker's generator state."""
        if self.stack:
            self.rng[self.stack[-1]] = torch.get_rng_state()

    def resume(self) -> None:
        """This thread runs again: its worker's generator state and module registry."""
        from distviz.runner.sandbox import modules
        if self.stack and self.stack[-1] in self.rng:
            torch.set_rng_state(self.rng[self.stack[-1]])
        modules.set_worker(self.current)

    def enter(self, worker: str) -> None:
        from distviz.runner.sandbox import modules
        self.suspend()
        if worker in self.rng:
            torch.set_rng_state(self.rng[worker])
        self.stack.append(worker)
        modules.set_worker(worker)

    def leave(self) -> None:
        from distviz.runner.sandbox import modules
        worker = self.stack.pop()
        self.rng[worker] = torch.get_rng_state()
        if self.stack and self.stack[-1] in self.rng:
            torch.set_rng_state(self.rng[self.stack[-1]])
        modules.set_worker(self.current)

    def run(self, worker: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` as code of ``worker``."""
        self.enter(worker)
        try:
            return fn(*args, **kwargs)
        finally:
            self.leave()


def _received(value: Any, grad_enabled: bool) -> Any:
    """What a caller gets back over RPC: new tensors, never the callee's own objects.

    With grad enabled on the caller, a result that requires grad comes back as a new tensor
    attached to the callee's graph (a ``clone``, as a ``RecvRpcBackward`` would be), so a leaf
    made or held by the callee keeps its own name. Under ``torch.no_grad()`` nothing attaches
    it: the result comes back as a new leaf that keeps the callee's ``requires_grad`` (PyTorch
    sends the flag with the tensor), and it gets a gradient of its own.
    """
    if isinstance(value, torch.Tensor):
        if not grad_enabled:
            return value.detach().requires_grad_(value.requires_grad)
        return value.clone() if value.requires_grad else value
    if isinstance(value, (list, tuple)):
        return type(value)(_received(v, grad_enabled) for v in value)
    return value


class LocalFuture:
    def __init__(self, value: Any) -> None:
        self._value = value

    def wait(self) -> Any:
        return self._value


class LocalWorkerInfo:
    """What ``rref.owner()`` returns in the reference run."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __str__(self) -> str:
        return self.name


class LocalRRef(MethodCalls):
    """An RRef in the reference run: the value itself and the worker that owns it."""

    def __init__(self, value: Any, owner: str, rpc_obj: Any = None) -> None:
        self._value = value
        self._owner = owner
        self._rpc = rpc_obj

    def to_here(self, *args: Any, **kwargs: Any) -> Any:
        return _received(self._value, torch.is_grad_enabled())

    def local_value(self) -> Any:
        return self._value

    def owner(self) -> LocalWorkerInfo:
        return LocalWorkerInfo(self._owner)

    def owner_name(self) -> str:
        return self._owner

    def is_owner(self) -> bool:
        return self._rpc is None or self._rpc.world.current == self._owner

    def confirmed_by_owner(self) -> bool:
        return True


class LocalRpc:
    """``rpc`` for the reference run: each call runs in-process as code of its destination,
    with the destination's own functions and classes (a function or class of ``code`` passed
    along is that worker's, as unpickling it there would give), with grad enabled (as on an RPC
    server thread); results come back as ``_received`` makes them."""

    def __init__(self, world: LocalWorld) -> None:
        self.world = world
        #: ``clock("rpc")`` before each call a trainer's own code makes (as ``ScenarioRpc``'s)
        self.clock: Callable[[str], None] | None = None

    def _translate(self, value: Any, ns: dict[str, Any]) -> Any:
        if isinstance(value, (list, tuple)):
            return type(value)(self._translate(v, ns) for v in value)
        if isinstance(value, dict):
            return {k: self._translate(v, ns) for k, v in value.items()}
        if getattr(value, "__module__", None) == SCENARIO_MODULE and callable(value):
            found: Any = ns
            for part in str(getattr(value, "__qualname__", "")).split("."):
                found = found.get(part) if isinstance(found, dict) else getattr(found, part, None)
                if found is None:
                    return value
            return found
        return value

    def _run(self, to: Any, func: Any, args: Any, kwargs: Mapping[str, Any] | None) -> Any:
        if self.clock is not None and self.world.stack == [self.world.trainer]:
            self.clock("rpc")
        name = worker_name(to)
        ns = self.world.namespaces[name]
        target = self._translate(func, ns)
        args = self._translate(tuple(args or ()), ns)
        kw = self._translate(dict(kwargs or {}), ns)
        with torch.enable_grad():
            return self.world.run(name, target, *args, **kw)

    def _call(self, to: Any, func: Any, args: Any, kwargs: Mapping[str, Any] | None) -> Any:
        grad_enabled = torch.is_grad_enabled()
        return _received(self._run(to, func, args, kwargs), grad_enabled)

    def rpc_sync(self, to: Any, func: Any, args: Any = (), kwargs: Mapping[str, Any] | None = None,
                 timeout: float = -1.0, **_: Any) -> Any:
        return self._call(to, func, args, kwargs)

    def rpc_async(self, to: Any, func: Any, args: Any = (), kwargs: Mapping[str, Any] | None = None,
                  timeout: float = -1.0, **_: Any) -> LocalFuture:
        return LocalFuture(self._call(to, func, args, kwargs))

    def remote(self, to: Any, func: Any, args: Any = (), kwargs: Mapping[str, Any] | None = None,
               timeout: float = -1.0, **_: Any) -> LocalRRef:
        return LocalRRef(self._run(to, func, args, kwargs), worker_name(to), self)

    def RRef(self, value: Any, type_hint: Any = None) -> LocalRRef:  # noqa: N802
        """``rpc.RRef(x)``: an RRef owned by the running worker."""
        return LocalRRef(value, self.world.current, self)
