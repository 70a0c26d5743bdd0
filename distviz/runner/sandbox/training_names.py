"""The run-time side of the training names (torch side; imported only in worker processes).

What ``distviz.scenario.lang_nn`` allows, made real:

* the namespaces ``nn``, ``optim`` and ``F`` (and ``torch.nn``, ``torch.optim``): PyTorch's own
  classes and functions, so a model's autograd graph is exactly PyTorch's;
* ``torch.LongTensor(5, 6)`` and the other legacy constructors: with sizes, values drawn from
  the worker's generator instead of uninitialised memory (runs reproduce);
* ``torch.accelerator`` and ``torch.cuda``: scenarios run on CPU (``is_available()`` is False);
* the checks behind the instrumented program's ``_dv_class``, ``_dv_attr`` and ``_dv_self``:
  a name a scenario class declares (a method or a ``self.`` attribute) is reachable only on
  an instance of a scenario class (and then only what that class set or defined), on the
  class itself (its methods), or on an RRef's ``rpc_sync()``/``rpc_async()``/``remote()``
  (a method of some scenario class); ``self.NAME = v`` only on an instance of a scenario
  class. Everything else raises ``SandboxError``;
* ``worker_rng_seed``: the seed of each worker's global generator, which ``nn`` layers draw
  their initial weights and dropout masks from.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable
from typing import Any

import torch
import torch.distributed.rpc as rpc

from distviz.runner.sandbox import modules
from distviz.runner.sandbox.base import Namespace, TorchProxy, refuse
from distviz.scenario import lang, lang_nn

__all__ = ["LegacyConstructor", "attr", "class_names", "install", "register_class",
           "self_check", "worker_rng_seed"]

_METHODS: dict[type, frozenset[str]] = {}
_ATTRIBUTES: dict[type, frozenset[str]] = {}
_ALL_METHODS: set[str] = set()
_MODULE_STORES = ("_parameters", "_modules", "_buffers")


def _fail(message: str) -> Any:
    return refuse(message)


def register_class(cls: type, methods: Iterable[str], attributes: Iterable[str]) -> None:
    """Remember a class a scenario defined, with what it declares (plus its scenario bases)."""
    own_methods, own_attributes = set(methods), set(attributes)
    for base in cls.__mro__[1:]:
        own_methods |= _METHODS.get(base, frozenset())
        own_attributes |= _ATTRIBUTES.get(base, frozenset())
    _METHODS[cls] = frozenset(own_methods)
    _ATTRIBUTES[cls] = frozenset(own_attributes)
    _ALL_METHODS.update(own_methods)


def class_names() -> frozenset[str]:
    """The names of every method of every scenario class seen in this process."""
    return frozenset(_ALL_METHODS)


def _remote_proxies() -> tuple[type, ...]:
    from torch.distributed.rpc.rref_proxy import RRefProxy as TorchRRefProxy

    from distviz.runner.sandbox.rpc_proxy import MethodCaller, RRefProxy
    return (rpc.PyRRef, TorchRRefProxy, RRefProxy, MethodCaller)


def attr(obj: Any, name: str) -> Any:
    """``obj.name`` for a name a scenario class declares; raises ``SandboxError`` otherwise."""
    if isinstance(obj, type):
        if name in _METHODS.get(obj, ()):
            return getattr(obj, name)
    elif type(obj) in _METHODS:
        cls = type(obj)
        if name in _METHODS[cls] and name not in vars(obj):
            return getattr(obj, name)
        if name in _ATTRIBUTES[cls]:
            found = _own_attribute(obj, name)
            if found is not _MISSING:
                return found
            return _fail(f"{cls.__name__} object has no attribute .{name} yet (it is set by "
                         f"self.{name} = ... in a method)")
    elif isinstance(obj, _remote_proxies()) and name in _ALL_METHODS:
        return getattr(obj, name)
    what = obj.__name__ if isinstance(obj, type) else f"a {type(obj).__name__}"
    return _fail(f".{name} is only available on the scenario's own classes and their objects, "
                 f"not on {what}")


_MISSING = object()


def _own_attribute(obj: Any, name: str) -> Any:
    """What ``self.NAME = v`` stored on a module or object, never a class attribute."""
    found = vars(obj)
    if name in found:
        return found[name]
    for store in _MODULE_STORES:
        inner = found.get(store)
        if isinstance(inner, dict) and name in inner:
            return inner[name]
    return _MISSING


def self_check(obj: Any) -> Any:
    """``self`` in ``self.NAME = v``: an instance of a scenario class, returned unchanged."""
    if type(obj) not in _METHODS:
        _fail(f"self.NAME = ... sets attributes only on objects of the scenario's own classes, "
              f"not on a {type(obj).__name__}")
    if isinstance(obj, torch.nn.Module):
        modules.register(obj)   # a module that holds only tensors has no parameter to file it
    return obj


# -- namespaces -----------------------------------------------------------------------------------

def _namespace(dotted: str, members: dict[str, Any]) -> Any:
    return Namespace(dotted, members)


def _nn(dotted: str) -> Any:
    init = {n: getattr(torch.nn.init, n) for n in sorted(lang_nn.NN_INIT)}
    functional = {n: getattr(torch.nn.functional, n) for n in sorted(lang.TORCH_NN_FUNCTIONAL)}
    members: dict[str, Any] = {n: getattr(torch.nn, n) for n in sorted(lang_nn.NN_CLASSES)}
    members["init"] = _namespace(f"{dotted}.init", init)
    members["functional"] = _namespace(f"{dotted}.functional", functional)
    return _namespace(dotted, members)


def _optim(dotted: str) -> Any:
    return _namespace(dotted, {n: getattr(torch.optim, n) for n in sorted(lang_nn.OPTIMIZERS)})


def install(namespace: dict[str, Any], proxy: TorchProxy) -> None:
    """Add the training names to a namespace made by ``sandbox.base_namespace``: ``nn``,
    ``optim`` and ``F``; ``torch.nn.*``, ``torch.optim.*``, the legacy constructors and the
    device queries on ``proxy``; the hooks ``_dv_attr``, ``_dv_self`` and ``_dv_class``; and
    in ``__builtins__`` what a class statement needs (``__build_class__``, and ``super``,
    which the checker allows only as ``super().__init__(...)``)."""
    import builtins

    functional = {n: getattr(torch.nn.functional, n) for n in sorted(lang.TORCH_NN_FUNCTIONAL)}
    namespace.update({"nn": _nn("nn"), "optim": _optim("optim"),
                      "F": _namespace("F", functional), "_dv_attr": attr,
                      "_dv_self": self_check, "_dv_class": register_class})
    namespace["__builtins__"] = dict(namespace["__builtins__"],
                                     __build_class__=builtins.__build_class__,
                                     super=builtins.super)
    _extend_torch(object.__getattribute__(proxy, "_members"), proxy)


def _false() -> bool:
    return False


def _none() -> None:
    return None


def _zero() -> int:
    return 0


class LegacyConstructor:
    """``torch.LongTensor`` and friends: with data, PyTorch's; with sizes, values drawn from
    the worker's generator (integers in [0, 2**31), floats in [0, 1)), within the size cap."""

    _DTYPES = {"LongTensor": torch.int64, "IntTensor": torch.int32, "FloatTensor": torch.float32,
               "DoubleTensor": torch.float64, "BoolTensor": torch.bool}

    def __init__(self, name: str, proxy: Any) -> None:
        self.name = name
        self.dtype = self._DTYPES[name]
        self.proxy = proxy

    def __call__(self, *args: Any) -> torch.Tensor:
        if not args:
            return torch.zeros(0, dtype=self.dtype)
        if not all(isinstance(a, int) and not isinstance(a, bool) for a in args):
            return torch.tensor(args[0], dtype=self.dtype)
        numel = 1
        for a in args:
            numel *= max(a, 0)
        if numel > self.proxy.max_numel:
            _fail(f"torch.{self.name}{args} would allocate {numel:,} elements; the cap is "
                  f"{self.proxy.max_numel:,} (--max-numel)")
        gen = self.proxy.generator
        if self.dtype.is_floating_point:
            return torch.rand(*args, generator=gen, dtype=self.dtype)
        if self.dtype == torch.bool:
            return torch.randint(0, 2, args, generator=gen).bool()
        return torch.randint(0, 2**31, args, generator=gen, dtype=self.dtype)

    def __repr__(self) -> str:
        return f"<scenario torch.{self.name}>"


def _extend_torch(members: dict[str, Any], proxy: Any) -> None:
    """Add the training names to the ``torch`` proxy's members (``torch.nn.Linear``,
    ``torch.optim.SGD``, ``torch.LongTensor``, ``torch.accelerator.is_available``)."""
    members["nn"] = _nn("torch.nn")
    members["optim"] = _optim("torch.optim")
    for name in sorted(lang_nn.LEGACY_CONSTRUCTORS):
        members[name] = LegacyConstructor(name, proxy)
    answers: dict[str, Callable[[], Any]] = {"is_available": _false,
                                             "current_accelerator": _none,
                                             "device_count": _zero}
    for space, names in lang_nn.DEVICE_QUERIES.items():
        members[space] = _namespace(f"torch.{space}", {n: answers[n] for n in sorted(names)})


def worker_rng_seed(seed: int, rank: int) -> int:
    """The seed of the global generator of the worker with ``rank`` (``nn`` layers' initial
    weights, dropout, ``nn.init``); distinct from the generator ``torch.rand`` draws from."""
    return (zlib.crc32(f"global/{seed}/{rank}".encode()) * 1_000_003 + seed) % (2**63)
