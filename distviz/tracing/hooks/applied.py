"""Gradients a distributed backward left in its context that a local ``torch.optim``
optimizer never applies (torch side).

``dist_autograd.backward`` never fills ``.grad``: each owner's gradients stay in the context
(``dist_autograd.get_gradients(context_id)``), which only ``DistributedOptimizer`` (or a program
that copies them into ``.grad``) applies. A local optimizer's ``step()`` after a distributed
backward steps with ``.grad``: ``None`` (PyTorch's SGD skips the parameter) or whatever an
earlier local backward left there, so the model never trains, with no error anywhere.

* ``seen(context_id)``: a context met in this process: one the program entered
  (``patches._context_enter``), or, once the process has made a ``torch.optim`` optimizer
  (``Optimizer.__init__``, wrapped), one an RPC function runs in on its callee (``serve``:
  PyTorch's ``_run_function``, through which every Python function an RPC calls runs, with
  the caller's context current when the call carries autograd). The context ids are kept in
  a short list (``limits.APPLIED_CONTEXTS``); the first one arms PyTorch's global optimizer
  step hooks (``torch.optim.Optimizer``: every subclass): a process that never meets a
  context runs none.
* ``pre_step``, before each ``step()`` of a ``torch.optim`` optimizer: the contexts still alive
  that were met here (and the calling thread's current one) give their gradients; a parameter
  of the optimizer the context holds a gradient for, whose ``.grad`` is ``None``, or unchanged
  since the optimizer's previous step (the same tensor at the same version: nothing wrote it),
  is never applied. Its step is named once per call site and process with the program's line,
  the parameters (as distviz names leaves) and the fix, live and in the session's log
  (``journal.NOT_APPLIED``). A program that copies ``get_gradients`` into ``.grad``, or runs a
  local ``loss.backward()`` that writes it, changes ``.grad`` before each step: no note.
* A parameter of an optimizer that stepped while a context lived, and that no context ever
  held a gradient for, is named by ``report`` (``journal.NO_GRADIENT``) after ``rpc.shutdown``
  and at exit, as ``distviz.tracing.hooks.optimizer`` names a ``DistributedOptimizer``'s.
  (All-zero gradients are said from a recorded context's trace, with the RPC output that
  caused them: ``distviz.tracing.recording.report.zero_notes``.)
* ``leaving(context_id)``, when the program leaves a context after this process has stepped a
  local optimizer: the parameters the context held gradients for, and their ``.grad`` then, so
  a ``step()`` after the ``with`` block (the gradients gone with the context) is told too.

The pure part, what one step finds, is ``distviz.tracing.shared.applied_facts``. The program's
step runs as it was called: distviz's part never raises into it.
"""

from __future__ import annotations

import atexit
import functools
import os
import sys
import threading
import types
import weakref
from collections import deque
from typing import Any

import torch
import torch.distributed.autograd as dist_autograd

from distviz.frames import outwards, own_frames, site_text
from distviz.limits import APPLIED_CONTEXTS
from distviz.tracing.shared import applied_facts as facts
from distviz.tracing.shared import journal, live, naming, process
from distviz.tracing.snapshot import listener as snapshot_listener
from distviz.words import context_label

_RECENT: deque[int] = deque(maxlen=APPLIED_CONTEXTS)
_HANDLES: list[Any] = []
_LOCK = threading.Lock()
#: A parameter's ``.grad`` as kept between steps: the tensor, weakly (a freed one's address
#: may be reused by the next), and its version; ``None`` without one.
Kept = tuple[weakref.ref[torch.Tensor], int] | None
#: per optimizer: each parameter's ``.grad`` after its last step
_AFTER: weakref.WeakKeyDictionary[Any, dict[int, Kept]] = weakref.WeakKeyDictionary()
#: parameters a context that ended held a gradient for: id -> (ref, .grad then, context)
_ENDED: dict[int, tuple[weakref.ref[torch.Tensor], Kept, int]] = {}
_SAID: set[tuple[Any, ...]] = set()
_TALLY = facts.Tally()
_STEPPED = [False]
_WATCHING = [False]     # a torch.optim optimizer was made in this process
_DIST_OPTIM = os.path.join("distributed", "optim", "optimizer.py")


def _kept(p: torch.Tensor) -> Kept:
    g = p.grad
    return None if g is None else (weakref.ref(g), int(g._version))


