"""The cuts of a parameter's path to the loss, seen where the program makes them (torch side).

``install`` runs in a traced process whose ``--contexts`` may record a context (never under
``--contexts none``: this module is not even imported then). What it sets up costs nothing
outside a recorded context:

* ``CutWatch``, a ``TorchFunctionMode``, is pushed on the thread that enters a context
  ``--contexts`` may record (``entered``, from the patched ``dist_autograd.context``) until
  its backward starts or the program leaves it, and on a callee's RPC thread while it runs the
  program's function for such a context (``distviz.tracing.hooks.cut_rpc``: PyTorch's
  ``torch.distributed.rpc.internal._run_function``, which its C++ handler looks up when RPC
  starts; a profile function finds the line that returns an ``nn.Parameter``). It sees every torch function the program calls there
  and notes, with the program's frames (``distviz.frames.own_frames``): ops under
  ``torch.no_grad()`` / ``set_grad_enabled(False)`` / ``inference_mode()`` on tensors that
  require grad (the block's own line: PyTorch's ``_set_grad_enabled`` call is a torch function
  too), ``.detach()``, ``.data``, ``.item()``, ``.tolist()``, ``.numpy()``, the
  ``requires_grad`` setter, a result of an RPC made outside any context (also when an RPC of
  the context sends it: ``callsites.wrappers.INSIDE``), which parameters an op uses with grad
  enabled, and how many such ops use each tensor;
* ``Tensor.requires_grad_(False)`` anywhere (a parameter is usually frozen before training),
  and the program's line that made each parameter (PyTorch's global parameter registration
  hook: ``self.extra = nn.Linear(4, 4)``);
* the results of RPCs made outside any context (``callsites.wrappers.OUTSIDE``), weakly.

A tensor that goes on into the loss anyway is no cut: used by an op with grad enabled (before
or after the cut), a root of the backward, returned by the RPC's function, or computed from a
tensor that has such another use (``h.sum().item()``); nor is a parameter used with grad
enabled elsewhere in the same context. The rest are logged once each (``journal.CUT_SEEN``, at
most ``limits.CUTS_KEPT`` per process) when the context's backward starts, the program leaves
the context, a callee's RPC function returns (cuts of computed tensors: a predicted hang may
stop the program before RPC shuts down), or RPC shuts down.

``explain_missing``, on the owner of parameters that got no gradient
(``distviz.tracing.hooks.optimizer``), reads every process's cuts from the session's log, adds
its own ``never_used`` ones, and says which cut caused each (``distviz.cuts``),
live and in the log (``journal.CUT``). Nothing here ever raises into the program.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import types
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from distviz import limits
from distviz.cuts import Cut, CutKind, Kept, Missing, RpcRef, explain
from distviz.frames import Frame, outwards, own_frames, own_path, site_text
from distviz.tracing.callsites import registry
from distviz.tracing.hooks import cut_sites, dispatch
from distviz.tracing.shared import journal, live, naming, process

_BASE = torch._C.TensorBase
PARAMETER = torch.nn.Parameter
_SET_GRAD = torch._C._set_grad_enabled
_GRAD = torch.is_grad_enabled
_INFERENCE = torch.is_inference_mode_enabled
_TRACING = torch._C._is_tracing
_VALUES: dict[Any, CutKind] = {_BASE.detach: CutKind.DETACH, _BASE.detach_: CutKind.DETACH,
                               _BASE.item: CutKind.ITEM, _BASE.tolist: CutKind.TOLIST,
                               _BASE.numpy: CutKind.NUMPY}
_DATA = _BASE.data
_REQUIRES_GRAD = _BASE.requires_grad
_BLOCK_KINDS = {"no_grad": CutKind.NO_GRAD, "set_grad_enabled": CutKind.SET_GRAD_ENABLED,
                "inference_mode": CutKind.INFERENCE_MODE}
_NOT_OWN: tuple[CutKind, list[Frame]] = (CutKind.NO_GRAD, [])   # a block of torch's own


class Pending:
    """A cut noted and not yet logged: the context it was made in (``None``: outside any),
    the cut tensor's ``grad_fn`` (``None`` for a leaf), the leaves it came from (``(id,
    name)``, named when noted: a module may be gone when the cut is logged), the RPCs it
    came from, whether it came from an RPC's arguments (``upstream``), whether its tensor
    went on into the loss (``continued``)."""

    __slots__ = ("kind", "cid", "frames", "node", "leaves", "behind", "upstream", "served",
                 "continued", "thread")

    def __init__(self, kind: CutKind, cid: int | None, frames: list[Frame], node: Any,
                 leaves: list[tuple[int, str]], behind: list[RpcRef], served: str | None,
                 upstream: bool = False) -> None:
        self.kind, self.cid, self.frames, self.node = kind, cid, frames, node
        self.leaves, self.behind, self.served = leaves, behind, served
        self.upstream, self.continued = upstream, False
        self.thread = threading.get_ident()


class _State(threading.local):
    """A thread's watch: the context it watches, its mode, and the grad-disabling block it
    is in (``(kind, frames)``; ``_NOT_OWN`` for one torch's code entered)."""

    def __init__(self) -> None:
        self.cid: int | None = None
        self.mode: CutWatch | None = None
        self.served: str | None = None
        self.block: tuple[CutKind, list[Frame]] | None = None
        self.returned: Frame | None = None      # where a served function returned a Parameter
        #: how many ops with grad enabled (and roots, results) used each ``grad_fn``'s tensor
        self.consumed: dict[Any, int] = {}


TLS = _State()
LOCK = threading.Lock()
_PENDING: list[Pending] = []
_NODES: dict[Any, Pending] = {}       # pending cuts by their tensor's grad_fn
_SEEN: OrderedDict[int | None, set[int]] = OrderedDict()   # parameters used with grad, by context
_USED: set[int] = set()                # parameters used with grad in any recorded context
OUTSIDE: OrderedDict[int, tuple[weakref.ref[torch.Tensor], RpcRef, list[Frame]]] = OrderedDict()
_KEPT = Kept(limits.CUTS_KEPT)
#: the program's line that made each parameter (``self.extra = nn.Linear(4, 4)``), by its id
#: while it lives (a weak dictionary of tensors would compare them with ``==``)
_LINES: dict[int, tuple[str, int]] = {}
_INSTALLED: list[bool] = []
#: this process's own contexts watched so far (at most ``limits.CUT_WATCHED_CONTEXTS``)
_WATCHED: set[int] = set()


def _forget() -> None:
    _PENDING.clear()
    _NODES.clear()
    _SEEN.clear()
    _USED.clear()
    OUTSIDE.clear()
    _KEPT.cuts.clear()
    _WATCHED.clear()


os.register_at_fork(after_in_child=_forget)


class CutWatch(TorchFunctionMode):
    """Sees the torch functions a recorded context's thread calls (see the module
    docstring); each call goes on to PyTorch exactly as it was made."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        if _TRACING():     # a trace begun in a way ``_untraced`` did not see
            return func(*args, **(kwargs or {}))
        try:
            _see(func, args)
        except Exception:  # noqa: BLE001, S110 - never break the program's op
            pass
        out = func(*args, **(kwargs or {}))
        try:
            if _GRAD() and type(func).__name__ != "method-wrapper" and _differentiable(out):
                _used(args)
        except Exception:  # noqa: BLE001, S110 - never break the program's op
            pass
        return out


def _differentiable(out: Any) -> bool:
    """Whether an op's result is on autograd's way (its inputs go on into it): reading an
    attribute or a size is no use of a tensor."""
    if isinstance(out, (list, tuple)) and out:
        out = out[0]
    return isinstance(out, torch.Tensor) and out.grad_fn is not None


def tensors(args: Iterable[Any]) -> Iterable[torch.Tensor]:
    for a in args:
        if isinstance(a, torch.Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            for b in a:
                if isinstance(b, torch.Tensor):
                    yield b


def _see(func: Any, args: Any) -> None:
    if func is _SET_GRAD:
        _switch(bool(args[0]) if args else True)
        return
    kind = _VALUES.get(func)
    if kind is None and type(func).__name__ == "method-wrapper":
        owner = getattr(func, "__self__", None)
        if owner is _DATA and func.__name__ == "__get__":
            kind = CutKind.DATA
        elif owner is _REQUIRES_GRAD and func.__name__ == "__set__" and len(args) > 1 \
                and not args[1]:
            kind = CutKind.REQUIRES_GRAD_FALSE
        else:
            return      # reading or setting an attribute (``t.grad_fn``) is no op: distviz's
            # own code reads them, some of it under locks the notes below take
    if kind is not None:    # the program's own call only: RPC's pickler reads a
        t = args[0] if args else None   # Parameter's ``.data`` to send it, which is no cut
        caller = sys._getframe(2)       # (the op's caller: ``_see`` <- ``__torch_function__``)
        if isinstance(t, torch.Tensor) and t.requires_grad and \
                own_path(caller.f_code.co_filename):
            _note(kind, t, own_frames(caller))
        return
    if not _GRAD():
        _under_block(args)


def _switch(enabled: bool) -> None:
    """PyTorch's ``_set_grad_enabled``: entering a grad-disabling block notes where."""
    if enabled:
        TLS.block = None
        return
    if not _GRAD() and TLS.block is not None:
        return      # nested: the outer block stays
    frame = sys._getframe(1)
    names = [f.f_code.co_qualname for f in outwards(frame, 8)]
    word = "no_grad" if any(n.startswith("no_grad.") for n in names) else (
        "set_grad_enabled" if any(n.startswith("set_grad_enabled.") for n in names)
        else "no_grad")
    frames = own_frames(frame)
    TLS.block = (_BLOCK_KINDS[word], frames) if frames else _NOT_OWN


def _under_block(args: Any) -> None:
    """An op with grad disabled: its inputs that require grad are cut there."""
    cut = [t for t in tensors(args) if t.requires_grad]
    if not cut:
        return
    block = TLS.block
    if block is _NOT_OWN:
        return
    if block is None:       # entered before the watch began, or inference mode
        frames = own_frames(sys._getframe(1))
        if not frames:
            return
        found = cut_sites.grad_block(frames[0][0], frames[0][1])
        word = found[1] if found is not None else ("inference_mode" if _INFERENCE()
                                                    else "no_grad")
        if found is not None:
            frames = [(frames[0][0], found[0], frames[0][2]), *frames[1:]]
        block = TLS.block = (_BLOCK_KINDS[word], frames)
    for t in cut:
        _note(block[0], t, block[1])


def _used(args: Any) -> None:
    """An op with grad enabled whose result is on autograd's way: the parameters it uses,
    how many such ops use each tensor, and a result of an RPC made outside any context."""
    cid = TLS.cid
    for t in tensors(args):
        if type(t) is PARAMETER and t.requires_grad:
            i = id(t)
            if i not in _USED:
                _USED.add(i)
            seen = _SEEN.get(cid)
            if seen is None:
                seen = _seen(cid)
            seen.add(i)
        fn = t.grad_fn
        if fn is not None:
            consumed = TLS.consumed
            consumed[fn] = consumed.get(fn, 0) + 1
        if OUTSIDE and id(t) in OUTSIDE:
            outside_used(t)


def outside_used(t: torch.Tensor) -> None:
    """``t``, a result of an RPC made outside any context, is used in a watched one."""
    ref, rpc, frames = OUTSIDE[id(t)]
    if ref() is t:
        add(Pending(CutKind.OUTSIDE_CONTEXT, TLS.cid, frames, None, [], [rpc], TLS.served))


def _seen(cid: int | None) -> set[int]:
    with LOCK:
        seen = _SEEN.setdefault(cid, set())
        while len(_SEEN) > limits.CUT_CONTEXTS_KEPT:
            _SEEN.popitem(last=False)
    return seen


def _note(kind: CutKind, t: torch.Tensor, frames: list[Frame]) -> None:
    """A cut of ``t`` at ``frames`` (none: torch's own code, not the program's)."""
    if not frames or len(_PENDING) >= limits.CUTS_KEPT:
        return
    fn = t.grad_fn
    if fn is not None and fn in _NODES:
        return          # the same tensor cut again
    leaves, recvs = _walk(fn) if fn is not None else ([t], [])
    cid = TLS.cid
    behind = _rpcs(cid, recvs)
    add(Pending(kind, cid, frames, fn, named(leaves), behind, TLS.served,
                  upstream=len(behind) < len(recvs)))


def named(leaves: Sequence[torch.Tensor]) -> list[tuple[int, str]]:
    """``(id, name)`` of the parameters among ``leaves``, as distviz names leaves."""
    params = [t for t in leaves if isinstance(t, PARAMETER)]
    if not params:
        return []
    proc = process.PROCESS
    worker = (proc.worker if proc is not None else None) or "?"
    names = {id(p): n for p, n in naming.parameter_names(worker, sys._getframe(0))}
    return [(id(p), names[id(p)]) for p in params if id(p) in names]


def add(p: Pending) -> None:
    with LOCK:
        if len(_PENDING) >= limits.CUTS_KEPT:
            return
        _PENDING.append(p)
        if p.node is not None:
            _NODES[p.node] = p


def _walk(root: Any) -> tuple[list[torch.Tensor], list[Any]]:
    """The leaves and the ``RecvRpcBackward`` nodes ``root`` came from (iterative, at most
    ``limits.CUT_WALK`` nodes)."""
    leaves: list[torch.Tensor] = []
    recvs: list[Any] = []
    seen: set[Any] = set()
    todo = [root]
    while todo and len(seen) < limits.CUT_WALK:
        fn = todo.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        if fn.name().endswith("RecvRpcBackward"):
            recvs.append(fn)
            continue
        variable = getattr(fn, "variable", None)
        if isinstance(variable, torch.Tensor):
            leaves.append(variable)
        todo.extend(nxt for nxt, _ in fn.next_functions)
    return leaves, recvs


def _rpcs(cid: int | None, recvs: list[Any]) -> list[RpcRef]:
    """The RPCs (noted by ``callsites``) whose results are ``recvs``, one per recv it made
    (the rest came from the arguments of an RPC this process serves)."""
    if cid is None or not recvs:
        return []
    out: list[RpcRef] = []
    for c in registry.calls_of(cid):
        c.resolve()
        for r in recvs:
            if r in c.recvs:
                out.append(RpcRef(c.api, c.label()[0], c.callee_name(), site_text(c.frames)))
    return out


# -- where the watch starts and ends ------------------------------------------------------------

def start(cid: int, served: str | None) -> bool:
    if TLS.mode is not None:
        return False
    mode = CutWatch()
    mode.__enter__()
    TLS.cid, TLS.mode, TLS.served, TLS.block = cid, mode, served, None
    TLS.consumed = {}
    return True


def consume(values: Iterable[Any]) -> None:
    """The tensors of ``values`` go on into the loss (a backward's roots, an RPC function's
    result)."""
    consumed = TLS.consumed
    for t in tensors(values):
        if t.grad_fn is not None:
            consumed[t.grad_fn] = consumed.get(t.grad_fn, 0) + 1


def _settle() -> None:
    """The watch of this thread ends: each of its pending cuts whose tensor went on into the
    loss anyway is no cut: the tensor was used with grad enabled (before or after the cut),
    or the tensor it was computed from has another use (``h.sum().item()`` of an ``h`` the
    loss uses)."""
    consumed, me = TLS.consumed, threading.get_ident()
    for p in list(_PENDING):
        if p.thread != me or p.node is None:
            continue
        if consumed.get(p.node, 0) >= 1 or any(
                n is not None and consumed.get(n, 0) >= 2 for n, _ in p.node.next_functions):
            p.continued = True
    TLS.consumed = {}


def stop() -> None:
    mode = TLS.mode
    if mode is None:
        return
    _settle()
    TLS.mode, TLS.served, TLS.block = None, None, None
    stack = torch.overrides._get_current_function_mode_stack()
    if stack and stack[-1] is mode:     # a mode the program pushed after ours stays
        mode.__exit__(None, None, None)


def entered(context_id: int) -> None:
    """The program entered ``with dist_autograd.context()`` (this thread)."""
    proc = process.PROCESS
    if proc is None or not proc.may_record(context_id):
        return
    if context_id not in _WATCHED:
        if len(_WATCHED) >= limits.CUT_WATCHED_CONTEXTS:
            return
        _WATCHED.add(context_id)
    guarded(start, context_id, None)


def watched(context_id: int) -> bool:
    """Whether this process watches its own context ``context_id`` for cuts."""
    return context_id in _WATCHED


def left(context_id: int) -> None:
    """The program leaves the context: the watch ends, its cuts are logged."""
    if TLS.cid == context_id:
        guarded(stop)
    flush()


def backward_starts(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """A ``dist_autograd.backward`` starts in this thread: its roots go on into the loss, the
    watch ends (distviz's own work follows), and the context's cuts are logged."""
    if TLS.mode is None:
        return
    roots = args[1] if len(args) > 1 else kwargs.get("roots")
    consume(roots if isinstance(roots, (list, tuple)) else ())
    guarded(stop)
    flush()


def _requires_grad_(original: Callable[..., Any]) -> Callable[..., Any]:
    def requires_grad_(self: Any, requires_grad: bool = True) -> Any:
        if not requires_grad and isinstance(self, PARAMETER) and self.requires_grad:
            guarded(_frozen, self, sys._getframe(1))
        return original(self, requires_grad)
    requires_grad_.__wrapped__ = original  # type: ignore[attr-defined]
    requires_grad_.__doc__ = original.__doc__
    return requires_grad_


def _frozen(p: torch.Tensor, frame: types.FrameType) -> None:
    frames = own_frames(frame)
    if frames:
        add(Pending(CutKind.REQUIRES_GRAD_FALSE, TLS.cid, frames, None, named([p]), [],
                      TLS.served))


# -- logging and explaining ---------------------------------------------------------------------

def flush() -> None:
    """Log the pending cuts that still cut (see the module docstring); forget the rest."""
    guarded(log_pending)


def log_pending(thread: int | None = None) -> None:
    """``flush``; with ``thread``, only the cuts of computed tensors that thread made (a
    callee's, as its RPC returns: a hang may stop the program before RPC shuts down); the
    cuts of parameters wait for the whole context."""
    with LOCK:
        if thread is None:
            mine, _PENDING[:] = list(_PENDING), []
            _NODES.clear()
        else:
            mine = [p for p in _PENDING if p.node is not None and p.thread == thread]
            _PENDING[:] = [p for p in _PENDING if p not in mine]
            for p in mine:
                _NODES.pop(p.node, None)
        pending = [p for p in mine if not p.continued]
    proc = process.PROCESS
    if not pending or proc is None:
        return
    worker = proc.worker or "?"
    for p in pending:
        leaves = p.leaves
        if p.node is None:      # a leaf cut: not if it was used with grad in the context
            seen = _SEEN.get(p.cid, set()) if p.cid is not None else _USED
            leaves = [(i, n) for i, n in leaves if i not in seen]
            if not leaves and p.leaves:
                continue
        named = tuple(dict.fromkeys(worker + n[1:] if n.startswith("?.") else n
                                    for _, n in leaves))
        if not named and not p.behind and not p.upstream:
            continue
        f = p.frames[0]
        cut = Cut(kind=p.kind, worker=worker, site=site_text(p.frames) or "", file=f[0],
                  line=f[1], leaves=named, behind=tuple(dict.fromkeys(p.behind)),
                  upstream=p.upstream, served=p.served, context_id=p.cid)
        if _KEPT.add(cut):
            journal.append(proc.config.session_dir, journal.Event(
                kind=journal.CUT_SEEN, pid=os.getpid(), worker=worker, cut=cut))


def _never_used(params: list[tuple[str, torch.Tensor | None]], worker: str) -> list[Cut]:
    """The owner's ``never_used`` cuts, one per line that made a layer: parameters that no op
    of a recorded context used, where this process used some other parameter in one (else it
    cannot tell)."""
    if not _USED:
        return []
    by_site: dict[tuple[str, str, int], list[str]] = {}
    for name, p in params:
        if p is None or id(p) in _USED or not p.requires_grad:
            continue
        where = _LINES.get(id(p))
        site = _display(f"{where[0]}:{where[1]}") if where else name.rsplit(".", 1)[0]
        by_site.setdefault((site, *(where or ("", 0))), []).append(name)
    return [Cut(kind=CutKind.NEVER_USED, worker=worker, site=site, file=file, line=line,
                leaves=tuple(names)) for (site, file, line), names in by_site.items()]


def _display(site: str) -> str:
    from distviz.frames import display

    path, _, line = site.rpartition(":")
    return f"{display(path)}:{line}" if path and line.isdigit() else site


def _on_parameter(module: Any, name: str, param: Any) -> None:
    """PyTorch's global parameter registration hook: the program's line that made it."""
    if isinstance(param, torch.Tensor) and id(param) not in _LINES:
        frames = own_frames(sys._getframe(1), 1)
        if frames:
            key = id(param)
            _LINES[key] = (frames[0][0], frames[0][1])
            weakref.finalize(param, _LINES.pop, key, None)


def explain_missing(params: list[tuple[str, torch.Tensor | None]]) -> None:
    """Say which cut caused each of ``params`` (``(name, parameter)``, this worker's, that got
    no gradient) to get none: live, and in the session's log."""
    guarded(_explain, params)


def _explain(params: list[tuple[str, torch.Tensor | None]]) -> None:
    proc = process.PROCESS
    if proc is None or not params:
        return
    log_pending()
    worker = proc.worker or "?"
    events = journal.read(proc.config.session_dir) if proc.config.session_dir else []
    cuts = [ev.cut for ev in events if ev.kind == journal.CUT_SEEN and ev.cut is not None]
    if not proc.config.session_dir:
        cuts = list(_KEPT.cuts)
    cuts += _never_used(params, worker)
    missing = [Missing(name, worker) for name, _ in params]
    for e in explain(missing, cuts):
        text = e.text() if e.cut is not None else ""
        if text:
            live.say(f"{worker}: {text}")
        journal.append(proc.config.session_dir, journal.Event(
            kind=journal.CUT, pid=os.getpid(), worker=worker, message=text, explained=e))


def guarded(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - the program goes on regardless
        live.say(f"cuts: {type(exc).__name__}: {exc}")
        return None


def _untraced(original: Callable[..., Any]) -> Callable[..., Any]:
    """``torch.jit.trace``: the thread's watch ends first (the tracer would record the watch's
    own line as each op's source)."""
    def trace(*args: Any, **kwargs: Any) -> Any:
        if TLS.mode is not None:
            guarded(stop)
        return original(*args, **kwargs)
    trace.__wrapped__ = original  # type: ignore[attr-defined]
    trace.__doc__ = original.__doc__
    return trace


def install() -> None:
    """Set up the hooks of the module docstring (once per process)."""
    if _INSTALLED:
        return
    _INSTALLED.append(True)
    torch.Tensor.requires_grad_ = _requires_grad_(torch.Tensor.requires_grad_)  # type: ignore[method-assign]
    torch.jit.trace = _untraced(torch.jit.trace)
    from torch.nn.modules import module as nn_module
    nn_module.register_module_parameter_registration_hook(
        lambda *a: guarded(_on_parameter, *a))
    dispatch.STARTS.append(lambda *a: guarded(backward_starts, *a))
    atexit.register(guarded, flush)
