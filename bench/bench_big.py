"""B9: a million-node trace from its file: load, replay, peak memory, in one fresh process.

    python bench/bench_big.py --trace FILE [--json]

What ``distviz replay FILE`` does before it prints: ``distviz.trace.load`` (``load_s``, with CPU
time beside it), then the FAST replay (``replay_s``), and the process's peak resident set over
both (``peak_rss_mib``: the interpreter, the trace and the replay result). Make the file with
``bench/bench_trace.py --make 1000000 --out FILE``.
"""

from __future__ import annotations

import argparse
import time

from common import emit, peak_rss_mib, rss_mib

from distviz.replay import replay
from distviz.trace import load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", required=True)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    start_rss = rss_mib()
    t0, c0 = time.perf_counter(), time.process_time()
    trace = load(args.trace)
    t1, c1 = time.perf_counter(), time.process_time()
    loaded_rss = rss_mib()
    result = replay(trace, mode="fast")
    t2, c2 = time.perf_counter(), time.process_time()
    emit({"nodes": len(trace.nodes), "events": len(result.events), "outcome": result.outcome,
          "load_s": t1 - t0, "load_cpu_s": c1 - c0, "replay_s": t2 - t1, "replay_cpu_s": c2 - c1,
          "start_rss_mib": start_rss, "trace_rss_mib": loaded_rss - start_rss,
          "peak_rss_mib": peak_rss_mib()}, args.json)


if __name__ == "__main__":
    main()
