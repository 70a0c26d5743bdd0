"""B7 diagnosis: what one Python autograd hook per node costs, on a local copy of the B2 graph.

    python bench/profile_hooks.py [--micro 200] [--depth 8] [--repeat 5] [--json]

Builds the pipeline scenario's graph in one process (4 stages of ``depth`` ``tanh(h @ w)``
layers, ``micro`` microbatches, no RPC, one intra-op thread) and times ``loss.backward()`` with:

* ``none``: no hooks (PyTorch alone);
* ``empty``: a pre-hook and a post-hook that do nothing (the cost of calling Python at all);
* ``lean_pre``: a pre-hook appending ``(node, native thread id, time_ns)`` to a list;
* ``lean_both``: ``lean_pre`` plus the same post-hook;
* ``distviz``: the hooks ``distviz.recorder.hooks.install_hooks`` registers (``make_prehook`` and
  ``make_posthook``: one tuple append each, with the node, thread id and time).

Ratios are against ``none``. Local backward runs hooks on the calling thread, so the numbers
isolate the per-node hook cost from RPC; the real B7 run pays it on every worker.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import torch
from common import emit

hooks = importlib.import_module("distviz.recorder.hooks")
VARIANTS = ("none", "empty", "lean_pre", "lean_both", "distviz")


def build(weights: list[list[torch.Tensor]], micro: int, width: int) -> torch.Tensor:
    losses = []
    for _ in range(micro):
        h = torch.rand(2, width)
        for stage in weights:
            for w in stage:
                h = torch.tanh(torch.matmul(h, w))
        losses.append(h.sum())
    return torch.stack(losses).sum()


def graph_nodes(root: torch.Tensor) -> list[Any]:
    """Every autograd node reachable from ``root`` (explicit stack)."""
    seen: set[Any] = set()
    stack = [root.grad_fn]
    out = []
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        out.append(fn)
        stack.extend(g for g, _ in fn.next_functions)
    return out


def hook(fn: Any, variant: str, nid: str, events: list[Any], lock: threading.Lock) -> None:
    """Register ``variant``'s hooks on one node."""
    gid: Callable[[], int] = threading.get_native_id
    tns: Callable[[], int] = time.time_ns
    if variant == "empty":
        fn.register_prehook(lambda g: None)
        fn.register_hook(lambda gi, go: None)
    elif variant in ("lean_pre", "lean_both"):
        fn.register_prehook(lambda g, _n=nid: events.append((_n, gid(), tns(), 0)))
        if variant == "lean_both":
            fn.register_hook(lambda gi, go, _n=nid: events.append((_n, gid(), tns(), 1)))
    elif variant == "distviz":   # exactly the hooks distviz.recorder.hooks.install_hooks registers
        fn.register_prehook(hooks.make_prehook(nid, events))
        fn.register_hook(hooks.make_posthook(nid, events))


def one(variant: str, weights: list[list[torch.Tensor]], micro: int, width: int) -> tuple[float, int]:
    loss = build(weights, micro, width)
    fns = graph_nodes(loss)
    events: list[Any] = []
    lock = threading.Lock()
    if variant != "none":
        for i, fn in enumerate(fns):
            hook(fn, variant, str(i), events, lock)
    t0 = time.perf_counter()
    loss.backward()
    return time.perf_counter() - t0, len(fns)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--micro", type=int, default=200)
    parser.add_argument("--depth", type=int, default=8)
    parser.add_argument("--width", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    weights = [[torch.randn(args.width, args.width, requires_grad=True)
                for _ in range(args.depth)] for _ in range(4)]
    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    nodes = 0
    for _ in range(max(1, args.repeat)):
        for v in VARIANTS:       # interleaved, so drift hits every variant alike
            dt, nodes = one(v, weights, args.micro, args.width)
            times[v].append(dt)
    base = statistics.median(times["none"])
    out: dict[str, Any] = {"nodes": nodes}
    for v in VARIANTS:
        med = statistics.median(times[v])
        out[f"{v}_ms"] = med * 1e3
        out[f"{v}_ratio"] = med / base
        out[f"{v}_us_per_node"] = (med - base) / max(nodes, 1) * 1e6
    emit(out, args.json)


if __name__ == "__main__":
    main()
