"""The message ids behind an RPC's result: its tensors' ``RecvRpcBackward`` functions, and a
context's recv functions by message id."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed.autograd as dist_autograd


def result_functions(value: Any) -> list[Any]:
    """What a call keeps of its result: a tensor's ``grad_fn`` (``message_ids`` ignores one
    that is no ``RecvRpcBackward``), or for a list, tuple or dict the ``recv_functions``."""
    if isinstance(value, torch.Tensor):
        fn = value.grad_fn
        return [] if fn is None else [fn]
    return recv_functions(value)


def recv_functions(value: Any) -> list[Any]:
    """The ``RecvRpcBackward`` functions that produced tensors in ``value``."""
    fns: list[Any] = []
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, torch.Tensor):
            fn = v.grad_fn
            if fn is not None and fn.name().endswith("RecvRpcBackward"):
                fns.append(fn)
        elif isinstance(v, (list, tuple)) and depth < 3:
            stack.extend((x, depth + 1) for x in v)
        elif isinstance(v, dict) and depth < 3:
            stack.extend((x, depth + 1) for x in v.values())
    return fns


def recv_ids(ctx: Any) -> dict[Any, int]:
    """The recv functions of the dist autograd context ``ctx`` (``None``: none) -> their
    message ids."""
    if ctx is None:
        return {}
    return {fn: int(mid) for mid, fn in ctx._recv_functions().items()}


def current_context() -> Any:
    """The calling thread's dist autograd context, or ``None``."""
    try:
        return dist_autograd._current_context()
    except RuntimeError:
        return None


def recv_ids_by(by_fn: dict[Any, int], value: Any) -> list[int]:
    """Message ids of the ``RecvRpcBackward`` (``by_fn``: function -> id) behind the tensors
    in ``value`` (a tensor, or a list or tuple of them)."""
    values = value if isinstance(value, (list, tuple)) else [value]
    return sorted({by_fn[v.grad_fn] for v in values
                   if isinstance(v, torch.Tensor) and v.grad_fn in by_fn})