def _key(kept: Kept) -> facts.GradKey:
    """The ``GradKey`` of a kept ``.grad``: ``facts.GONE`` when that tensor was freed (it is
    not the ``.grad`` now, whatever tensor took its address)."""
    if kept is None:
        return None
    g = kept[0]()
    return facts.GONE if g is None else (id(g), kept[1])


def _forget() -> None:
    _RECENT.clear()
    _AFTER.clear()
    _ENDED.clear()
    _SAID.clear()
    _TALLY.clear()
    _STEPPED[0] = False


os.register_at_fork(after_in_child=_forget)


# -- contexts met in this process ---------------------------------------------------------------

def seen(context_id: int) -> None:
    """Keep ``context_id`` among the recent contexts; the first one arms the step hooks."""
    if context_id not in _RECENT:
        with _LOCK:     # RPC threads of their own serve the calls
            if context_id not in _RECENT:
                _RECENT.append(context_id)
    if not _HANDLES:
        _arm()


def _arm() -> None:
    from torch.optim import optimizer as optim_module

    with _LOCK:
        if _HANDLES:
            return
        _HANDLES.append(optim_module.register_optimizer_step_pre_hook(pre_step))
        _HANDLES.append(optim_module.register_optimizer_step_post_hook(post_step))
        atexit.register(report)


def serve(original: Any) -> Any:
    """PyTorch's ``rpc.internal._run_function`` that notes the context an RPC function runs
    in on its callee (``seen``), once this process has made a ``torch.optim`` optimizer
    (before that a served call costs one list lookup: reading the current context of a call
    that has none raises, which costs tens of microseconds)."""
    current = dist_autograd._current_context

    def _run_function(python_udf: Any) -> Any:
        result = original(python_udf)
        if _WATCHING[0]:
            try:
                cid = current()._context_id()
            except RuntimeError:    # no context: a call without autograd
                return result
            seen(int(cid))
        return result
    _run_function.__wrapped__ = original    # type: ignore[attr-defined]
    _run_function.__doc__ = original.__doc__
    return _run_function


def _watching(original: Any) -> Any:
    """``torch.optim.Optimizer.__init__`` that starts the served calls' watch (``serve``)."""
    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        _WATCHING[0] = True
        original(self, *args, **kwargs)
    return __init__


def install() -> None:
    """Wrap ``_run_function`` (once; PyTorch's RPC handler looks it up when RPC starts) and
    ``torch.optim.Optimizer.__init__`` (every subclass calls it)."""
    from torch.distributed.rpc import internal

    if not hasattr(internal._run_function, "__wrapped__"):
        internal._run_function = serve(internal._run_function)
    cls = torch.optim.Optimizer
    if not hasattr(cls.__init__, "__wrapped__"):
        cls.__init__ = _watching(cls.__init__)  # type: ignore[method-assign]


def leaving(context_id: int) -> None:
    """The program leaves ``context_id`` (its gradients go with it): keep, for the parameters
    it held gradients for, their ``.grad`` now (only once a local optimizer stepped here)."""
    if not _STEPPED[0]:
        return
    try:
        grads = dist_autograd.get_gradients(int(context_id))
    except RuntimeError:
        return
    with _LOCK:
        for t in grads:
            _ENDED[id(t)] = (weakref.ref(t), _kept(t), int(context_id))


def _candidates() -> list[int]:
    with _LOCK:
        out = list(_RECENT)
    out.extend(c for c in snapshot_listener.OPEN if c not in out)
    try:
        cid = int(dist_autograd._current_context()._context_id())
    except RuntimeError:
        return out
    if cid not in out:
        out.append(cid)
    return out


def _held(candidates: list[int]) -> tuple[dict[int, facts.Held], bool]:
    """What the live candidate contexts hold gradients for, by parameter id, and whether any
    of them is alive."""
    out: dict[int, facts.Held] = {}
    alive = False
    for cid in candidates:
        try:
            grads = dist_autograd.get_gradients(cid)
        except RuntimeError:        # released: forget it
            with _LOCK:
                if cid in _RECENT:
                    _RECENT.remove(cid)
            continue
        alive = True
        for t in grads:
            out.setdefault(id(t), facts.Held(cid))
    return out, alive


# -- the step hooks ---------------------------------------------------------------------------

def _params(optimizer: Any) -> list[torch.Tensor]:
    return [p for group in optimizer.param_groups for p in group["params"]
            if isinstance(p, torch.Tensor) and p.requires_grad]


