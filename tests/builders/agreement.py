"""A real-outcome record made from a replay, for the agreement checks."""

from __future__ import annotations

from typing import Any

from distviz.replay import replay
from distviz.trace import Trace


def _real_from_replay(t: Trace, outcome: str | None = None, interop: int = 1) -> dict[str, Any]:
    r = replay(t)
    events = []
    clock = 0.0
    for p, per in enumerate(r.order):
        for w, ids in per.items():
            for nid in ids:
                clock += 1.0
                events.append({"pass": p, "worker": w, "node": nid, "t_us": clock,
                               "dur_us": 0.5, "thread": "PTThreadPool", "grad_shapes": []})
    grads = {nid: {"shape": [2, 2]} for nid in r.accumulated}
    return {"outcome": outcome or r.outcome, "error": None, "events": events,
            "gradients": grads, "interop_threads": interop}
