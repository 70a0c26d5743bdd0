"""Where the program made each RPC inside a dist autograd context (torch side).

``distviz.tracing.hooks.patches`` wraps ``rpc.rpc_sync``, ``rpc.rpc_async``, ``rpc.remote`` (which
``rref.rpc_sync().method(...)``, ``rref.rpc_async()`` and ``rref.remote()`` go through) and
``RRef.to_here``. Each wrapped call made inside a context that may be recorded keeps: the
frames of the program's own files on the call stack (not torch's, not the standard library's,
not site-packages', not distviz's), innermost first; the message ids it created (new send
functions in the caller's context, and the ``RecvRpcBackward`` of the result when it arrives);
and grad mode. The recorder moves them into the trace's ``rpc_calls`` (``take``), where they
become ``site`` strings such as ``rnn.py:19 in _remote_method <- main.py:55 in _run_trainer``
and the variable the result was assigned to.

Calls are kept per context until the context is recorded or the program leaves its ``with
dist_autograd.context()`` (``drop``), and for at most ``KEEP_CONTEXTS`` contexts (the oldest
are dropped: a worker that never enters the contexts it serves). Once a context's watched
backward has returned or raised here (``quiet``), its later RPCs (an optimizer's step) are not
noted: they are not in that backward's graph, and a later backward of the same context would
name their messages without call sites.
"""

from __future__ import annotations

import ast
import functools
import linecache
import os
import site
import sys
import sysconfig
import threading
import types
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed.autograd as dist_autograd

from distviz.recorder.contexts import context_or_none
from distviz.recorder.walk import reachable

if TYPE_CHECKING:  # pragma: no cover - the trace model loads when a context is recorded
    from distviz.trace import RpcCall

KEEP_CONTEXTS = 256
MAX_FRAMES = 4

Frame = tuple[str, int, str]      # (absolute file, line, function)


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
_QUIET: dict[int, None] = {}    # contexts whose watched backward ended (in order, bounded)
_PENDING: list[Call] = []       # rpc_async calls whose result has not been read yet
_LOCK = threading.Lock()
_OWN: dict[str, str] = {}      # code file -> its absolute path, or "" when not the program's
_NOT_OWN: tuple[str, ...] | None = None
_CWD = os.getcwd()
#: the longest walk up the stack for the program's own frames (pytest's own run ~60 deep)
MAX_WALK = 96


def _library_dirs() -> tuple[str, ...]:
    dirs = {os.path.dirname(os.path.abspath(torch.__file__)),
            os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}   # distviz itself
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            dirs.add(os.path.abspath(p))
    try:
        dirs.update(os.path.abspath(p) for p in site.getsitepackages())
    except AttributeError:  # pragma: no cover - virtualenv's old site module
        pass
    return tuple(sorted(d.rstrip(os.sep) + os.sep for d in dirs))


def _own_path(filename: str) -> str:
    """The absolute path of a code file of the program's, "" for Python's, a library's,
    torch's or distviz's (kept per file)."""
    own = _OWN.get(filename)
    if own is None:
        global _NOT_OWN
        if _NOT_OWN is None:
            _NOT_OWN = _library_dirs()
        path = os.path.abspath(filename)
        mine = not filename.startswith("<") and not path.startswith(_NOT_OWN) and \
            "site-packages" not in path and "dist-packages" not in path
        own = _OWN[filename] = path if mine else ""
    return own


def is_own(filename: str) -> bool:
    """Whether a code file belongs to the program (not Python, a library, torch or distviz)."""
    return bool(_own_path(filename))


def own_frames(frame: types.FrameType | None, limit: int = MAX_FRAMES) -> list[Frame]:
    """The program's own frames from ``frame`` outwards, innermost first (at most ``limit``,
    within ``MAX_WALK`` frames)."""
    out: list[Frame] = []
    known = _OWN
    f = frame
    for _ in range(MAX_WALK):
        if f is None:
            break
        code = f.f_code
        path = known.get(code.co_filename)
        if path is None:
            path = _own_path(code.co_filename)
        if path:
            out.append((path, f.f_lineno or 0, code.co_name))
            if len(out) == limit:
                break
        f = f.f_back
    return out


