"""The run-time side of the scenario language (torch side; imported only in worker processes).

The syntax-tree whitelist in ``distviz.scenario`` is the primary guard; this module supplies
the names a validated program runs with and enforces the limits a syntax check cannot:

* ``TorchProxy``: exactly the whitelisted ``torch`` names (``distviz.scenario.lang``). Non-random,
  non-creation functions are the real torch objects (``proxy.add is torch.add``) so that
  ``rpc.rpc_sync("worker1", torch.add, ...)`` is a real builtin RPC. Creation functions check
  the number of elements against ``max_numel`` before allocating; random functions draw from
  the worker's own ``torch.Generator``. Both kinds are ``TorchFunction`` objects that pickle by
  name, so they can also be sent over RPC (the receiving worker uses its own proxy).
* ``StepBudget``: the step budget behind ``_dv_tick()`` (called at every loop step, function call
  and list comprehension step by the instrumented program).
* ``fail_backward`` / ``crash_backward``: identity functions whose backward raises / kills the
  worker process, marked with ``grad_fn.distviz_fault`` for the recorder.
* ``custom_function``: the language's custom autograd Functions
  (``distviz.runner.sandbox.custom_fns``).
* ``base_namespace``: the globals a program runs with; the runner adds ``rpc``.
"""

from __future__ import annotations

import math
import operator
import os
import sys
import zlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch

from distviz.frames import outwards
from distviz.limits import (
    DEFAULT_MAX_NUMEL,
    DEFAULT_MAX_STEPS,
    MAX_INT_BITS,
    MAX_SEQUENCE_LEN,
    WorkerStatus,
)
from distviz.runner.sandbox.custom_fns import custom_function
from distviz.scenario import lang

__all__ = [
    "StepBudget", "CrashBackward", "FailBackward", "SandboxError", "TorchFunction", "TorchProxy",
    "base_namespace", "crash_backward", "fail_backward", "make_generator",
]

_ACTIVE: dict[str, TorchProxy] = {}


class SandboxError(Exception):
    """A scenario program hit a run-time limit (step budget, size cap) or misused a helper.

    ``line`` and ``path`` name the scenario line that was running, when known (the innermost
    frame of the scenario program).
    """

    def __init__(self, message: str, line: int | None = None, path: str | None = None) -> None:
        self.message = message
        self.line = line
        self.path = path
        super().__init__(message)


def _scenario_frame() -> tuple[int | None, str | None]:
    """Return (line, file) of the innermost frame running scenario code, if any."""
    for frame in outwards(sys._getframe(1), None):
        if "_dv_tick" in frame.f_globals and frame.f_code.co_filename != __file__:
            return frame.f_lineno, frame.f_code.co_filename
    return None, None


def refuse(message: str) -> Any:
    """Raise ``SandboxError(message)`` at the scenario's line that is running."""
    line, path = _scenario_frame()
    raise SandboxError(message, line=line, path=path)


# ---------------------------------------------------------------------------------------------
# Step budget


class StepBudget:
    """Counts loop/function/comprehension steps; ``tick()`` raises after ``max_steps``."""

    def __init__(self, max_steps: int = DEFAULT_MAX_STEPS) -> None:
        self.max_steps = max_steps
        self.steps = 0

    def tick(self) -> bool:
        """Count one step; return ``True`` (usable in comprehension conditions).

        Raises ``SandboxError`` when the budget is spent.
        """
        self.steps += 1
        if self.steps > self.max_steps:
            refuse(f"the program ran more than {self.max_steps:,} loop/function steps; a loop "
                   "or a recursion runs away (raise the budget with --max-steps)")
        return True

    def range(self, *args: int) -> range:
        """``range`` that refuses more elements than the whole step budget."""
        r = range(*args)
        try:
            n = len(r)
        except OverflowError:
            n = sys.maxsize
        if n > self.max_steps:
            shown = ", ".join(str(a) for a in args)
            refuse(f"range({shown}) has {n:,} elements, more than the step budget of "
                   f"{self.max_steps:,} (--max-steps)")
        return r


# ---------------------------------------------------------------------------------------------
# torch proxy


