"""``RRef.backward`` in a traced process (torch side): the distributed backward that starts on
the RRef's owner.

PyTorch (``torch/csrc/distributed/rpc/py_rref.cpp``): ``rref.backward(context_id,
retain_graph)`` on the RRef's OWNER takes its value (a tensor, else "RRef should contain a
tensor for .backward()") and calls the C++ ``dist_autograd::backward(context_id, [value],
retain_graph)``, or with ``context_id`` -1 a local ``torch::autograd::backward``. From any
OTHER worker (where -1 is refused) it sends an ``RRefBackwardReq`` to the owner, whose RPC
thread runs the same in C++ and answers. Neither passes ``dist_autograd.backward`` in Python,
so ``install`` patches the method itself: ``torch.distributed.rpc.PyRRef.backward`` (the
pybind class ``rpc.remote`` returns; ``rpc.RRef`` subclasses it and calls it through
``super()``, so both are covered).

* On the owner, a context id and a tensor value: the call goes the way
  ``dist_autograd.backward(context_id, [value], retain_graph=...)`` goes from the caller's line
  (``dispatch.backward_at``): recorded in full or watched, counted as that context's backward
  here, the call site and the variables the caller's.
* From another worker, a context id: ``on_owner`` runs on the owner through an RPC of
  distviz's own (PyTorch's ``rpc_sync`` as it was before distviz wrapped it, so it is no call
  of the program's), with the caller's call site and the caller's variable name of the RRef
  (``CallerSite``), and takes the same way there: the owner is the initiator, the caller's
  line the call site. What PyTorch's backward raises there comes back as its text and is
  raised as the ``RuntimeError`` PyTorch's ``RRefBackwardReq`` raises. The RPC waits as long
  as PyTorch's request would (the agent's default time-out).
* Everything else (context id -1, arguments PyTorch would reject, a value that is not a tensor
  or an RRef whose remote call failed, no traced process) goes to PyTorch's own method
  unchanged, arguments as given.
"""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Callable
from typing import Any, NamedTuple, cast

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
import torch.distributed.rpc.api as rpc_api

from distviz.frames import is_own, own_frames
from distviz.recorder.contexts import context_here
from distviz.tracing import callsites
from distviz.tracing.hooks import dispatch, observe_args
from distviz.tracing.shared import naming, process, stop

_PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep
_ORIGINAL: list[Callable[..., Any]] = []    # PyTorch's ``PyRRef.backward``, once installed


class Reply(NamedTuple):
    """What ``on_owner`` answers: whether the backward ran there (``False``: the value is not a
    tensor, or the RRef's remote call failed, and the caller calls PyTorch's method, which
    raises what it raises, before any backward ran), the text of what it raised, and whether
    that was distviz's ``HangPredicted`` (the Python API's predicted hang: the caller raises
    it as a ``dist_autograd.backward`` of its own would)."""

    ran: bool
    error: str | None = None
    hang: bool = False


class Args(NamedTuple):
    """An ``RRef.backward`` call distviz routes: its arguments as PyTorch reads them."""

    context_id: int
    retain_graph: bool


class CallerSite(NamedTuple):
    """Where a worker called ``RRef.backward`` on an RRef another worker owns: its program's
    own frames, innermost first (file, line, function), and its variable for the RRef. (Tuples
    and plain classes here: every traced process loads this module, and a dataclass costs a
    millisecond to make.)"""

    frames: list[callsites.Frame]
    variable: str | None = None


class _Code(NamedTuple):
    """What is read of a frame's code: its file, function, and first line (unknown on the
    owner: the caller's line stands for it, so no ``def`` is found there and the Python API's
    guess of RPC results from the source finds none in a caller's frame)."""

    co_filename: str
    co_name: str
    co_firstlineno: int


