"""B5: trace size on disk and load time.

    python bench/bench_trace.py --make 1000000 --out FILE [--workers 8] [--json]
    python bench/bench_trace.py --load FILE [--json]
    python bench/bench_trace.py --size FILE [--json]

``--make`` writes ``synthetic_trace(N)`` with ``Trace.save`` and reports bytes per node.
``--load`` times ``distviz.trace.load(FILE)`` once (run it in a fresh process each time).
``--size`` reports the bytes per node of an existing trace file (a recorded one, say).
"""

from __future__ import annotations

import argparse
import os
import time

from common import emit, peak_rss_mib

from distviz.replay.synthetic import synthetic_trace
from distviz.trace import load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--make", type=int, metavar="N", help="write a synthetic N-node trace")
    what.add_argument("--load", metavar="FILE", help="time loading FILE")
    what.add_argument("--size", metavar="FILE", help="bytes per node of FILE")
    parser.add_argument("--out", help="where --make writes")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    if args.make is not None:
        if not args.out:
            parser.error("--make needs --out FILE")
        trace = synthetic_trace(args.make, args.workers, 0)
        t0 = time.perf_counter()
        trace.save(args.out)
        save_s = time.perf_counter() - t0
        size = os.path.getsize(args.out)
        emit({"nodes": len(trace.nodes), "bytes": size, "bytes_per_node": size / len(trace.nodes),
              "save_s": save_s}, args.json)
        return
    if args.load is not None:
        t0, c0 = time.perf_counter(), time.process_time()
        trace = load(args.load)
        load_s, cpu_s = time.perf_counter() - t0, time.process_time() - c0
        emit({"nodes": len(trace.nodes), "load_s": load_s, "load_cpu_s": cpu_s,
              "peak_rss_mib": peak_rss_mib()},
             args.json)
        return
    trace = load(args.size)
    size = os.path.getsize(args.size)
    emit({"nodes": len(trace.nodes), "bytes": size, "bytes_per_node": size / len(trace.nodes),
          "real_events": len((trace.real or {}).get("events") or [])}, args.json)


if __name__ == "__main__":
    main()
