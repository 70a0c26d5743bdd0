"""The parameters of a ``DistributedOptimizer`` that got no gradient in any backward of the run
(torch side).

``torch.distributed.optim.DistributedOptimizer.step(context_id)`` runs on the caller; each
parameter's owner reads ``dist_autograd.get_gradients(context_id)`` and steps its local
optimizer (a TorchScript one for the optimizers PyTorch has a functional form of, ``SGD``,
``Adam`` and the rest: its ``get_gradients`` is PyTorch's op, out of Python's reach). What
counts is the owner's view, so:

* ``arm`` patches ``DistributedOptimizer.step`` when the program imports
  ``torch.distributed.optim`` (a process that never does loads nothing more). The wrapper sends
  ``check`` to the owner of each of the optimizer's local optimizers, over the program's agent
  with PyTorch's own ``rpc_async`` (no tensors: nothing joins the context), then runs PyTorch's
  step, then waits for the answers (at most ``limits.COLLECT_TIMEOUT``; a failure or a late
  answer counts for nothing). A local optimizer is asked until every parameter it holds has had
  a gradient once: where every parameter gets one, that is the first step only.
* ``check``, on the owner (the local optimizer's RRef the first time, then a key), reads the
  local optimizer's parameters from PyTorch's
  ``_LocalOptimizer`` or ``_ScriptLocalOptimizer`` (``_local_params``) and
  ``get_gradients(context_id)`` (no context there: none of them got one), and marks each
  parameter seen. State: one small record per parameter of this process that an optimizer
  holds (``_PARAMS``: whether it got a gradient, in how many steps it was asked, its name),
  whatever the number of steps; the record goes with its parameter.
* ``report``, after ``rpc.shutdown`` returns (every step served) and at exit, names the
  parameters asked in at least one step that never got a gradient, as distviz names leaves
  (``ps.encoder.weight``; else their shape and worker), live and in the session's log
  (``journal.NO_GRADIENT``) for the summary and ``index.json``'s notes; then the cut that
  caused each to get none (``distviz.tracing.hooks.cut_watch.explain_missing``).

The program's own step runs exactly as it was called: its result and its exceptions are
PyTorch's; distviz's part never raises into it.
"""

from __future__ import annotations

import atexit
import functools
import os
import sys
import threading
import weakref
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc.api as rpc_api

from distviz import limits
from distviz.tracing.hooks.after_import import AfterImport
from distviz.tracing.shared import journal, live, naming, process
from distviz.words import plural

if TYPE_CHECKING:  # pragma: no cover
    pass

#: PyTorch's module that defines ``DistributedOptimizer``.
MODULE = "torch.distributed.optim.optimizer"
#: How many parameters a note names before it says how many more there are.
NAMED = 8


class _Param:
    """One parameter of a local optimizer on this worker (its owner): whether it got a
    gradient in the context of some step, in how many steps it was asked, and how the note
    names it (set when a step finds it without one). A plain class: a dataclass costs a
    traced process a millisecond to import."""

    __slots__ = ("ref", "seen", "steps", "name")

    def __init__(self, ref: weakref.ref[torch.Tensor]) -> None:
        self.ref, self.seen, self.steps, self.name = ref, False, 0, ""

    def __repr__(self) -> str:
        return f"_Param(seen={self.seen}, steps={self.steps}, name={self.name!r})"


_PARAMS: dict[int, _Param] = {}
_GONE: dict[str, int] = {}      # freed parameters that never got one: name -> steps
_LOCK = threading.RLock()     # a parameter freed by a collection inside it comes back
# on the caller: for each DistributedOptimizer, its local optimizers still asked (by index in
# ``remote_optimizers``) and their keys on their owners once known
_PENDING: weakref.WeakKeyDictionary[Any, dict[int, int | None]] = weakref.WeakKeyDictionary()
# on the owner: the parameters of the local optimizers still asked, by key (a local
# optimizer's Python object may be made anew at each ``local_value()``: a TorchScript one is),
# weakly, and the key of each set of parameters (an optimizer made again over the same ones
# gets the same key); dropped once each of them has had a gradient, or one is freed
_LOCALS: dict[int, tuple[tuple[int, ...], list[weakref.ref[torch.Tensor]]]] = {}
_KEYS: dict[tuple[int, ...], int] = {}
_NEXT = [0]


