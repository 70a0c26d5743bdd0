"""An RPC's function as the program wrote it (pure): ``rpc_sync(to, mult)`` is ``mult``,
``rref.rpc_sync().forward(x)`` is ``forward on an RRef``."""

from __future__ import annotations

import types
from typing import Any

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
