"""Names for leaves and roots without edits to the program (torch side).

Leaves are named after the modules that own them, on every worker: distviz registers PyTorch's
global module hooks (``register_module_parameter_registration_hook`` and
``register_module_module_registration_hook``), so every ``nn.Module`` that registers a
parameter or a submodule is remembered (weakly). At record time the outermost modules of this
process give their ``named_parameters()``, prefixed with the worker:
``ps.encoder.weight``, ``trainer.rnn.weight_ih_l0``. That covers modules behind an RRef and
``RemoteModule`` (they live on their owner, which names them) and ``DistributedDataParallel``
(its ``module.`` prefix is dropped). An outermost module that holds parameters itself and that
a variable of the program holds is named after the variable: ``head = nn.Linear(2, 1)`` on the
trainer gives ``trainer.head.weight``. Two outermost modules with the same parameter path are told
apart by class: ``ps.Decoder.weight``.

On the initiator the program's own frames at the ``dist_autograd.backward`` call add the
variable names of tensors they hold (``loss``, ``hidden[0]``), which name roots and
intermediate results.
"""

from __future__ import annotations

import itertools
import sys
import threading
import types
import weakref
from collections.abc import Iterator
from typing import Any

import torch

from distviz.frames import is_own, outwards
from distviz.recorder.walk import modules_in, reachable

_MODULES: weakref.WeakValueDictionary[int, torch.nn.Module] = weakref.WeakValueDictionary()
_SEEN: weakref.WeakKeyDictionary[torch.nn.Module, int] = weakref.WeakKeyDictionary()
_COUNTER = itertools.count()
_LOCK = threading.Lock()
_VERSION = [0]
_CACHE: dict[str, Any] = {}
_HANDLES: list[Any] = []
#: the variable that first named each outermost module holding parameters itself: the name it
#: keeps for the rest of the process, whichever frame (or thread) asks later
_LABELS: weakref.WeakKeyDictionary[torch.nn.Module, str] = weakref.WeakKeyDictionary()
MAX_FRAMES = 6


def _note(module: Any) -> None:
    if not isinstance(module, torch.nn.Module):
        return
    with _LOCK:
        _VERSION[0] += 1
        if module in _SEEN:
            return
        k = next(_COUNTER)
        _SEEN[module] = k
        _MODULES[k] = module


def _on_parameter(module: Any, name: str, param: Any) -> None:
    _note(module)


def _on_module(module: Any, name: str, submodule: Any) -> None:
    _note(module)
    _note(submodule)


def install() -> None:
    """Register the global module hooks (once per process)."""
    if _HANDLES:
        return
    from torch.nn.modules import module as nn_module
    _HANDLES.append(nn_module.register_module_parameter_registration_hook(_on_parameter))
    _HANDLES.append(nn_module.register_module_module_registration_hook(_on_module))


def ensure() -> None:
    """Make sure modules are known here: a process without the bootstrap (the Python API on a
    worker) finds the modules that exist now once, with the garbage collector, then hooks."""
    if _HANDLES:
        return
    import gc
    import warnings
    install()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # some objects warn when their class is asked for
        for obj in gc.get_objects():
            if isinstance(obj, torch.nn.Module):
                _note(obj)


def _children(module: torch.nn.Module) -> list[tuple[str, torch.nn.Module]]:
    """Submodules, read from ``_modules`` (``RemoteModule`` refuses ``named_modules``); a
    ``DistributedDataParallel``'s ``module`` child gets no name of its own, so its parameters
    keep the paths of the model it wraps."""
    subs = getattr(module, "_modules", None) or {}
    ddp = type(module).__name__ == "DistributedDataParallel"
    return [("" if ddp and name == "module" else name, sub) for name, sub in subs.items()
            if isinstance(sub, torch.nn.Module)]