@functools.lru_cache(maxsize=1024)
def display(path: str) -> str:
    """A file as people read it: relative to the working folder when it is inside it (kept
    per file: every recorded call names the same few)."""
    rel = os.path.relpath(path, _CWD)
    return path if rel.startswith("..") else rel


def def_line(code: types.CodeType) -> int:
    """The line of a function's ``def`` (``co_firstlineno`` is its first decorator's)."""
    for k in range(code.co_firstlineno, code.co_firstlineno + 8):
        if linecache.getline(code.co_filename, k).lstrip().startswith(("def ", "async def ")):
            return k
    return code.co_firstlineno


def site_text(frames: list[Frame]) -> str | None:
    """``rnn.py:19 in _remote_method <- main.py:55 in _run_trainer`` (innermost first)."""
    if not frames:
        return None
    return " <- ".join(f"{display(f)}:{line} in {fn}" for f, line, fn in frames)


def _statement(path: str, line: int) -> ast.stmt | None:
    """The statement that contains ``line`` (it may start up to 8 lines above)."""
    for start in range(line, max(0, line - 8), -1):
        lines = [linecache.getline(path, k) for k in range(start, line + 12)]
        text = "".join(lines)
        indent = len(text) - len(text.lstrip())
        body = "\n".join(ln[indent:] if ln[:indent].isspace() else ln.lstrip()
                         for ln in text.splitlines())
        for end in range(len(body.splitlines()), 0, -1):
            chunk = "\n".join(body.splitlines()[:end])
            try:
                tree = ast.parse(chunk)
            except SyntaxError:
                continue
            if tree.body and tree.body[0].end_lineno is not None and \
                    start + tree.body[0].end_lineno - 1 >= line:
                return tree.body[0]
            break
    return None


_RETURN = "\x00return"


@functools.lru_cache(maxsize=4096)
def _assigned_at(path: str, line: int) -> str | None:
    """What the statement at ``path:line`` assigns to (``_RETURN`` for a ``return``)."""
    stmt = _statement(path, line)
    if isinstance(stmt, ast.Return):
        return _RETURN
    target: ast.expr | None = None
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target = stmt.targets[0]
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        target = stmt.target
    if target is None:
        return None
    return target.id if isinstance(target, ast.Name) else ast.unparse(target)


def result_var(frames: list[Frame], api: str = "rpc_sync") -> str | None:
    """The variable the RPC's result was assigned to, following ``return`` to the caller;
    for ``rpc_async``, the variable its future is waited into (``x = fut.wait()``), when the
    function that holds the future does that."""
    for path, line, _fn in frames:
        var = _assigned_at(path, line)
        if var == _RETURN:
            continue
        if api == "rpc_async" and var is not None:
            return _waited_into(path, line, var) or var
        return var
    return None


@functools.lru_cache(maxsize=1024)
def _waited_into(path: str, line: int, future: str) -> str | None:
    """The name of the first ``name = future.wait()`` after ``path:line`` in the function
    (or module) that holds that line."""
    tree = _module_tree(path)
    if tree is None:
        return None
    scope: ast.AST = tree
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                node.lineno <= line <= (node.end_lineno or node.lineno) and \
                node.lineno > getattr(scope, "lineno", 0):
            scope = node
    waits = [(node.lineno, name) for node, name in _name_assignments(scope)
             if node.lineno > line and _waits(node.value, future)]
    return min(waits)[1] if waits else None


def _waits(value: ast.expr, future: str) -> bool:
    """Whether ``value`` is ``future.wait()``."""
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and \
        value.func.attr == "wait" and isinstance(value.func.value, ast.Name) and \
        value.func.value.id == future