def pre_step(optimizer: Any, args: Any, kwargs: Any) -> None:
    """PyTorch's global step pre-hook: see the module docstring. Never raises."""
    try:
        _check(optimizer, sys._getframe(1))
    except Exception as exc:  # noqa: BLE001 - the program's step goes on regardless
        live.say(f"could not check an optimizer step: {type(exc).__name__}: {exc}")


def post_step(optimizer: Any, args: Any, kwargs: Any) -> None:
    """PyTorch's global step post-hook: each parameter's ``.grad`` after the step."""
    try:
        _AFTER[optimizer] = {id(p): _kept(p) for p in _params(optimizer)}
    except Exception:  # noqa: BLE001, S110 - never break the program's step
        pass


def _ended(params: list[torch.Tensor]) -> dict[int, facts.Held]:
    """The parameters a context that ended held a gradient for, whose ``.grad`` nothing wrote
    since."""
    out: dict[int, facts.Held] = {}
    with _LOCK:
        for p in params:
            entry = _ENDED.get(id(p))
            if entry is not None and entry[0]() is p and _key(entry[1]) == facts.grad_key(p):
                out[id(p)] = facts.Held(entry[2])
    return out


def _check(optimizer: Any, frame: types.FrameType | None) -> None:
    _STEPPED[0] = True
    if _from_distributed_optimizer(frame):
        return      # DistributedOptimizer's own local optimizer: hooks.optimizer watches it
    params = _params(optimizer)
    held, alive = _held(_candidates())
    for k, v in _ended(params).items():
        held.setdefault(k, v)
    bare = alive and all(p.grad is None for p in params)
    if not held and not bare:
        return
    after = _AFTER.get(optimizer)
    step = facts.judge([(id(p), facts.grad_key(p)) for p in params], held,
                       None if after is None else {k: _key(v) for k, v in after.items()})
    proc = process.PROCESS
    if proc is None:
        return
    by_id = {id(p): p for p in params}
    with _LOCK:
        _TALLY.count(held, by_id, bare, lambda ids: _names(ids, by_id, proc, frame))
    if step.not_applied:
        _say_not_applied(proc, type(optimizer).__name__, step, by_id, frame)


def _from_distributed_optimizer(frame: types.FrameType | None) -> bool:
    """Whether the step is ``DistributedOptimizer``'s (its ``_LocalOptimizer`` sets ``.grad``
    from the context itself)."""
    for f in outwards(frame, 4):
        if f.f_code.co_filename.endswith(_DIST_OPTIM):
            return True
    return False


def _names(ids: list[int], by_id: dict[int, torch.Tensor], proc: process.Process,
           frame: types.FrameType | None) -> list[str]:
    worker = proc.worker or "?"
    known = {id(p): name for p, name in naming.parameter_names(worker, frame)}
    return [known.get(i) or f"a parameter of shape {list(by_id[i].shape)} on {worker}"
            for i in ids]


def _say_not_applied(proc: process.Process, optimizer: str, step: facts.Step,
                     by_id: dict[int, torch.Tensor], frame: types.FrameType | None) -> None:
    frames = own_frames(frame, 2)
    key = ("applied", frames[0] if frames else None)
    if key in _SAID:
        return
    _SAID.add(key)
    cid = step.context
    k = proc.index.get(cid) if cid is not None else None
    context = context_label(k, cid) if k is not None and cid is not None else \
        f"context id {cid}"
    text = facts.not_applied_text(
        site_text(frames), _written(frames), optimizer,
        _names(step.not_applied, by_id, proc, frame), step.none_count,
        len(step.not_applied), context)
    _tell(proc, journal.NOT_APPLIED, text)


def _written(frames: list[tuple[str, int, str]]) -> str | None:
    """The ``step()`` call as the program wrote it (its source line), if short."""
    import linecache

    if not frames:
        return None
    text = linecache.getline(frames[0][0], frames[0][1]).strip()
    return text if text and "step" in text and len(text) <= 80 else None


def _tell(proc: process.Process, kind: journal.EventKind, text: str) -> None:
    who = f"{proc.worker}: " if proc.worker else ""
    live.say(who + text)
    journal.append(proc.config.session_dir, journal.Event(
        kind=kind, pid=os.getpid(), worker=proc.worker, message=text))


def report() -> None:
    """Name the parameters that got no gradient in any step that asked; start over (after
    ``rpc.shutdown``, and at exit)."""
    with _LOCK:
        found = _TALLY.finding()
        _TALLY.clear()
        _ENDED.clear()
    proc = process.PROCESS
    if proc is not None and found is not None:
        _tell(proc, journal.NO_GRADIENT, found)