def _forget() -> None:
    _PARAMS.clear()
    _GONE.clear()
    _LOCALS.clear()
    _KEYS.clear()


os.register_at_fork(after_in_child=_forget)


# -- on the owner -------------------------------------------------------------------------------

def _freed(key: int) -> Any:
    def gone(_ref: Any) -> None:
        with _LOCK:
            rec = _PARAMS.pop(key, None)
            if rec is not None and not rec.seen and rec.steps and rec.name:
                _GONE[rec.name] = _GONE.get(rec.name, 0) + rec.steps
    return gone


def _name(param: torch.Tensor, worker: str) -> str:
    for p, name in naming.parameter_names(worker, sys._getframe(0)):
        if p is param:
            return name
    return f"a parameter of shape {list(param.shape)} on {worker}"


def mark(params: Sequence[torch.Tensor], grads: Any, worker: str) -> bool:
    """Count one step of a local optimizer holding ``params``, whose context here holds
    ``grads`` (``{tensor: gradient}``); returns whether each of them has had a gradient now."""
    done = True
    missing: list[tuple[_Param, torch.Tensor]] = []
    with _LOCK:
        for p in params:
            key = id(p)
            rec = _PARAMS.get(key)
            if rec is None or rec.ref() is not p:
                rec = _PARAMS[key] = _Param(weakref.ref(p, _freed(key)))
            rec.steps += 1
            if rec.seen:
                continue
            if p in grads:
                rec.seen = True
            else:
                done = False
                if not rec.name:
                    missing.append((rec, p))
    for rec, p in missing:      # named once, outside the lock (the module walk takes its own)
        rec.name = _name(p, worker)
    return done


def _params(target: Any) -> list[torch.Tensor] | None:
    """The parameters of the local optimizer ``target`` names (its RRef, or a key), or
    ``None`` when a key is no longer known here (then the caller sends the RRef again)."""
    if not isinstance(target, int):
        return list(target.local_value()._local_params)
    entry = _LOCALS.get(target)
    params = [r() for r in entry[1]] if entry is not None else []
    if entry is None or any(p is None for p in params):
        _drop(target)
        return None
    return cast("list[torch.Tensor]", params)


def _drop(key: int) -> None:
    entry = _LOCALS.pop(key, None)
    if entry is not None:
        _KEYS.pop(entry[0], None)


def _key(params: list[torch.Tensor]) -> int:
    ids = tuple(id(p) for p in params)
    key = _KEYS.get(ids)
    if key is None:
        _NEXT[0] += 1
        key = _KEYS[ids] = _NEXT[0]
        _LOCALS[key] = (ids, [weakref.ref(p) for p in params])
    return key


def check(target: Any, context_id: int) -> tuple[bool, int | None]:
    """On the owner of a local optimizer (``target``: its RRef the first time, then the key
    this returned): mark its parameters for ``context_id``. Returns whether it need not be
    asked again (every parameter has had a gradient, or it cannot be told here) and its key
    (later asks send the key, not the RRef: no RRef fork messages; ``None``: send the RRef)."""
    try:
        with _LOCK:
            params = _params(target)
    except Exception:  # noqa: BLE001 - not PyTorch's local optimizer: nothing to tell
        return True, None
    if params is None:
        return False, None
    try:
        grads = dist_autograd.get_gradients(int(context_id))
    except RuntimeError:     # no such context here: none of them got a gradient in it
        grads = {}
    proc = process.PROCESS
    done = mark(params, grads, (proc.worker if proc is not None else None) or "?")
    with _LOCK:
        if done:
            _drop(_KEYS.get(tuple(id(p) for p in params), 0))
            return True, None
        return False, _key(params)


