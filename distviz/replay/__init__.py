"""FAST-mode replay of a recorded distributed autograd trace (pure Python, never imports torch).

Entry points, in data-flow order:

* ``replay(trace, mode="fast") -> Replay``: simulate every backward pass (``fast.py``).
* ``Replay.state_at(step) -> ReplayState``: the whole simulation after any step.
* ``diagnose(trace, state) -> dict``: why a pass hangs, in the user's terms (``hang.py``).
* ``compare(trace, replay) -> dict``: the replay against the real run in ``trace.real``
  (``agreement.py``).
* ``StdPriorityQueue``: libstdc++'s ``std::priority_queue`` tie order (``heap.py``).
* ``synthetic_trace(n_nodes, n_workers=8, seed=0) -> Trace``: pipeline-like benchmark traces.
"""

from __future__ import annotations

from distviz.replay.agreement import compare
from distviz.replay.fast import MODES, IndexedGraph, Replay, replay
from distviz.replay.hang import diagnose
from distviz.replay.heap import StdPriorityQueue
from distviz.replay.model import ACTIONS, OUTCOMES, Event, ReplayState, WorkerState
from distviz.replay.synthetic import synthetic_trace

__all__ = [
    "ACTIONS", "MODES", "OUTCOMES", "Event", "IndexedGraph", "Replay", "ReplayState",
    "StdPriorityQueue", "WorkerState", "compare", "diagnose", "replay", "synthetic_trace",
]