_FUNCTIONS = (types.FunctionType, types.MethodType)


def argument_hint(args: Any) -> Any:
    """What ``func_label`` needs of an RPC's arguments, and nothing more (the call keeps it):
    a first argument that is a function or method, else a second that is a string."""
    if not isinstance(args, (list, tuple)) or not args:
        return None
    if isinstance(args[0], _FUNCTIONS):
        return args[0]
    return args[1] if len(args) > 1 and isinstance(args[1], str) else None


def func_label(func: Any, hint: Any) -> tuple[str, bool]:
    """``(name, builtin)`` of an RPC's function, as the program wrote it (``hint``: the
    ``argument_hint`` of its arguments).

    ``rref.rpc_sync().forward(x)`` calls a torch helper with the method name: that becomes
    ``forward on an RRef``; the tutorials' ``_call_method(EmbeddingTable.forward, ...)`` keeps
    the method it calls: ``_call_method(EmbeddingTable.forward)``.
    """
    name = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)
    module = getattr(func, "__module__", None) or ""
    builtin = isinstance(func, types.BuiltinFunctionType) or module.startswith("torch._ops")
    if module == "torch.distributed.rpc.rref_proxy" and isinstance(hint, str):
        return f"{hint} on an RRef", False
    if builtin and not name.startswith("torch."):
        return f"torch.{getattr(func, '__name__', name)}", True
    if isinstance(hint, _FUNCTIONS):
        return f"{name}({getattr(hint, '__qualname__', hint.__name__)})", builtin
    return name, builtin


def result_functions(value: Any) -> list[Any]:
    """What a call keeps of its result: a tensor's ``grad_fn`` (``message_ids`` ignores one
    that is no ``RecvRpcBackward``), or for a list, tuple or dict the ``recv_functions``."""
    if isinstance(value, torch.Tensor):
        fn = value.grad_fn
        return [] if fn is None else [fn]
    return recv_functions(value)


def recv_functions(value: Any) -> list[Any]:
    """The ``RecvRpcBackward`` functions that produced tensors in ``value``."""
    fns: list[Any] = []
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, torch.Tensor):
            fn = v.grad_fn
            if fn is not None and fn.name().endswith("RecvRpcBackward"):
                fns.append(fn)
        elif isinstance(v, (list, tuple)) and depth < 3:
            stack.extend((x, depth + 1) for x in v)
        elif isinstance(v, dict) and depth < 3:
            stack.extend((x, depth + 1) for x in v.values())
    return fns


def recv_ids(ctx: Any) -> dict[Any, int]:
    """The recv functions of the dist autograd context ``ctx`` (``None``: none) -> their
    message ids."""
    if ctx is None:
        return {}
    return {fn: int(mid) for mid, fn in ctx._recv_functions().items()}


def current_context() -> Any:
    """The calling thread's dist autograd context, or ``None``."""
    try:
        return dist_autograd._current_context()
    except RuntimeError:
        return None


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
    return _rpc_calls(context_id, calls)


def peek(context_id: int) -> list[RpcCall]:
    """This process's calls for ``context_id`` so far, kept for ``take``, and those a thread
    is inside now (``waiting``): ``distviz snapshot`` of a running job."""
    with _LOCK:
        calls = list(_CALLS.get(context_id, []))
    return _rpc_calls(context_id, calls + waiting(context_id, sys._current_frames()))


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
        f: types.FrameType | None = top
        for _ in range(MAX_WALK):
            if f is None:
                break
            if f.f_code is _CALL_CODE:
                out.append((ident, f.f_locals))
            f = f.f_back
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


def _rpc_calls(context_id: int, calls: list[Call]) -> list[RpcCall]:
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
    _QUIET[context_id] = None
    if len(_QUIET) > KEEP_CONTEXTS:     # contexts never left through ``with``
        with _LOCK:
            while len(_QUIET) > KEEP_CONTEXTS:
                del _QUIET[next(iter(_QUIET))]


