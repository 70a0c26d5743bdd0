"""T1's memory measure (``bench/bench_trace_cmd.py``), pure: the trainer's resident set
compared over windows of samples, and the objects its garbage collector tracks."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
from bench_trace_cmd import _objects_added, _rss, _rss_growth  # noqa: E402


def _samples(kib: dict[int, int], objects: dict[int, int] | None = None) -> str:
    return "".join(f"{it} {v}" + (f" {objects[it]}" if objects else "") + "\n"
                   for it, v in sorted(kib.items()))


def test_one_high_sample_at_the_end_does_not_make_growth(tmp_path: Path) -> None:
    kib = {it: 380_000 for it in range(100, 1001, 50)}
    kib[1000] = 410_000         # the allocator's spike in the last sample alone
    path = tmp_path / "rss"
    path.write_text(_samples(kib))
    windowed, points = _rss_growth(_rss(path)) or (0.0, 0.0)
    assert windowed == 1.0
    assert points == pytest.approx(410 / 380, abs=1e-4)


def test_growth_that_lasts_is_measured() -> None:
    kib = {it: 380_000 + 40 * (it - 100) for it in range(100, 1001, 50)}   # +36 MiB by 1,000
    windowed, points = _rss_growth(kib) or (0.0, 0.0)
    assert windowed == pytest.approx((380_000 + 40 * 850) / (380_000 + 40 * 50), abs=1e-4)
    assert windowed > 1.05 and points > windowed


def test_no_growth_without_the_sample_at_100() -> None:
    assert _rss_growth({250: 1, 500: 2}) is None


def test_objects_added_reads_the_third_column(tmp_path: Path) -> None:
    path = tmp_path / "rss"
    path.write_text(_samples({100: 1, 150: 1, 1000: 1}, {100: 240_000, 150: 240_001,
                                                         1000: 240_041}))
    assert _objects_added(path) == 41
    path.write_text(_samples({100: 1, 1000: 1}))
    assert _objects_added(path) is None
    assert _objects_added(tmp_path / "missing") is None
