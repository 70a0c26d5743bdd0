"""B3/B4: replay speed and peak memory, on a synthetic trace or on a trace file.

    python bench/bench_replay.py --nodes 1000000 [--workers 8] [--seed 0] [--json]
    python bench/bench_replay.py --trace FILE [--repeat 5] [--json]

``--nodes``: builds ``synthetic_trace(nodes, workers, seed)`` (not timed), then times one FAST
replay. Run it in a fresh process per size: ``peak_rss_mib`` is the process's peak resident set
(interpreter + trace + replay result), ``replay_rss_mib`` the growth during the replay;
``replay_cpu_s`` is the CPU time next to the wall time ``replay_s`` (robust on a busy machine).
``--trace``: loads the file (not timed) and times ``repeat`` replays of it in this process.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from typing import Any

from common import emit, peak_rss_mib, rss_mib

from distviz.replay import replay
from distviz.replay.synthetic import synthetic_trace
from distviz.trace import Trace, load


def _one(trace: Trace) -> tuple[float, float, Any]:
    """Replay once; return (wall seconds, CPU seconds of this process, the result)."""
    t0, c0 = time.perf_counter(), time.process_time()
    result = replay(trace, mode="fast")
    return time.perf_counter() - t0, time.process_time() - c0, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--nodes", type=int, help="size of the synthetic trace")
    src.add_argument("--trace", help="trace file to replay")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=5, help="replays of --trace")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    if args.trace is not None:
        trace = load(args.trace)
        times = []
        for _ in range(max(1, args.repeat)):
            dt, _cpu, result = _one(trace)
            times.append(dt)
            del result
        emit({"nodes": len(trace.nodes), "replay_s": statistics.median(times),
              "replay_min_s": min(times), "replay_max_s": max(times)}, args.json)
        return

    t0 = time.perf_counter()
    trace = synthetic_trace(args.nodes, args.workers, args.seed)
    build_s = time.perf_counter() - t0
    gc.collect()
    before = rss_mib()
    dt, cpu, result = _one(trace)
    after = rss_mib()
    emit({"nodes": len(trace.nodes), "build_s": build_s, "replay_s": dt, "replay_cpu_s": cpu,
          "events": len(result.events), "outcome": result.outcome,
          "rss_before_mib": before, "replay_rss_mib": after - before,
          "peak_rss_mib": peak_rss_mib()}, args.json)


if __name__ == "__main__":
    main()
