"""Does the numbered log slow down per step as a trace grows? Prints the per-step print time.

    python bench/bench_log.py [--nodes 12000] [--workers 8] [--seed 0] [--trace FILE] [--json]

Replays a synthetic trace (``distviz.replay.synthetic.synthetic_trace``) or a recorded one
(``--trace``, e.g. the pipeline scenario with micro=200, depth=8), then prints the whole
log to /dev/null through a non-terminal rich Console (as ``distviz replay TRACE > file`` does)
and reports the mean time per printed event line over the first and the last 10% of the events.
A ratio near 1 means constant speed per step (the log streams; it never recomputes state).
``--json`` prints the numbers as one JSON line instead (``run_all.py`` reads it).
Not a test: timings are noisy on shared machines.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time

from rich.console import Console

from distviz.render.terminal import render_log
from distviz.replay import replay
from distviz.replay.synthetic import synthetic_trace
from distviz.trace import load

EVENT_LINE = re.compile(r"\s*\d+ ")   # "  12 worker1  execute ..." (not headings or outcome)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=12000)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--trace", help="a recorded trace file instead of a synthetic trace")
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    args = parser.parse_args()

    t0 = time.perf_counter()
    trace = load(args.trace) if args.trace else synthetic_trace(args.nodes, args.workers,
                                                                args.seed)
    t1 = time.perf_counter()
    result = replay(trace, mode="fast")
    t2 = time.perf_counter()
    n = len(result.events)
    if not args.json:
        print(f"trace: {len(trace.nodes)} nodes, {len(trace.workers)} workers; "
              f"built in {t1 - t0:.2f} s; replay: {n} events, {result.outcome}, {t2 - t1:.2f} s")

    with open(os.devnull, "w", encoding="utf-8") as sink:
        console = Console(file=sink, width=120)   # not a terminal: no styles, like a pipe
        stamps: list[float] = []                   # time after each event line was printed
        start = time.perf_counter()
        for line in render_log(trace, result, width=120):
            console.print(line, soft_wrap=True)
            if EVENT_LINE.match(line.plain):
                stamps.append(time.perf_counter())
        total = time.perf_counter() - start

    tenth = max(len(stamps) // 10, 2)
    first = (stamps[tenth - 1] - start) / tenth
    last = (stamps[-1] - stamps[-tenth - 1]) / tenth
    if args.json:
        print(json.dumps({"nodes": len(trace.nodes), "events": n, "lines": len(stamps),
                          "log_s": total, "first_us": first * 1e6, "last_us": last * 1e6,
                          "ratio": last / first}))
        return
    print(f"log: {len(stamps)} event lines in {total:.2f} s")
    print(f"per step, first 10%: {first * 1e6:.1f} µs; last 10%: {last * 1e6:.1f} µs; "
          f"ratio last/first {last / first:.2f}")


if __name__ == "__main__":
    main()
