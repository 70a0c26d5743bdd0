"""What tests/pure/render/test_viewer.py and tests/e2e/test_viewer_browser.py share."""

from __future__ import annotations

from builders.graphs import _node
from distviz.trace import ACCUMULATE_GRAD_SEQ, BackwardPass, Trace


def twin_trace() -> Trace:
    """Two ``MulBackward0 #1`` on one worker (ids ``#1`` and ``#1~1``), both pending at once:
    ``loss = (x * 2).sum() + (x * 3).sum()`` seen as one sum over two products."""
    nodes = [
        _node("worker0/AddBackward0#3", "op", 3, [("worker0/MulBackward0#1", 0),
                                                  ("worker0/MulBackward0#1~1", 0)]),
        _node("worker0/MulBackward0#1", "op", 1, [("worker0/AccumulateGrad(x)", 0)]),
        _node("worker0/MulBackward0#1~1", "op", 1, [("worker0/AccumulateGrad(x)", 0)]),
        _node("worker0/AccumulateGrad(x)", "accumulate_grad", ACCUMULATE_GRAD_SEQ, var="x",
              shape=[2]),
    ]
    return Trace(workers=["worker0"], initiator="worker0", context_id=0, nodes=nodes,
                 passes=[BackwardPass(roots=["worker0/AddBackward0#3"])])
