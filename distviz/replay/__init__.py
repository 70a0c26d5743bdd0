"""FAST-mode replay of a recorded distributed autograd trace (pure Python, never imports torch).

Entry points, in data-flow order:

* ``replay(trace, mode="fast") -> Replay``: simulate every backward pass (``result.py``, over the
  engine in ``engine.py``), then explain a hang (``hang.diagnose -> Hang``).
* ``Replay.state_at(step) -> ReplayState``: the whole simulation after any step.
* ``initial_dependencies(trace, pass_index, mode)``: FAST mode's initial dependency counts, the
  one computation the engine and every view use (``graph.py``).
* ``observed_arrival(trace)``: the order PyTorch ran each worker's sends in (``trace.real``), an
  order the replay can be asked to receive gradient messages in (``result.py``).
* ``StdPriorityQueue``: libstdc++'s ``std::priority_queue`` tie order (``heap.py``).
* ``synthetic_trace(n_nodes, n_workers=8, seed=0) -> Trace``: pipeline-like benchmark traces.

The values a replay hands to renderers (events, states, messages, hangs, errors, agreement) and
the ``ReplayLike`` protocol renderers accept are in ``model.py``. This package is the engine and
its model: it imports no analysis (``distviz.analyses``) and nothing of the judge
(``distviz.judge``, where the replay is compared with PyTorch's run: ``compare``, ``judge``).
"""

from __future__ import annotations

from distviz.replay.graph import MODES, IndexedGraph, initial_dependencies
from distviz.replay.hang import diagnose
from distviz.replay.heap import StdPriorityQueue
from distviz.replay.model import (
    ACTIONS,
    OUTCOMES,
    Accumulation,
    Hang,
    Message,
    PassError,
    ReplayEvent,
    ReplayLike,
    ReplayState,
    WorkerState,
)
from distviz.replay.result import Replay, observed_arrival, replay
from distviz.replay.synthetic import synthetic_trace

__all__ = [
    "ACTIONS", "MODES", "OUTCOMES", "Accumulation", "ReplayEvent", "Hang", "IndexedGraph",
    "Message", "PassError", "Replay", "ReplayLike", "ReplayState", "StdPriorityQueue",
    "WorkerState", "diagnose", "initial_dependencies",
    "observed_arrival", "replay", "synthetic_trace",
]
