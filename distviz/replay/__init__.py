"""The FAST-mode replay: PyTorch's distributed backward simulated step by step on a recorded trace, and a hang explained.

Pure (never imports torch), so a trace replays anywhere; the values it hands to renderers are
in ``values``. It reads no analysis and nothing of the judge.
"""

from __future__ import annotations

from distviz.replay.graph import MODES, IndexedGraph, initial_dependencies
from distviz.replay.hang import diagnose
from distviz.replay.heap import StdPriorityQueue
from distviz.replay.result import Replay, observed_arrival, replay
from distviz.replay.synthetic import synthetic_trace
from distviz.replay.values import (
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

__all__ = [
    "ACTIONS", "MODES", "OUTCOMES", "Accumulation", "ReplayEvent", "Hang", "IndexedGraph",
    "Message", "PassError", "Replay", "ReplayLike", "ReplayState", "StdPriorityQueue",
    "WorkerState", "diagnose", "initial_dependencies",
    "observed_arrival", "replay", "synthetic_trace",
]
