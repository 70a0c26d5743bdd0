"""B9: a million-node trace from its file: load, replay, peak memory, in one fresh process.

    python bench/bench_big.py --trace FILE [--baseline REV] [--json]

What ``distviz replay FILE`` does before it prints: ``distviz.trace.load`` (``load_s``, with CPU
time beside it), then the FAST replay (``replay_s``), and the process's peak resident set over
both (``peak_rss_mib``: the interpreter, the trace and the replay result). Make the file with
``bench/bench_trace.py --make 1000000 --out FILE``.

``--baseline REV`` measures the same trace with the code of git revision ``REV`` as well, in the
same run (a temporary ``git worktree``; the trace is given to it as a version 1 file, which every
version reads) and prints the ratios ``*_ratio`` (this tree / ``REV``): this machine's speed
changes by tens of percent from hour to hour, a ratio measured in one run does not.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import BENCH, emit, peak_rss_mib, rss_mib, run_json

KEYS = ("load_s", "replay_s", "peak_rss_mib")


def measure(path: str) -> dict[str, object]:
    """Load and replay ``path`` in this process with the ``distviz`` on ``sys.path``."""
    from distviz.replay import replay
    from distviz.trace import load
    start_rss = rss_mib()
    t0, c0 = time.perf_counter(), time.process_time()
    trace = load(path)
    t1, c1 = time.perf_counter(), time.process_time()
    loaded_rss = rss_mib()
    result = replay(trace, mode="fast")
    t2, c2 = time.perf_counter(), time.process_time()
    return {"nodes": len(trace.nodes), "events": len(result.events), "outcome": result.outcome,
            "load_s": t1 - t0, "load_cpu_s": c1 - c0, "replay_s": t2 - t1,
            "replay_cpu_s": c2 - c1, "start_rss_mib": start_rss,
            "trace_rss_mib": loaded_rss - start_rss, "peak_rss_mib": peak_rss_mib()}


def baseline(path: str, rev: str) -> dict[str, object]:
    """``measure`` with the code of ``rev``, on a version 1 copy of the trace, in a fresh
    process; then this tree's ``measure`` in a fresh process; the ratios."""
    root = BENCH.parent
    new = run_json("bench_big.py", ["--trace", path])
    with tempfile.TemporaryDirectory() as tmp:
        v1 = Path(tmp) / "v1.trace.json"
        # in a child of its own: a process's peak memory passes on to the processes it starts
        subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; "
                        "from distviz.trace import load; "
                        "Path(sys.argv[2]).write_text(load(sys.argv[1]).dumps())", path,
                        str(v1)], check=True)
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(root), "worktree", "add", "--detach", str(tree), rev],
                       check=True, capture_output=True)
        try:
            out = subprocess.run([sys.executable, str(BENCH / "bench_big.py"), "--trace",
                                  str(v1), "--json"], check=True, capture_output=True,
                                 text=True, env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"})
            old = json.loads(out.stdout.strip().splitlines()[-1])
        finally:
            subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force", str(tree)],
                           check=False, capture_output=True)
    res: dict[str, object] = {**new, "baseline": rev}
    for key in KEYS:
        res[f"baseline_{key}"] = old[key]
        res[key.removesuffix("_mib").removesuffix("_s") + "_ratio"] = new[key] / old[key]
    return res


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", required=True)
    parser.add_argument("--baseline", metavar="REV")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    emit(baseline(args.trace, args.baseline) if args.baseline else measure(args.trace),
         args.json)


if __name__ == "__main__":
    main()