def report() -> None:
    """Name the parameters asked in a step that never got a gradient, and start over (after
    ``rpc.shutdown``: a later RPC session of the process counts anew; and at exit)."""
    with _LOCK:
        found = dict(_GONE)
        tensors: dict[str, torch.Tensor | None] = dict.fromkeys(_GONE)
        for rec in list(_PARAMS.values()):
            if not rec.seen and rec.steps and rec.name:
                found[rec.name] = found.get(rec.name, 0) + rec.steps
                tensors[rec.name] = rec.ref()
        _forget()
    proc = process.PROCESS
    if not found or proc is None:
        return
    names = list(found)
    one = len(names) == 1
    shown = ", ".join(names[:NAMED]) + (f", {len(names) - NAMED} more" if len(names) > NAMED
                                         else "")
    steps = max(found.values())
    text = (f"{plural(len(names), 'parameter')} of a DistributedOptimizer got no gradient in "
            f"any backward of the run ({shown}): dist_autograd.get_gradients(context_id) on "
            f"{'its' if one else 'their'} owner held none for {'it' if one else 'them'} in "
            + ("the only optimizer step that asked" if steps == 1 else
               f"any of the {steps} optimizer steps that asked"))
    who = f"{proc.worker}: " if proc.worker else ""
    live.say(who + text)
    journal.append(proc.config.session_dir, journal.Event(
        kind=journal.NO_GRADIENT, pid=os.getpid(), worker=proc.worker, message=text))
    cuts = sys.modules.get("distviz.tracing.hooks.cut_watch")   # where a context may be recorded
    if cuts is not None:
        cuts.explain_missing(list(tensors.items()))


# -- on the caller ------------------------------------------------------------------------------

def _ask(optimizer: Any, context_id: Any) -> list[tuple[int, Any]]:
    """Send ``check`` to the owners of the local optimizers still asked; ``(index, future)``."""
    remotes = getattr(optimizer, "remote_optimizers", None)
    if not isinstance(remotes, list):
        return []
    pending = _PENDING.get(optimizer)
    if pending is None:
        pending = _PENDING[optimizer] = dict.fromkeys(range(len(remotes)))
    if not pending:
        return []
    send = getattr(rpc_api.rpc_async, "__wrapped__", rpc_api.rpc_async)   # PyTorch's own
    out: list[tuple[int, Any]] = []
    for i, key in list(pending.items()):
        target = remotes[i] if key is None else key
        try:
            out.append((i, send(remotes[i].owner(), check, args=(target, int(context_id)),
                                timeout=limits.COLLECT_TIMEOUT)))
        except Exception:  # noqa: BLE001, S112 - the step itself will say what is wrong
            continue
    return out


def _collect(optimizer: Any, asked: list[tuple[int, Any]]) -> None:
    pending = _PENDING.get(optimizer)
    for i, fut in asked:
        try:
            done, key = fut.wait()
        except Exception:  # noqa: BLE001, S112 - a late or failed answer counts for nothing
            continue
        if pending is None or i not in pending:
            continue
        if done:
            pending.pop(i, None)    # another thread's step of the same optimizer may have too
        else:
            pending[i] = key


def _step(original: Any) -> Any:
    @functools.wraps(original)
    def step(self: Any, context_id: Any) -> Any:
        try:
            asked = _ask(self, context_id)
        except Exception:  # noqa: BLE001 - never break the program's step
            asked = []
        result = original(self, context_id)
        if asked:
            try:
                _collect(self, asked)
            except Exception:  # noqa: BLE001, S110 - never break the program's step
                pass
        return result
    return step


def patch(module: ModuleType) -> None:
    """Wrap ``module.DistributedOptimizer.step`` (once)."""
    cls = getattr(module, "DistributedOptimizer", None)
    if cls is None or hasattr(cls.step, "__wrapped__"):
        return
    cls.step = _step(cls.step)


class _AfterOptimizer(AfterImport):
    """``patch`` right after ``MODULE`` is loaded."""

    def __init__(self) -> None:
        super().__init__(MODULE)

    def then(self, module: ModuleType) -> None:
        try:
            patch(module)
        except Exception as exc:  # noqa: BLE001 - never break the program
            live.say(f"DistributedOptimizer not watched: {exc}")


def arm() -> None:
    """Patch ``DistributedOptimizer.step`` now if PyTorch's module is loaded, else when it is."""
    atexit.register(report)     # a process that never shuts RPC down
    module = sys.modules.get(MODULE)
    if module is not None:
        patch(module)
    elif not any(isinstance(f, _AfterOptimizer) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterOptimizer())
