"""Walks over torch's graphs (torch side): the autograd graph behind ``next_functions``, and a
module tree behind ``_modules``. Both iterate with an explicit queue or stack, never recursion:
real graphs are deep.

``reachable(starts)`` is every autograd node reachable from ``starts``, each once: breadth-first
(the recorder's walk order, which becomes the trace's node order) or depth-first (last child
first); ``follow`` can stop the walk at some nodes (they are reached, their inputs are not).
``modules_in(top)`` is ``(prefix, submodule)`` for ``top`` and everything inside it, in
``named_modules()`` order.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

import torch


def reachable(starts: Iterable[Any], follow: Callable[[Any], bool] | None = None,
              depth_first: bool = False) -> list[Any]:
    """Every node reachable from ``starts`` through ``next_functions``, each once, in walk order
    (``None`` entries skipped). ``follow(node)`` false: the node is reached, its inputs are not
    walked from it. ``depth_first``: take the node found last first (a stack), else the node
    found first (a queue, breadth-first)."""
    order: list[Any] = []
    seen: set[Any] = set()
    todo: deque[Any] = deque(fn for fn in starts if fn is not None)
    take = todo.pop if depth_first else todo.popleft
    while todo:
        fn = take()
        if fn in seen:
            continue
        seen.add(fn)
        order.append(fn)
        if follow is None or follow(fn):
            todo.extend(nxt for nxt, _ in fn.next_functions if nxt is not None)
    return order


def _submodules(module: torch.nn.Module) -> list[tuple[str, torch.nn.Module]]:
    """``module``'s children as ``_modules`` holds them (``RemoteModule`` refuses
    ``named_children``)."""
    return [(name, c) for name, c in (getattr(module, "_modules", None) or {}).items()
            if c is not None]


def modules_in(top: torch.nn.Module,
               children: Callable[[torch.nn.Module], list[tuple[str, torch.nn.Module]]]
               = _submodules) -> list[tuple[str, torch.nn.Module]]:
    """``(prefix, submodule)`` for ``top`` and every module inside it, each once, in
    ``named_modules()`` order (an explicit stack); a prefix ends with a dot
    (``encoder.layers.0.``). ``children(module)`` lists a module's ``(name, child)`` pairs
    (default: its ``_modules``); a child named ``""`` keeps its parent's prefix. Unlike
    ``named_modules`` it also walks a module that holds a ``RemoteModule``."""
    out: list[tuple[str, torch.nn.Module]] = []
    seen: set[int] = set()
    stack: list[tuple[str, torch.nn.Module]] = [("", top)]
    while stack:
        prefix, m = stack.pop()
        if id(m) in seen:
            continue
        seen.add(id(m))
        out.append((prefix, m))
        stack.extend((f"{prefix}{name}." if name else prefix, c)
                     for name, c in reversed(children(m)))
    return out
