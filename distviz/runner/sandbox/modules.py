"""Which worker made each ``nn.Module``, and the names of their parameters (torch side).

PyTorch's global module hooks (``register_module_parameter_registration_hook``,
``register_module_module_registration_hook``) tell this module about every module that gets a
parameter or a submodule, in the order it happens; each is filed under the worker whose code
is running (``set_worker``: once per real worker process; the single-process reference
switches it on every local call). The registry holds the modules strongly, so the final
parameters can still be read after the program dropped its model.

A parameter's name is its module's name plus its path in ``named_parameters()``; a leaf tensor
that requires grad and that a module holds as a plain attribute is named the same way. A module
that no other registered module contains is named after the variable holding it when there is
one (``ps.model`` for a worker's ``init``, ``trainer.model`` for a main's top level) and
otherwise after its class, numbered per worker in the order the modules appeared
(``ps.EmbeddingTable#0``); so the LSTM inside ``RNNModel`` is ``trainer.RNNModel#0.rnn`` and its
first weight ``trainer.RNNModel#0.rnn.weight_ih_l0``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from distviz.recorder.walk import modules_in

__all__ = ["install", "made", "module_variables", "names", "register", "set_worker",
           "use_scope", "worker_of"]

_CURRENT: list[str] = [""]
_SCOPE: list[str] = ["run"]
_REGISTRY: dict[tuple[str, str], list[nn.Module]] = {}
_SEEN: dict[int, tuple[str, str]] = {}
_INSTALLED: list[bool] = [False]
_MADE: list[int] = [0]


def set_worker(worker: str) -> str:
    """File modules made from now on under ``worker``; returns the previous worker."""
    previous = _CURRENT[0]
    _CURRENT[0] = worker
    return previous


def use_scope(scope: str) -> None:
    """File modules under ``scope`` from now on: the real run's (``run``) and the reference's
    (``reference``) registries stay apart when both run in one process."""
    _SCOPE[0] = scope


def register(module: nn.Module) -> None:
    """File ``module`` under the current worker unless it is filed already. The global hooks
    call it for a module that gets a parameter or a submodule; the scenario runtime calls it on
    every ``self.NAME = v`` in a scenario class, for a module that only holds tensors
    (``self.w = torch.rand(3, 3, requires_grad=True)``)."""
    if id(module) in _SEEN or not _CURRENT[0]:
        return
    key = (_SCOPE[0], _CURRENT[0])
    _SEEN[id(module)] = key
    _REGISTRY.setdefault(key, []).append(module)
    _MADE[0] += 1


def made() -> int:
    """How many modules have been filed so far (in any scope): a count that grows."""
    return _MADE[0]


def _on_parameter(module: nn.Module, name: str, param: Any) -> None:
    register(module)


def _on_module(module: nn.Module, name: str, submodule: Any) -> None:
    register(module)


def install() -> None:
    """Install the global hooks (once per process)."""
    if _INSTALLED[0]:
        return
    _INSTALLED[0] = True
    nn.modules.module.register_module_parameter_registration_hook(_on_parameter)
    nn.modules.module.register_module_module_registration_hook(_on_module)


def worker_of(module: nn.Module) -> str | None:
    """The worker a registered module was made on (in the current scope)."""
    key = _SEEN.get(id(module))
    return key[1] if key is not None and key[0] == _SCOPE[0] else None


def module_variables(worker: str, variables: Iterable[tuple[str, Any]],
                     prefix: str) -> dict[int, str]:
    """``{id(module): label}`` for modules held by ``variables`` (``(name, value)`` pairs),
    labelled ``<prefix>.<name>``; the first variable wins."""
    out: dict[int, str] = {}
    for label, value in variables:
        if isinstance(value, nn.Module) and id(value) not in out and not label.startswith("_"):
            out[id(value)] = f"{prefix}.{label}"
    return out


def names(worker: str, labels: dict[int, str] | None = None) -> list[tuple[torch.Tensor, str]]:
    """``(parameter, name)`` for every parameter of the modules ``worker`` made, outermost
    modules first in the order they appeared. ``labels`` names some modules by variable."""
    modules = _REGISTRY.get((_SCOPE[0], worker), [])
    inner: set[int] = set()
    for m in modules:
        for _, sub in modules_in(m):
            if sub is not m:
                inner.add(id(sub))
    counts: dict[str, int] = {}
    out: list[tuple[torch.Tensor, str]] = []
    seen: set[int] = set()
    for m in modules:
        if id(m) in inner:
            continue
        label = (labels or {}).get(id(m))
        if label is None:
            cls = type(m).__name__
            k = counts.get(cls, 0)
            counts[cls] = k + 1
            label = f"{worker}.{cls}#{k}"
        for prefix, sub in modules_in(m):
            for pname, p in _trained(sub):
                if id(p) not in seen:
                    seen.add(id(p))
                    out.append((p, f"{label}.{prefix}{pname}"))
    return out


def _trained(module: nn.Module) -> list[tuple[str, torch.Tensor]]:
    """A module's own parameters, then the leaf tensors that require grad it holds as plain
    attributes (``self.w = torch.rand(3, 3, requires_grad=True)``, as PyTorch's distributed
    optimizer tests write their modules), by attribute name."""
    out: list[tuple[str, torch.Tensor]] = [
        (name, p) for name, p in module._parameters.items() if p is not None]
    out.extend((name, t) for name, t in vars(module).items()
               if isinstance(t, torch.Tensor) and not isinstance(t, nn.Parameter)
               and t.requires_grad and t.is_leaf)
    return out


