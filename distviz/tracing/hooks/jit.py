"""distviz's wrappers as TorchScript sees them (torch side).

TorchScript compiles a call to ``dist_autograd.backward`` as the op ``aten::dist_backward``
because ``torch.jit._builtins`` maps that function, by its ``id``, to the op
(``_find_builtin``; the table is built when torch is imported). The wrapper that replaces it in
a traced process is another function: without this module TorchScript tries to compile the
wrapper's Python source and fails. ``as_builtin`` maps each wrapper to the op of the function it
replaces, so scripted code compiles to exactly what it compiles to without distviz, and
``rpc.rpc_sync(dist_autograd.backward, ...)`` still sends the builtin. (``rpc_sync`` /
``rpc_async`` / ``remote`` need nothing: TorchScript compares a callee with
``torch.distributed.rpc.rpc_async`` etc. as they are when it compiles, the wrappers.)

A scripted backward runs the C++ op directly: distviz cannot record it, and changes nothing.
So that the summary can name it, ``_find_builtin`` is wrapped to note when TorchScript looks up
``aten::dist_backward`` (a scripted function in this process calls it); from then on, a context
the program leaves with gradients here and no ``dist_autograd.backward`` through Python is
counted as one backward call from TorchScript (``scripted_backward``). Only contexts with
gradients on the worker that leaves them are seen, each once however many scripted passes it ran.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.distributed.autograd as dist_autograd

DIST_BACKWARD = "aten::dist_backward"

_SCRIPTED: list[bool] = []      # a TorchScript function here calls dist_autograd.backward


def _builtins() -> Any:
    """``torch.jit._builtins`` (``None`` where this torch has no such table)."""
    table = getattr(getattr(torch, "jit", None), "_builtins", None)
    if table is None or not hasattr(table, "_find_builtin") or \
            not hasattr(table, "_register_builtin"):
        return None
    return table


def as_builtin(wrapper: Callable[..., Any], original: Callable[..., Any]) -> None:
    """Let TorchScript (and RPC) treat ``wrapper`` as the builtin op ``original`` is, if any."""
    table = _builtins()
    if table is None:
        return
    op = table._find_builtin(original)
    if op is not None:
        table._register_builtin(wrapper, op)


def watch_compiles() -> None:
    """Wrap ``_find_builtin`` to note a scripted ``dist_autograd.backward`` (once)."""
    table = _builtins()
    if table is None or getattr(table._find_builtin, "_distviz", False):
        return
    find = table._find_builtin

    def _find_builtin(fn: Any) -> Any:
        op = find(fn)
        if op == DIST_BACKWARD and not _SCRIPTED:
            _SCRIPTED.append(True)
        return op
    _find_builtin._distviz = True       # type: ignore[attr-defined]
    _find_builtin.__wrapped__ = find    # type: ignore[attr-defined]
    table._find_builtin = _find_builtin


def scripted_backward(context_id: int, seen: bool) -> bool:
    """Whether the context the program leaves now ran a backward from TorchScript: a scripted
    ``dist_autograd.backward`` was compiled here, none through Python reached this context
    (``seen``), and it holds gradients on this worker."""
    if not _SCRIPTED or seen:
        return False
    try:
        return bool(dist_autograd.get_gradients(context_id))
    except RuntimeError:    # the context is gone already
        return False