def make_generator(seed: int, index: int) -> torch.Generator:
    """Return the generator of the worker at position ``index`` in ``workers``.

    The initiator (index 0) is seeded with ``seed`` itself, so its stream equals
    ``torch.manual_seed(seed)``; other workers get independent, reproducible streams.
    """
    generator = torch.Generator()
    if index == 0:
        return generator.manual_seed(seed)
    mixed = zlib.crc32(f"{seed}/{index}".encode()) | (index << 32)
    return generator.manual_seed((seed * 1_000_003 + mixed) % (2**63))


def _as_int(value: Any) -> int | None:
    try:
        return operator.index(value)
    except TypeError:
        return None


def _size_numel(args: tuple[Any, ...]) -> int | None:
    """Elements of a size given as ``(2, 3)``, ``[2, 3]``, ``torch.Size`` or ``2, 3``."""
    if len(args) == 1 and isinstance(args[0], (tuple, list, torch.Size)):
        args = tuple(args[0])
    total = 1
    for dim in args:
        n = _as_int(dim)
        if n is None:
            return None
        total *= max(n, 0)
    return total


def _requested_numel(name: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> int | None:
    """How many elements ``torch.<name>(*args, **kwargs)`` would allocate (None: unknown, or
    data given: ``tensor``, ``as_tensor``, ``sparse_coo_tensor``)."""
    if name in lang.DATA_FUNCS:
        return None
    if "size" in kwargs:
        size = kwargs["size"]
        return _size_numel((size,) if isinstance(size, (tuple, list, torch.Size)) else (size,))
    if name.endswith("_like"):
        return args[0].numel() if args and isinstance(args[0], torch.Tensor) else None
    if name in ("rand", "randn", "zeros", "ones"):
        return _size_numel(args)
    if name == "full":
        return _size_numel(args[:1]) if args else None
    if name == "randint":
        return _size_numel(args[-1:]) if args else None
    if name == "normal":
        if len(args) >= 3:
            return _size_numel(args[2:3])
        return None
    if name == "randperm":
        return _as_int(args[0]) if args else None
    if name == "eye":
        n = _as_int(args[0]) if args else None
        m = _as_int(args[1]) if len(args) > 1 else n
        return None if n is None or m is None else max(n, 0) * max(m, 0)
    if name == "linspace":
        steps = args[2] if len(args) > 2 else kwargs.get("steps")
        return _as_int(steps)
    if name == "arange":
        numbers = [float(a) for a in args if isinstance(a, (int, float))]
        if len(numbers) != len(args) or not numbers:
            return None
        start, end, step = (0.0, numbers[0], 1.0) if len(numbers) == 1 else (
            numbers[0], numbers[1], numbers[2] if len(numbers) > 2 else 1.0)
        if step == 0 or not all(math.isfinite(x) for x in (start, end, step)):
            return None
        return max(0, math.ceil((end - start) / step))
    return None


class TorchFunction:
    """A whitelisted torch creation/random function bound to one worker's proxy.

    Checks the size cap, passes the worker's generator to random functions, and pickles by
    name: unpickled on another worker it binds to that worker's active proxy.
    """

    def __init__(self, name: str, proxy: TorchProxy) -> None:
        self.name = name
        self.real: Callable[..., Any] = getattr(torch, name)
        self.proxy = proxy
        self.__name__ = name
        self.__qualname__ = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        numel = _requested_numel(self.name, args, kwargs)
        cap = self.proxy.max_numel
        if numel is not None and numel > cap:
            shown = ", ".join([repr(a) for a in args]
                              + [f"{k}={v!r}" for k, v in kwargs.items()])
            refuse(f"torch.{self.name}({shown}) would allocate {numel:,} elements; the cap is "
                   f"{cap:,} (--max-numel)")
        if self.name in lang.RANDOM_FUNCS:
            kwargs["generator"] = self.proxy.generator
        result = self.real(*args, **kwargs)
        hook = self.proxy.on_leaf
        if hook is not None and isinstance(result, torch.Tensor) and result.requires_grad \
                and result.grad_fn is None:
            hook(result, self.name)
        return result

    def __reduce__(self) -> tuple[Callable[[str], Any], tuple[str]]:
        return _resolve_torch_function, (self.name,)

    def __repr__(self) -> str:
        return f"<scenario function torch.{self.name}>"


def _resolve_torch_function(name: str) -> Any:
    """Unpickle a ``TorchFunction`` on the receiving worker (its own proxy, or plain torch)."""
    proxy = _ACTIVE.get("proxy")
    if proxy is None:
        return TorchFunction(name, TorchProxy(torch.Generator(), DEFAULT_MAX_NUMEL))
    return getattr(proxy, name)


class Namespace:
    """A read-only bag of names; unknown names raise ``AttributeError`` naming the path."""

    def __init__(self, dotted: str, members: Mapping[str, Any]) -> None:
        object.__setattr__(self, "_dotted", dotted)
        object.__setattr__(self, "_members", dict(members))

    def __getattr__(self, name: str) -> Any:
        members: dict[str, Any] = object.__getattribute__(self, "_members")
        if name in members:
            return members[name]
        dotted: str = object.__getattribute__(self, "_dotted")
        raise AttributeError(f"{dotted}.{name} is not available in scenarios")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("scenario namespaces are read-only")

    def __dir__(self) -> Iterable[str]:
        return sorted(object.__getattribute__(self, "_members"))

    def __repr__(self) -> str:
        return f"<scenario {object.__getattribute__(self, '_dotted')}>"


class TorchProxy(Namespace):
    """The ``torch`` a scenario sees: exactly the names in ``distviz.scenario.lang``.

    ``generator`` feeds the random functions; ``max_numel`` caps creation functions.
    """

    def __init__(self, generator: torch.Generator, max_numel: int = DEFAULT_MAX_NUMEL) -> None:
        members: dict[str, Any] = {}
        super().__init__("torch", members)
        object.__setattr__(self, "generator", generator)
        object.__setattr__(self, "max_numel", max_numel)
        object.__setattr__(self, "on_leaf", None)
        for name in sorted(lang.TORCH_FUNCS):
            if name in lang.CREATION_FUNCS or name in lang.RANDOM_FUNCS or name in lang.DATA_FUNCS:
                members[name] = TorchFunction(name, self)
            else:
                members[name] = getattr(torch, name)
        for name in sorted(lang.TORCH_DTYPES | lang.TORCH_CONTEXTS):
            members[name] = getattr(torch, name)
        functional = {n: getattr(torch.nn.functional, n) for n in sorted(lang.TORCH_NN_FUNCTIONAL)}
        members["nn"] = Namespace("torch.nn", {
            "functional": Namespace("torch.nn.functional", functional)})
        members["linalg"] = Namespace(
            "torch.linalg", {n: getattr(torch.linalg, n) for n in sorted(lang.TORCH_LINALG)})
        members["sparse"] = Namespace(
            "torch.sparse", {n: getattr(torch.sparse, n) for n in sorted(lang.TORCH_SPARSE)})
        object.__getattribute__(self, "_members").update(members)

    # Declared for type checkers; set in __init__.
    generator: torch.Generator
    max_numel: int
    # called with (tensor, function name) for every leaf that requires grad made by a creation
    # function, so leaves made inside RPC functions get stable names (``worker1.ones#0``)
    on_leaf: Callable[[torch.Tensor, str], None] | None


# ---------------------------------------------------------------------------------------------
# Fault helpers


class FailBackward(torch.autograd.Function):
    """Identity in forward; backward raises ``RuntimeError(message)``.

    PyTorch names its node ``FailBackwardBackward``; ``node.distviz_fault`` is
    ``{"kind": "fail", "message": message}``.
    """

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, message: str) -> torch.Tensor:
        ctx.message = message
        ctx.distviz_fault = {"kind": "fail", "message": message}
        return x.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, None]:
        raise RuntimeError(ctx.message)