def _parameters_under(top: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    """``(path, parameter)`` of every parameter under ``top``, each once (iterative)."""
    out: list[tuple[str, torch.Tensor]] = []
    seen: set[int] = set()
    for prefix, m in modules_in(top, _children):
        for name, p in (getattr(m, "_parameters", None) or {}).items():
            if p is not None and id(p) not in seen:
                seen.add(id(p))
                out.append((f"{prefix}{name}", p))
    return out


def _outermost(modules: list[torch.nn.Module]) -> list[torch.nn.Module]:
    """The modules no other module of ``modules`` holds."""
    inner = {id(sub) for m in modules for _, sub in modules_in(m, _children)[1:]}
    return [m for m in modules if id(m) not in inner]


def own_variables(frame: types.FrameType | None) -> Iterator[tuple[str, Any]]:
    """``(name, value)`` of each public local variable (not ``self``) of the program's own
    frames (``MAX_FRAMES`` of them at most), innermost frame first."""
    frames = 0
    for f in outwards(frame, None):
        if frames == MAX_FRAMES:
            return
        if is_own(f.f_code.co_filename):
            frames += 1
            for name, value in list(f.f_locals.items()):
                if not name.startswith("_") and name != "self":
                    yield name, value


def module_variables(frame: types.FrameType | None) -> dict[int, str]:
    """``{id(module): variable}`` for the modules the program's own frames hold in a variable
    (``head = nn.Linear(2, 1)``), innermost frame first; the first name wins."""
    out: dict[int, str] = {}
    for name, value in own_variables(frame):
        if isinstance(value, torch.nn.Module) and id(value) not in out:
            out[id(value)] = name
    return out


def _own_direct(top: torch.nn.Module) -> bool:
    return any(p is not None for p in (getattr(top, "_parameters", None) or {}).values())


def parameter_names(worker: str, frame: types.FrameType | None = None
                    ) -> list[tuple[torch.Tensor, str]]:
    """``[(parameter, "<worker>.<path>")]`` for the outermost live modules of this process.

    An outermost module that holds parameters itself (``head = nn.Linear(2, 1)``, whose
    paths are just ``weight`` and ``bias``) is named after the variable that holds it in the
    program's frames from ``frame`` (default: the caller's stack), as roots are:
    ``trainer.head.weight``, not ``trainer.weight``. Recomputed only when a module registered
    a parameter or submodule since the last call, or the variables changed.
    """
    with _LOCK:
        version = _VERSION[0]
        modules = [m for _, m in sorted(_MODULES.items())]
    labels = _labels(_outermost(modules), frame if frame is not None else sys._getframe(1))
    key = tuple(sorted(labels.items()))
    cached = _CACHE.get(worker)
    if (cached is not None and cached[0] == version and len(cached[2]) == len(modules)
            and cached[3] == key):
        return list(cached[1])
    by_path: dict[str, list[tuple[str, torch.Tensor]]] = {}
    for top in _outermost(modules):
        label = type(top).__name__
        var = labels.get(id(top)) if _own_direct(top) else None
        for path, p in _parameters_under(top):
            by_path.setdefault(f"{var}.{path}" if var else path, []).append((label, p))
    out: list[tuple[torch.Tensor, str]] = []
    for path, owners in by_path.items():
        if len(owners) == 1:
            out.append((owners[0][1], f"{worker}.{path}"))
            continue
        count: dict[str, int] = {}
        for label, p in owners:
            k = count.get(label, 0)
            count[label] = k + 1
            tag = label if k == 0 else f"{label}[{k}]"
            out.append((p, f"{worker}.{tag}.{path}"))
    _CACHE[worker] = (version, out, [weakref.ref(m) for m in modules], key)
    return list(out)


def _labels(tops: list[torch.nn.Module], frame: types.FrameType | None) -> dict[int, str]:
    """``{id(module): variable}`` for the outermost modules ``tops`` that hold parameters
    themselves: the variable that first named each (``_LABELS``), else the one that holds it
    in the program's frames from ``frame``, else in another thread's (the program's main
    thread, while an RPC thread asks). One module, one name, in every note of the process."""
    direct = [m for m in tops if _own_direct(m)]
    out = {id(m): label for m in direct if (label := _LABELS.get(m)) is not None}
    if len(out) == len(direct):
        return out
    found = module_variables(frame)
    if any(id(m) not in found for m in direct):
        here = threading.get_ident()
        for ident, top in sorted(sys._current_frames().items()):
            if ident != here:
                for k, v in module_variables(top).items():
                    found.setdefault(k, v)
    for m in direct:
        if id(m) not in out and id(m) in found:
            out[id(m)] = _LABELS.setdefault(m, found[id(m)])
    return out


def frame_names(frame: types.FrameType | None) -> list[tuple[str, Any]]:
    """``[(variable name, value)]`` from the program's own frames, innermost first.

    Values are tensors or small lists/tuples of tensors (``hidden`` becomes ``hidden[0]``,
    ``hidden[1]`` in the recorder); the first frame that names a tensor wins.
    """
    out: list[tuple[str, Any]] = []
    for name, value in own_variables(frame):
        if isinstance(value, torch.Tensor) or (
                isinstance(value, (list, tuple)) and 0 < len(value) <= 16
                and any(isinstance(v, torch.Tensor) for v in value)):
            out.append((name, value))
    return out


def in_graph(named: list[tuple[str, Any]], roots: list[Any]) -> list[tuple[str, Any]]:
    """Keep the names of leaves and of tensors computed in the roots' graph: a variable that
    holds a tensor of another graph (an earlier iteration's output) must not pull that graph
    into the trace."""
    reach = set(reachable(r.grad_fn for r in roots if isinstance(r, torch.Tensor)))

    def keep(value: Any) -> bool:
        values = value if isinstance(value, (list, tuple)) else [value]
        return all(not isinstance(v, torch.Tensor) or v.grad_fn is None or v.grad_fn in reach
                   for v in values)
    return [(name, value) for name, value in named if keep(value)]


def root_names(roots: list[Any], named: list[tuple[Any, Any]]) -> list[str]:
    """The program's variable name of each root, where one of its frames (or ``names``)
    holds it; ``named`` pairs are ``(name, value)`` or ``(value, name)``."""
    out: list[str] = []
    for r in roots:
        label = next((str(b) if a is r else str(a) for a, b in named if a is r or b is r),
                     None)
        if label is not None:
            out.append(label)
    return out
