"""Every ``dist_autograd.backward`` of a traced process, counted in fixed memory (pure,
torch-free).

A process counts each backward call it makes (``BackwardStats.add``): how many, their wall
times in a fixed-size log histogram (the median and the 95th percentile are read from it,
within a bucket's width, ``BUCKETS_PER_DECADE``), the slowest ``TOP`` by step (the call's
number in the process, from 1), and the first ``TOP`` that raised. Nothing grows with the
number of steps. ``distviz.tracing.watch.watcher`` hands a process's statistics to the session once,
when it ends; ``distviz.tracing.launcher.backward_counts`` merges them per initiator.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Any

#: Histogram buckets per factor of ten, from ``LOW`` seconds up (the last bucket takes the rest).
BUCKETS_PER_DECADE = 20
LOW = 1e-5
DECADES = 9          # 10 us .. 10,000 s
BUCKETS = BUCKETS_PER_DECADE * DECADES
#: How many of the slowest backwards, and of those that raised, are kept by step.
TOP = 5


def bucket(seconds: float) -> int:
    """The histogram bucket of a wall time."""
    if seconds <= LOW:
        return 0
    k = int(math.log10(seconds / LOW) * BUCKETS_PER_DECADE)
    return min(max(k, 0), BUCKETS - 1)


def bucket_middle(k: int) -> float:
    """The geometric middle of bucket ``k``, in seconds."""
    return float(LOW * 10 ** ((k + 0.5) / BUCKETS_PER_DECADE))


@dataclass(slots=True)
class BackwardStats:
    """One initiator's backward calls (see the module docstring); ``worker`` names it."""

    worker: str | None = None
    calls: int = 0
    raised: int = 0
    total_s: float = 0.0
    max_s: float = 0.0
    min_s: float = math.inf
    hist: list[int] = field(default_factory=lambda: [0] * BUCKETS)
    slowest: list[tuple[float, int]] = field(default_factory=list)   # a min-heap of (s, step)
    errors: list[tuple[int, str]] = field(default_factory=list)      # (step, first line)

    def add(self, step: int, seconds: float, error: str | None = None) -> None:
        """Count one backward: its step, wall time and, when it raised, PyTorch's first line."""
        self.calls += 1
        self.total_s += seconds
        self.max_s = max(self.max_s, seconds)
        self.min_s = min(self.min_s, seconds)
        self.hist[bucket(seconds)] += 1
        if len(self.slowest) < TOP:
            heapq.heappush(self.slowest, (seconds, step))
        elif seconds > self.slowest[0][0]:
            heapq.heapreplace(self.slowest, (seconds, step))
        if error is not None:
            self.raised += 1
            if len(self.errors) < TOP:
                self.errors.append((step, error))

    def quantile(self, q: float) -> float | None:
        """The ``q`` quantile of the wall times (0..1), from the histogram, clamped to the
        smallest and largest seen; ``None`` before the first call."""
        if not self.calls:
            return None
        rank = max(1, math.ceil(q * self.calls))
        seen = 0
        for k, n in enumerate(self.hist):
            seen += n
            if seen >= rank:
                return min(max(bucket_middle(k), self.min_s), self.max_s)
        return self.max_s

    def merge(self, other: BackwardStats) -> None:
        """Add ``other``'s calls to these (two processes of one initiator name)."""
        self.calls += other.calls
        self.raised += other.raised
        self.total_s += other.total_s
        self.max_s = max(self.max_s, other.max_s)
        self.min_s = min(self.min_s, other.min_s)
        self.hist = [a + b for a, b in zip(self.hist, other.hist, strict=True)]
        for item in other.slowest:
            if len(self.slowest) < TOP:
                heapq.heappush(self.slowest, item)
            elif item[0] > self.slowest[0][0]:
                heapq.heapreplace(self.slowest, item)
        self.errors = (self.errors + other.errors)[:TOP]

    def to_json(self) -> dict[str, Any]:
        """What a process hands to the session (the histogram as ``{bucket: count}``)."""
        return {"worker": self.worker, "calls": self.calls, "raised": self.raised,
                "total_s": round(self.total_s, 6), "max_s": round(self.max_s, 6),
                "min_s": round(self.min_s, 6) if self.calls else None,
                "hist": {str(k): n for k, n in enumerate(self.hist) if n},
                "slowest": [[round(s, 6), step] for s, step in sorted(self.slowest, reverse=True)],
                "errors": [[step, text] for step, text in self.errors]}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> BackwardStats:
        """The statistics ``to_json`` wrote; raises ``KeyError``/``ValueError``/``TypeError``
        on anything else."""
        hist = [0] * BUCKETS
        for k, n in dict(obj.get("hist") or {}).items():
            hist[min(max(int(k), 0), BUCKETS - 1)] += int(n)
        calls = int(obj["calls"])
        out = cls(worker=obj.get("worker"), calls=calls, raised=int(obj.get("raised", 0)),
                  total_s=float(obj.get("total_s", 0.0)), max_s=float(obj.get("max_s", 0.0)),
                  min_s=float(obj["min_s"]) if obj.get("min_s") is not None else math.inf,
                  hist=hist,
                  errors=[(int(s), str(t)) for s, t in obj.get("errors") or []][:TOP])
        for s, step in obj.get("slowest") or []:
            out.slowest.append((float(s), int(step)))
        heapq.heapify(out.slowest)
        return out

    def summary(self) -> dict[str, Any]:
        """``index.json``'s view: calls, median, p95, max, the slowest and those that raised."""
        median, p95 = self.quantile(0.5), self.quantile(0.95)
        return {"calls": self.calls, "median_s": _round(median), "p95_s": _round(p95),
                "max_s": _round(self.max_s) if self.calls else None,
                "slowest": [{"step": step, "seconds": round(s, 6)}
                            for s, step in sorted(self.slowest, reverse=True)],
                "raised": self.raised,
                "errors": [{"step": step, "error": text} for step, text in self.errors]}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)
