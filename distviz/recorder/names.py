"""Names for the recorder (torch side): the per-worker registry of tensor names, and ``names``
as the API takes them.

A worker's names come, first name first, from ``name`` (the program's), the namers
(``add_namer``: the runner names module parameters), then the fallback names ``auto_name``
gives leaves made at run time. ``names_list`` turns a ``names`` argument (``{"w": w}``,
``{w: "w"}`` or pairs) into ``(tensor, label)`` pairs, naming the tensors inside small lists
and tuples (``ws[0]``) with ``expand``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

_NAMES: list[tuple[torch.Tensor, str]] = []          # leaves named on this worker (kept alive)
_AUTO: list[tuple[torch.Tensor, str]] = []           # fallback names (``worker1.ones#0``)
_NAMERS: list[Callable[[], list[tuple[Any, str]]]] = []

def name(tensor: torch.Tensor, label: str) -> torch.Tensor:
    """Give a tensor on this worker a name for traces (``distviz.name(w, "ps.w")``).

    Returns the tensor, so it can wrap an expression. Leaves named on remote workers show up
    under this name in traces recorded by ``record`` on the initiator.
    """
    _NAMES.append((tensor, label))
    return tensor


def auto_name(tensor: torch.Tensor, label: str) -> None:
    """A fallback name for a leaf made at run time (used when no variable names it)."""
    _AUTO.append((tensor, label))


def clear_names() -> None:
    """Forget every name registered with ``name`` or ``auto_name`` on this worker."""
    _NAMES.clear()
    _AUTO.clear()


def add_namer(namer: Callable[[], list[tuple[Any, str]]]) -> None:
    """Add a source of names (``(tensor, label)`` pairs), asked at each recording after the
    names given with ``name`` and before the fallback names (the runner names module
    parameters this way: ``ps.EmbeddingTable#0.encoder.weight``)."""
    _NAMERS.append(namer)


def named_here(fallback: bool = True) -> list[tuple[Any, str]]:
    """Every name this worker knows, first name first: ``name``, the namers, and (with
    ``fallback``) ``auto_name``."""
    out: list[tuple[Any, str]] = list(_NAMES)
    for namer in _NAMERS:
        out.extend(namer())
    if fallback:
        out.extend(_AUTO)
    return out


def auto_names() -> list[tuple[Any, str]]:
    """The fallback names ``auto_name`` gave leaves made at run time on this worker."""
    return list(_AUTO)


def names_list(names: Any) -> list[tuple[Any, str]]:
    """``names`` as ``distviz.record`` takes them (``{"w": w}``, ``{w: "w"}``, pairs, or
    ``None``) as ``(tensor, label)`` pairs, in the order given."""
    if names is None:
        return []
    if isinstance(names, Mapping):
        out: list[tuple[Any, str]] = []
        for k, v in names.items():
            if isinstance(k, str):
                out.extend(expand(k, v))
            else:
                out.append((k, str(v)))
        return out
    out2: list[tuple[Any, str]] = []
    for a, b in names:
        if isinstance(a, str):
            out2.extend(expand(a, b))
        else:
            out2.append((a, str(b)))
    return out2


def expand(label: str, value: Any) -> list[tuple[Any, str]]:
    """Name a tensor, or the tensors inside lists/tuples (``ws[0]``), iteratively."""
    out: list[tuple[Any, str]] = []
    stack: list[tuple[str, Any, int]] = [(label, value, 0)]
    while stack:
        lab, val, depth = stack.pop()
        if isinstance(val, torch.Tensor):
            out.append((val, lab))
        elif isinstance(val, (list, tuple)) and depth < 3:
            for i in range(len(val) - 1, -1, -1):
                stack.append((f"{lab}[{i}]", val[i], depth + 1))
    return out