class _Frame:
    """A stand-in for the caller's frame on the owner: what ``frames.own_frames`` and
    ``naming.own_variables`` read of a frame (the RRef's variable names the owner's value):
    ``f_code`` (a ``_Code``, or the program's own code object), ``f_lineno``, ``f_locals`` and
    ``f_back`` (a stand-in, the program's real frame, or None)."""

    __slots__ = ("f_code", "f_lineno", "f_locals", "f_back")

    def __init__(self, f_code: Any, f_lineno: int, f_locals: dict[str, Any], f_back: Any) -> None:
        self.f_code, self.f_lineno, self.f_locals, self.f_back = f_code, f_lineno, f_locals, f_back


def is_rref(value: Any) -> bool:
    """Whether ``value`` is an RRef (``rpc.RRef`` or the ``PyRRef`` ``rpc.remote`` returns)."""
    return isinstance(value, rpc.PyRRef)


def pytorch_rpc_sync() -> Callable[..., Any]:
    """PyTorch's ``rpc_sync``, not distviz's wrapper (an RPC of distviz's own is no call of
    the program's, and notes no call site)."""
    sync = rpc_api.rpc_sync
    return cast(Callable[..., Any], getattr(sync, "__wrapped__", sync))


def parse(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Args | None:
    """``(dist_autograd_ctx_id, retain_graph)`` when they are an ``int`` other than -1 and a
    ``bool``, as PyTorch's binding names them; ``None`` for any other call (PyTorch's own)."""
    names = ("dist_autograd_ctx_id", "retain_graph")
    if len(args) > 2 or set(kwargs) - set(names[len(args):]):
        return None
    bound = dict(zip(names, args, strict=False)) | kwargs
    cid, retain = bound.get("dist_autograd_ctx_id", -1), bound.get("retain_graph", False)
    if type(cid) is not int or cid == -1 or type(retain) is not bool:
        return None
    return Args(cid, retain)


def rref_variable(frame: types.FrameType | None, rref: Any) -> str | None:
    """The program's variable that holds ``rref`` in its own frames from ``frame``."""
    return next((name for name, value in naming.own_variables(frame) if value is rref), None)


def stand_in(site: CallerSite, value: torch.Tensor) -> types.FrameType | None:
    """A frame-like chain of ``site``'s frames whose innermost holds ``value`` under the
    caller's variable for the RRef (read as a frame by the recording and the watch)."""
    out: _Frame | None = None
    for k, (path, line, function) in reversed(list(enumerate(site.frames))):
        local = {site.variable: value} if k == 0 and site.variable else {}
        out = _Frame(_Code(path, function, line), line, local, out)
    return cast(types.FrameType | None, out)


def with_variable(frame: types.FrameType | None, rref: Any, value: torch.Tensor
                  ) -> types.FrameType | None:
    """``frame`` as the owner's own call reads it: its innermost frame of the program's own
    also names ``value`` by the program's variable for ``rref`` (as a caller on another
    worker's does), after the program's own variables."""
    f = frame
    while f is not None and not is_own(f.f_code.co_filename):
        f = f.f_back
    variable = rref_variable(f, rref)
    if f is None or variable is None:
        return frame
    return cast(types.FrameType, _Frame(f.f_code, f.f_lineno or 0,
                                        {**f.f_locals, variable: value}, f.f_back))


def _local_tensor(rref: Any) -> torch.Tensor | None:
    """The owner's value when it is a tensor (``local_value`` waits for it, as PyTorch's
    owner does); ``None`` when it is not, or the remote call failed."""
    try:
        value = rref.local_value()
    except Exception:  # noqa: BLE001 - PyTorch's own path says it as PyTorch does
        return None
    return value if isinstance(value, torch.Tensor) else None


def _backward(frame: types.FrameType | None, call: Args, root: torch.Tensor) -> None:
    """``dist_autograd.backward(context_id, [root], retain_graph)`` from ``frame``: the
    traced path when it is distviz's (``distviz trace``, the pytest plugin), else what the
    module holds now (the Python API's observed backward, or PyTorch's)."""
    current = dist_autograd.backward
    if current is dispatch.traced_backward:
        dispatch.backward_at(frame, (call.context_id, [root], call.retain_graph), {},
                             observe_args.RREF_BACKWARD)
    else:
        current(call.context_id, [root], retain_graph=call.retain_graph)


def on_owner(rref: Any, context_id: int, retain_graph: bool, site: CallerSite) -> Reply:
    """Run on the RRef's owner for a caller on another worker: the backward of its value,
    from the caller's site (see ``Reply``)."""
    root = _local_tensor(rref)
    if root is None:
        return Reply(ran=False)
    _sweep()
    try:
        _backward(stand_in(site, root), Args(context_id, retain_graph), root)
    except Exception as exc:  # noqa: BLE001 - the caller raises it as PyTorch would
        return Reply(ran=True, error=str(exc), hang=isinstance(exc, stop.HangPredicted))
    return Reply(ran=True)


def _sweep() -> None:
    """Let go of what was kept for the later passes of contexts recorded here for callers on
    other workers that PyTorch has released since (the program leaves those contexts in
    another process, so ``dispatch.context_ended`` is not called here when it does)."""
    proc = process.PROCESS
    if proc is None:
        return
    for cid in [c for c in list(proc.runs) + list(proc.ended) if not context_here(c)]:
        dispatch.context_ended(cid)


def without_own_frames(tb: types.TracebackType | None) -> types.TracebackType | None:
    """``tb`` without distviz's frames (PyTorch raises from C++: the program's traceback
    holds none of them), the others linked as they were."""
    kept: list[types.TracebackType] = []
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(_PACKAGE):
            kept.append(tb)
        tb = tb.tb_next
    for k, entry in enumerate(kept):
        entry.tb_next = kept[k + 1] if k + 1 < len(kept) else None
    return kept[0] if kept else None


def routed_error(reply: Reply) -> RuntimeError:
    """What the caller raises for the owner's error: PyTorch's ``RRefBackwardReq`` raises
    its text as a ``RuntimeError``; a predicted hang is the ``HangPredicted`` that
    ``dist_autograd.backward`` raises under the Python API."""
    kind = stop.HangPredicted if reply.hang else RuntimeError
    return kind(reply.error)


def _routed(original: Callable[..., Any]) -> Callable[..., Any]:
    def backward(self: Any, *args: Any, **kwargs: Any) -> None:
        call = parse(args, kwargs)
        if call is None or process.PROCESS is None:
            return original(self, *args, **kwargs)
        frame = sys._getframe(1)
        try:
            if self.is_owner():
                root = _local_tensor(self)
                if root is None:
                    return original(self, *args, **kwargs)
                _backward(with_variable(frame, self, root), call, root)
                return None
            site = CallerSite(own_frames(frame), rref_variable(frame, self))
            reply = pytorch_rpc_sync()(self.owner(), on_owner,
                                       args=(self, call.context_id, call.retain_graph, site))
            if not reply.ran:
                return original(self, *args, **kwargs)
            if reply.error is not None:
                raise routed_error(reply)
            return None
        except Exception as exc:
            # the one frame left is this line's: an exception leaving a Python function
            # always names it (only a C++ method such as PyTorch's raises without one)
            raise exc.with_traceback(without_own_frames(exc.__traceback__))  # noqa: B904
    backward.__wrapped__ = original    # type: ignore[attr-defined]
    backward.__name__ = "backward"
    backward.__doc__ = getattr(original, "__doc__", None)
    return backward


def install() -> None:
    """Route ``RRef.backward`` (once per process); see the module docstring."""
    if _ORIGINAL:
        return
    current = getattr(rpc.PyRRef, "backward")  # noqa: B009 - typeshed lacks it
    _ORIGINAL.append(current)
    setattr(rpc.PyRRef, "backward", _routed(current))  # noqa: B010 - a method of a C++ class