def drop(context_id: int) -> None:
    """Forget the calls of a context that is not recorded, or has ended."""
    _QUIET.pop(context_id, None)
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
        _QUIET.clear()


def _skipped(context_id: int, gate: Callable[[int], bool] | None) -> bool:
    """Whether an RPC of ``context_id`` goes unnoted: its watched backward ended (``quiet``),
    or ``gate`` says the context is never recorded."""
    return context_id in _QUIET or (gate is not None and not gate(context_id))


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
    current = dist_autograd._current_context

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            ctx = current()
        except RuntimeError:    # no context in this thread
            return orig(*args, **kwargs)
        cid = ctx._context_id()
        if _skipped(cid, gate):
            return orig(*args, **kwargs)
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
_CALL_CODE = next(c for c in wrap_call.__code__.co_consts
                  if isinstance(c, types.CodeType) and c.co_name == "call")


def wrap_to_here(orig: Callable[..., Any],
                 gate: Callable[[int], bool] | None) -> Callable[..., Any]:
    """Wrap ``RRef.to_here``: the fetched value's ``RecvRpcBackward`` is the call's message."""
    def to_here(self: Any, *args: Any, **kwargs: Any) -> Any:
        ctx = current_context()
        cid = None if ctx is None else ctx._context_id()
        if cid is None or _skipped(cid, gate):
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


# -- the Python API's first context: calls made before the wrappers were installed ---------------

_RPC_APIS = ("rpc_sync", "rpc_async", "remote")


@functools.lru_cache(maxsize=256)
def _module_tree(path: str) -> ast.Module | None:
    try:
        return ast.parse("".join(linecache.getlines(path)))
    except (SyntaxError, ValueError):
        return None


def _function_node(code: types.CodeType) -> ast.AST | None:
    """The ``def`` (or the module) whose code ``code`` is, from its file's source."""
    tree = _module_tree(code.co_filename)
    if tree is None or code.co_name == "<module>":
        return tree
    first = def_line(code)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                node.name == code.co_name and node.lineno == first:
            return node
    return None


def _rpc_shape(call: ast.expr) -> tuple[str, str] | None:
    """``(api, func)`` of an RPC written as an expression: ``rpc.rpc_sync(to, mult, ...)``,
    ``rpc.rpc_async(...).wait()``, ``rref.to_here()``; ``None`` for anything else."""
    calls = [n for n in ast.walk(call) if isinstance(n, ast.Call)]
    for node in calls:
        name = node.func.attr if isinstance(node.func, ast.Attribute) else (
            node.func.id if isinstance(node.func, ast.Name) else None)
        if name == "to_here":
            return "to_here", "RRef"
        if name in _RPC_APIS:
            func = node.args[1] if len(node.args) > 1 else next(
                (k.value for k in node.keywords if k.arg == "func"), None)
            return name, ast.unparse(func) if func is not None else "?"
    return None


def _rpc_assignments(code: types.CodeType, upto: int) -> dict[str, tuple[int, str, str]]:
    """``{variable: (line, api, func)}``: the last statement up to line ``upto`` of the
    function of ``code`` that assigns an RPC's result to a plain name."""
    fn = _function_node(code)
    if fn is None:
        return {}
    out: dict[str, tuple[int, str, str]] = {}
    for node, name in _name_assignments(fn):
        shape = _rpc_shape(node.value) if node.lineno <= upto else None
        if shape is not None and node.lineno >= out.get(name, (0, "", ""))[0]:
            out[name] = (node.lineno, *shape)
    return out


def _name_assignments(scope: ast.AST) -> list[tuple[ast.Assign, str]]:
    """Every ``name = ...`` statement of ``scope``'s own body (a function's or a module's; not
    those of the functions, classes and lambdas inside it), with its name."""
    out: list[tuple[ast.Assign, str]] = []
    stack = list(getattr(scope, "body", []))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name):
            out.append((node, node.targets[0].id))
        stack.extend(ast.iter_child_nodes(node))
    return out


