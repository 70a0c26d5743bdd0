"""The interval the benchmarks put around a median of alternating pairs
(``bench/common.py``'s ``median_interval``), pure."""

from __future__ import annotations

import random
import statistics
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
from common import median_interval  # noqa: E402


def _pairs(n: int, seed: int) -> list[float]:
    """``n`` pair ratios as a noisy 2-core machine gives them: centred on 1.03, about 10 %
    apart from one pair to the next."""
    rng = random.Random(seed)
    return [rng.gauss(1.03, 0.10) for _ in range(n)]


def test_the_interval_holds_the_median_and_is_the_same_on_every_run() -> None:
    pairs = _pairs(20, 1)
    low, high = median_interval(pairs)
    assert low < statistics.median(pairs) < high
    assert median_interval(pairs) == (low, high)


def test_more_pairs_give_a_narrower_interval() -> None:
    few = median_interval(_pairs(10, 2))
    many = median_interval(_pairs(160, 2))
    assert many[1] - many[0] < (few[1] - few[0]) / 2


def test_twenty_noisy_pairs_cannot_tell_a_three_percent_target_apart() -> None:
    low, high = median_interval(_pairs(20, 3))
    assert low < 1.03 < high      # the margin is inside the noise
    assert high - low > 0.03


def test_identical_pairs_give_a_point_and_no_pairs_an_error() -> None:
    assert median_interval([1.02] * 7) == (1.02, 1.02)
    with pytest.raises(ValueError, match="no values"):
        median_interval([])