class CrashBackward(torch.autograd.Function):
    """Identity in forward; backward flushes output and ends the process with
    ``limits.WorkerStatus.CRASHED`` (17).

    PyTorch names its node ``CrashBackwardBackward``; ``node.distviz_fault`` is
    ``{"kind": "crash"}``.
    """

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.distviz_fault = {"kind": "crash"}
        return x.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(WorkerStatus.CRASHED)


def _needs_grad(x: Any, helper: str) -> None:
    if not isinstance(x, torch.Tensor):
        refuse(f"{helper}(x, ...) needs a tensor, got {type(x).__name__}")
    if not (x.requires_grad and torch.is_grad_enabled()):
        refuse(f"{helper}(x, ...): x does not require grad here, so its backward would never "
               "run")


def fail_backward(x: torch.Tensor, message: str) -> torch.Tensor:
    """Return ``x`` through a ``FailBackward`` node: the backward pass raises ``message``.

    Raises ``SandboxError`` when ``x`` is not a tensor that requires grad.
    """
    _needs_grad(x, "fail_backward")
    out: torch.Tensor = FailBackward.apply(x, str(message))
    return out


def crash_backward(x: torch.Tensor) -> torch.Tensor:
    """Return ``x`` through a ``CrashBackward`` node: the backward pass kills this worker.

    Raises ``SandboxError`` when ``x`` is not a tensor that requires grad.
    """
    _needs_grad(x, "crash_backward")
    out: torch.Tensor = CrashBackward.apply(x)
    return out