def has_calls(context_id: int) -> bool:
    """Whether the wrappers kept any call of ``context_id`` in this process."""
    with _LOCK:
        return bool(_CALLS.get(context_id))


def guess_from_frames(context_id: int, frame: types.FrameType | None, me: str,
                      workers: dict[int, str]) -> int:
    """Keep, as calls of ``context_id``, the RPCs whose results the program's own frames
    still hold, found in their source (``side = rpc.rpc_sync("worker1", mult, ...)``): the
    Python API's first ``distviz.backward`` in a process comes after a forward pass that no
    wrapper saw, and this gives its RPC results the same call sites and variables as
    ``distviz trace`` does; the callee names the messages of the call's arguments
    (``arguments_sent``). ``workers`` names ranks. Returns how many calls it kept."""
    ctx = current_context()
    if ctx is None:
        return 0
    by_fn = recv_ids(ctx)
    me_rank = next((rank for rank, name in workers.items() if name == me), -1)
    kept = frames = 0
    f = frame
    seen: set[int] = set()
    while f is not None and frames < MAX_FRAMES:
        code = f.f_code
        if is_own(code.co_filename):
            frames += 1
            path = os.path.abspath(code.co_filename)
            outer = own_frames(f.f_back, MAX_FRAMES - 1)
            for var, (line, api, func) in sorted(_rpc_assignments(code, f.f_lineno).items()):
                mids = [m for m in recv_ids_by(by_fn, f.f_locals.get(var)) if m not in seen]
                if not mids:
                    continue
                seen.update(mids)
                callee = workers.get(mids[0] >> 48, "?")
                sent = _arguments_of(callee, context_id, mids, me_rank) if callee != "?" else []
                log(context_id, Call(api, callee, func, None, True,
                                     [(path, line, code.co_name), *outer],
                                     sorted(set(mids) | set(sent)), caller=me))
                kept += 1
        f = f.f_back
    return kept


def recv_ids_by(by_fn: dict[Any, int], value: Any) -> list[int]:
    """Message ids of the ``RecvRpcBackward`` (``by_fn``: function -> id) behind the tensors
    in ``value`` (a tensor, or a list or tuple of them)."""
    values = value if isinstance(value, (list, tuple)) else [value]
    return sorted({by_fn[v.grad_fn] for v in values
                   if isinstance(v, torch.Tensor) and v.grad_fn in by_fn})


def _arguments_of(callee: str, context_id: int, results: list[int], caller_rank: int
                  ) -> list[int]:
    """The argument messages of the call whose results came in ``results``, asked of
    ``callee`` (PyTorch's own ``rpc_sync``: a call of distviz's is no call of the program);
    none when it cannot tell."""
    import torch.distributed.rpc as rpc
    call = getattr(rpc.rpc_sync, "__wrapped__", rpc.rpc_sync)
    try:
        return [int(m) for m in call(callee, arguments_sent,
                                     args=(context_id, list(results), caller_rank))]
    except Exception:  # noqa: BLE001 - the call site is still named without them
        return []


def arguments_sent(context_id: int, results: list[int], caller_rank: int) -> list[int]:
    """On the callee: the messages from ``caller_rank`` whose ``RecvRpcBackward`` the sends of
    ``results`` reach in this worker's graph of ``context_id`` (the call's arguments; the walk
    stops at every recv, so a nested call's results are not taken)."""
    ctx = dist_autograd._retrieve_context(context_id)
    sends = ctx._send_functions()
    recv_id = recv_ids(ctx)
    reached = reachable([sends[m] for m in results if m in sends],
                        follow=lambda fn: fn not in recv_id, depth_first=True)
    return sorted({mid for fn in reached if (mid := recv_id.get(fn)) is not None
                   and mid >> 48 == caller_rank})
