"""The ``dist_autograd.backward`` calls a traced program makes that distviz does not record
(torch side).

A tracer must never change what the traced program sees: a call whose arguments PyTorch would
reject (not an ``int`` context id, roots that are not a list or tuple of scalar tensors with a
``grad_fn``, a ``retain_graph`` that is not a ``bool``, a context that does not exist) goes to
PyTorch exactly as it was made, positional and keyword arguments alike, and PyTorch's exception
comes back as it is. The summary notes the call, once per kind.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch

from distviz.recorder.contexts import BACKWARD
from distviz.words import error_line

_NAMES = ("contextId", "roots", "retain_graph")   # PyTorch's names for the arguments
#: The entries into a distributed backward, as the summary's notes name them.
DIST_BACKWARD = "dist_autograd.backward"
RREF_BACKWARD = "RRef.backward"


class BackwardArgs(NamedTuple):
    """A ``dist_autograd.backward`` call distviz can record: its arguments as PyTorch reads
    them."""

    context_id: int
    roots: list[torch.Tensor]
    retain_graph: bool


def recordable(args: tuple[Any, ...], kwargs: dict[str, Any]) -> BackwardArgs | None:
    """The call's arguments when PyTorch accepts them: an ``int`` context id, a list or tuple
    of scalar tensors that require grad and have a ``grad_fn``, a ``bool``. ``None`` for any
    other call: it goes to PyTorch untouched (``unrecorded``), which raises what it raises."""
    if not kwargs and len(args) == 2:   # ``backward(context_id, [loss])``: every step's call
        (cid, roots), retain = args, False
    else:
        if len(args) > 3 or set(kwargs) - set(_NAMES[len(args):]):
            return None
        bound = dict(zip(_NAMES, args, strict=False)) | kwargs
        cid, roots = bound.get("contextId"), bound.get("roots")
        retain = bound.get("retain_graph", False)
    if type(cid) is not int or type(retain) is not bool or type(roots) not in (list, tuple) \
            or not roots or not all(_scalar_root(r) for r in roots):
        return None
    return BackwardArgs(cid, list(roots), retain)


def _scalar_root(r: Any) -> bool:
    """A scalar tensor that requires grad and has a ``grad_fn`` (a tensor that requires grad
    is a leaf exactly when it has none: ``is_leaf`` reads it without a Python object)."""
    return isinstance(r, torch.Tensor) and r.requires_grad and not r.is_leaf and \
        r.numel() == 1


def unrecorded(args: tuple[Any, ...], kwargs: dict[str, Any], context_id: int | None,
               log: Callable[[str], None], entry: str = DIST_BACKWARD) -> None:
    """PyTorch's backward for a call distviz does not record (bad arguments, or with
    ``context_id`` a context that does not exist), and ``log(why)`` for the summary, naming
    the ``entry`` the program called (``RREF_BACKWARD``: ``args`` are the owner's
    ``dist_autograd.backward(context_id, [value], retain_graph)``). Returns or raises what
    PyTorch does."""
    try:
        BACKWARD(*args, **kwargs)
    except Exception as exc:
        if context_id is not None:
            from distviz.tracing.recording import report
            log(report.not_recorded(context_id, exc, entry))
        else:
            text = error_line(exc)
            log(f"{a_call(entry)} was not recorded: PyTorch rejected its "
                f"{'arguments' if entry == DIST_BACKWARD else 'value'} "
                f"({type(exc).__name__}: {text})")
        raise
    if entry == DIST_BACKWARD:
        log("a dist_autograd.backward call was not recorded: distviz records roots given as a "
            "list or tuple of scalar tensors")
    else:
        log(f"{a_call(entry)} was not recorded: distviz records an RRef whose value is a "
            "scalar tensor with a grad_fn")


def a_call(entry: str) -> str:
    """``a dist_autograd.backward call``, ``an RRef.backward call``."""
    return f"{'an' if entry == RREF_BACKWARD else 'a'} {entry} call"
