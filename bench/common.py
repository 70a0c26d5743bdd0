"""Helpers shared by the benchmark scripts: paths, child processes, memory, JSON output.

Every benchmark script prints one JSON object on its last stdout line when given ``--json``;
``run_all.py`` runs the scripts as fresh processes and reads that line.
"""

from __future__ import annotations

import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
SCENARIOS = REPO / "scenarios"


class BenchError(RuntimeError):
    """A benchmark child process failed; the message carries its exit status and stderr tail."""


def peak_rss_mib() -> float:
    """Return this process's peak resident set size so far, in MiB (Linux ``ru_maxrss`` is KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def rss_mib() -> float:
    """Return this process's current resident set size in MiB (from ``/proc/self/statm``)."""
    with open("/proc/self/statm", encoding="ascii") as fh:
        pages = int(fh.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


#: ``median_interval``'s resamples and the seed that makes its interval the same on every run
RESAMPLES = 4000
SEED = 49


def median_interval(values: list[float], level: float = 0.9) -> tuple[float, float]:
    """The ``level`` percentile-bootstrap interval of the median of ``values`` (seeded: the
    same values give the same interval): how far the median of alternating pairs may be from
    the one a machine's noise hides. On a 2-core machine one pair of runs may move by 20 %,
    and the median of 20 pairs by 3 %, as much as a target's margin; the interval says so."""
    if not values:
        raise ValueError("median_interval: no values")
    rng = random.Random(SEED)
    medians = sorted(statistics.median(rng.choices(values, k=len(values)))
                     for _ in range(RESAMPLES))
    cut = int(RESAMPLES * (1 - level) / 2)
    return medians[cut], medians[RESAMPLES - 1 - cut]


def run_child(argv: list[str], timeout: float = 600.0, cwd: Path | None = None,
              stdout_devnull: bool = False, ok_codes: tuple[int, ...] = (0,)
              ) -> tuple[float, str, int]:
    """Run ``argv`` to completion; return ``(wall seconds, stdout, exit status)``.

    ``stdout_devnull`` sends stdout to ``/dev/null`` (as ``cmd > /dev/null`` would). Raises
    ``BenchError`` with the last stderr lines when the command times out or exits with a status
    not in ``ok_codes``.
    """
    env = dict(os.environ, PYTHONWARNINGS="ignore", NO_COLOR="1")
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(argv, cwd=cwd, env=env, timeout=timeout, text=True,
                              stdout=subprocess.DEVNULL if stdout_devnull else subprocess.PIPE,
                              stderr=subprocess.PIPE, check=False)
    except subprocess.TimeoutExpired:
        raise BenchError(f"{' '.join(argv)}: still running after {timeout:g} s") from None
    wall = time.perf_counter() - t0
    if proc.returncode not in ok_codes:
        tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
        raise BenchError(f"{' '.join(argv)}: exit status {proc.returncode}\n{tail}")
    return wall, proc.stdout or "", proc.returncode


def run_json(script: str, args: list[str], timeout: float = 600.0) -> dict[str, Any]:
    """Run ``bench/<script> <args> --json`` in a fresh Python; return its last stdout line as JSON."""
    _wall, out, _code = run_child([sys.executable, str(BENCH / script), *args, "--json"], timeout)
    lines = [ln for ln in out.splitlines() if ln.strip()]
    if not lines:
        raise BenchError(f"{script}: printed nothing")
    return dict(json.loads(lines[-1]))


def emit(obj: dict[str, Any], as_json: bool) -> None:
    """Print ``obj`` as one JSON line, or as ``key: value`` lines for a person."""
    if as_json:
        print(json.dumps(obj))
        return
    for k, v in obj.items():
        print(f"{k}: {v:.4g}" if isinstance(v, float) else f"{k}: {v}")
