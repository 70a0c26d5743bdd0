"""PyTorch's real outcome of a trace (as ``distviz trace`` records it) for the verdict tests."""

from __future__ import annotations

from typing import Any

from distviz.replay import replay
from distviz.trace import Trace


def _real(t: Trace, outcome: str | None = None, interop: int = 1) -> dict[str, Any]:
    """A real run that did what the replay does (every event, every leaf's gradient)."""
    r = replay(t)
    events = []
    for p, per in enumerate(r.order):
        for w, ids in per.items():
            events.extend({"pass": p, "worker": w, "node": nid, "t_us": float(len(events)),
                           "dur_us": 0.5, "thread": "PTThreadPool", "grad_shapes": []}
                          for nid in ids)
    grads = {nid: {"shape": [2, 2], "zero": acc.zero} for nid, acc in r.accumulated.items()}
    return {"outcome": outcome or r.outcome, "error": None, "events": events,
            "gradients": grads, "interop_threads": interop}


def _traced(t: Trace) -> Trace:
    """``t`` as ``distviz trace`` writes it: no single-process reference, ``meta.traced``."""
    t.meta = {"traced": {"pid": 1, "argv": ["prog.py"], "context": 1, "seconds": {}}}
    return t
