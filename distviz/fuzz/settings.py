"""What ``distviz fuzz`` generates and how it runs each program (pure): a value every part of
the fuzz reads, apart from the runner that drives them."""

from __future__ import annotations

from dataclasses import dataclass

from distviz import limits
from distviz.fuzz.generate import MAX_WORKERS, MIN_WORKERS

__all__ = ["FuzzOptions"]


@dataclass(frozen=True)
class FuzzOptions:
    """What ``fuzz`` generates and how it runs each program. Times are seconds."""

    count: int = 20
    seed: int = 0
    min_workers: int = MIN_WORKERS
    max_workers: int = MAX_WORKERS
    hang_timeout: float = limits.FUZZ_HANG_TIMEOUT
    shrink: bool = True
    max_shrink_tries: int = limits.FUZZ_MAX_SHRINK_TRIES
    startup_timeout: float = limits.FUZZ_RUN_TIMEOUT
    forward_timeout: float = limits.FUZZ_RUN_TIMEOUT
    training: float = 0.0