# ---------------------------------------------------------------------------------------------
# Guarded operators (the instrumented program calls these for * and **)


def _seq_len(x: Any) -> int | None:
    return len(x) if isinstance(x, (str, list, tuple)) else None


def _check_mul(a: Any, b: Any) -> None:
    for seq, count in ((a, b), (b, a)):
        n = _seq_len(seq)
        if n is not None and isinstance(count, int) and n * count > MAX_SEQUENCE_LEN:
            refuse(f"repeating a {type(seq).__name__} of length {n:,} {count:,} times is too "
                   f"large (limit {MAX_SEQUENCE_LEN:,} items)")


def _check_pow(a: Any, b: Any) -> None:
    if isinstance(a, int) and isinstance(b, int) and b > 0 and abs(a) > 1:
        if a.bit_length() * b > MAX_INT_BITS:
            refuse(f"{a} ** {b} is too large an integer (limit {MAX_INT_BITS:,} bits)")


def _dv_mul(a: Any, b: Any) -> Any:
    _check_mul(a, b)
    return a * b


def _dv_pow(a: Any, b: Any) -> Any:
    _check_pow(a, b)
    return a**b


def _dv_imul(a: Any, b: Any) -> Any:
    _check_mul(a, b)
    return operator.imul(a, b)


def _dv_ipow(a: Any, b: Any) -> Any:
    _check_pow(a, b)
    return operator.ipow(a, b)


# ---------------------------------------------------------------------------------------------
# Namespace


def base_namespace(torch_proxy: TorchProxy, budget: StepBudget,
                   params: Mapping[str, Any]) -> dict[str, Any]:
    """Return the globals a scenario program runs with (the runner adds ``rpc``).

    Contains the whitelisted builtins (``range`` replaced by ``budget.range``), the params,
    ``torch`` (the proxy), ``fail_backward``, ``crash_backward``, ``custom_function``, the
    instrumentation hooks
    (``_dv_tick``, ``_dv_mul``, ``_dv_pow``, ``_dv_imul``, ``_dv_ipow``) and ``__builtins__``
    restricted to the whitelisted builtins. Also makes ``torch_proxy`` the proxy that
    ``TorchFunction`` objects received over RPC bind to in this process.
    """
    import builtins

    allowed = {name: getattr(builtins, name) for name in sorted(lang.BUILTINS)}
    allowed["range"] = budget.range
    namespace: dict[str, Any] = dict(allowed)
    namespace.update(params)
    namespace.update({
        "torch": torch_proxy,
        "fail_backward": fail_backward,
        "crash_backward": crash_backward,
        "custom_function": custom_function,
        "_dv_tick": budget.tick,
        "_dv_mul": _dv_mul,
        "_dv_pow": _dv_pow,
        "_dv_imul": _dv_imul,
        "_dv_ipow": _dv_ipow,
        "__builtins__": dict(allowed),
    })
    _ACTIVE["proxy"] = torch_proxy
    return namespace
