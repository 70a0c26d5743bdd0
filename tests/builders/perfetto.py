"""A real-outcome record of a trace for the Perfetto export tests."""

from __future__ import annotations

from typing import Any

from distviz.trace import Trace


def _real(trace: Trace) -> dict[str, Any]:
    """Recorded executions of the design note, as the runner writes them (µs, common clock).
    worker0's t1/t2 leaves overlap on one thread without nesting (threads race)."""
    rows = [
        ("worker0", "worker0/SumBackward0#2", 0.0, 5.0, "worker0 main"),
        ("worker0", "worker0/MulBackward0#1", 6.0, 10.0, "worker0 main"),
        ("worker0", "worker0/AccumulateGrad(t4)", 17.0, 3.0, "worker0 main"),
        ("worker0", "worker0/RecvRpcBackward#0", 21.0, 30.0, "worker0 main"),
        ("worker1", "worker1/SendRpcBackward#0", 60.0, 4.5, "RPC server 1"),
        ("worker1", "worker1/AddBackward0#1", 65.0, None, "RPC server 1"),
        ("worker1", "worker1/RecvRpcBackward#0", 70.0, 20.0, "RPC server 1"),
        ("worker0", "worker0/SendRpcBackward#0", 100.0, 20.0, "RPC server 0"),
        ("worker0", "worker0/AccumulateGrad(t1)", 121.0, 6.0, "RPC server 0"),
        ("worker0", "worker0/AccumulateGrad(t2)", 124.0, 6.0, "RPC server 0"),
    ]
    assert {r[1] for r in rows} == {n.id for n in trace.nodes}
    return {"outcome": "completed", "error": None, "gradients": {},
            "events": [{"pass": 0, "worker": w, "node": n, "t_us": t, "dur_us": d, "thread": th,
                        "grad_shapes": [[3, 3]]} for w, n, t, d, th in rows]}
