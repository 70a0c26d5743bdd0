"""F2: the fuzz's verdicts under load: the same fuzz run again and again beside busy cores.

    python bench/bench_fuzz_load.py [--runs 10] [--seeds 1206] [--count 30] [--training 0.3]
                                    [--busy 1] [--keep DIR] [--json]

A verdict of "differs" must not depend on timing: a program that agrees on a quiet machine
has to agree when its workers are slowed down and rescheduled. This runs ``distviz fuzz --count
N --seed S --training F --json`` (the command a user types, a fresh process each time) ``--runs``
times for each seed of ``--seeds`` (comma-separated; ``fresh`` draws one from the clock),
with ``--busy`` processes spinning on a core each beside it for the whole run, and prints each
run's agree / disagree / failed counts, every disagreement (program, checks, whether a second
run showed it again) and the total. ``--keep DIR`` keeps each run's saved findings (minimal
programs and traces) under ``DIR/<seed>-<run>/``. Exit status 0 when it ran (any count), 1
when a fuzz run could not finish (not a failed program: that one counts as failed). Not in ``run_all.py``: a run of 30 programs takes minutes.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import REPO, BenchError, emit, run_child

from distviz.limits import EXIT_DISAGREE, EXIT_OK, EXIT_RUN_FAILED

#: ``distviz fuzz`` exit statuses that mean it ran to the end: no finding, a program disagrees,
#: a program failed to run (a finding of its own, counted as failed)
FUZZ_RAN = (EXIT_OK, EXIT_DISAGREE, EXIT_RUN_FAILED)


def spin() -> None:
    """Keep one core busy until terminated."""
    while True:
        pass


def seeds_of(text: str) -> list[int]:
    """``--seeds``: numbers, or ``fresh`` for a seed drawn from the clock."""
    out = []
    for part in text.split(","):
        part = part.strip()
        out.append(time.time_ns() % 1_000_000 + len(out) if part == "fresh" else int(part))
    return out


def one_run(seed: int, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """One ``distviz fuzz`` run; its summary, findings and wall time."""
    argv = [sys.executable, "-m", "distviz", "fuzz", "--count", str(args.count), "--seed",
            str(seed), "--training", str(args.training), "--hang-timeout",
            str(args.hang_timeout), "-o", str(folder), "--json"]
    wall, out, code = run_child(argv, timeout=args.timeout, cwd=REPO, ok_codes=FUZZ_RAN)
    report = json.loads(out)
    summary = report["summary"]
    found = [{"name": p["name"], "disagreements": p.get("disagreements") or [],
              "error": p.get("error"), "reproduced": p.get("reproduced"),
              "text": p.get("text")}
             for p in report["programs"] if not p["agrees"]]
    return {"seed": seed, "exit": code, "wall_s": round(wall, 1), "agree": summary["agree"],
            "disagree": summary["disagree"], "failed": summary["failed"], "findings": found}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="runs per seed")
    parser.add_argument("--seeds", default="1206", help="comma-separated; 'fresh' for a new one")
    parser.add_argument("--count", type=int, default=30)
    parser.add_argument("--training", type=float, default=0.3)
    parser.add_argument("--hang-timeout", type=float, default=2.0)
    parser.add_argument("--busy", type=int, default=1, help="processes spinning beside it")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per fuzz run")
    parser.add_argument("--keep", metavar="DIR", help="keep each run's findings here")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    spinners = [mp.Process(target=spin, daemon=True) for _ in range(args.busy)]
    for p in spinners:
        p.start()
    scratch = Path(tempfile.mkdtemp(prefix="bench-fuzz-load-"))
    runs: list[dict[str, Any]] = []
    failed: str | None = None
    try:
        for seed in seeds_of(args.seeds):
            for k in range(1, args.runs + 1):
                folder = (Path(args.keep) if args.keep else scratch) / f"{seed}-{k}"
                try:
                    run = one_run(seed, args, folder)
                except BenchError as exc:
                    failed = str(exc)
                    break
                runs.append(run)
                if not args.json:
                    print(f"seed {seed} run {k}: {run['agree']} agree, {run['disagree']} "
                          f"disagree, {run['failed']} failed ({run['wall_s']:.0f} s)", flush=True)
                    for f in run["findings"]:
                        what = ", ".join(f["disagreements"]) or f["error"]
                        print(f"  {f['name']}: {what} (again on a second run: "
                              f"{f['reproduced']})", flush=True)
            if failed:
                break
    finally:
        for p in spinners:
            p.terminate()
            p.join()
        shutil.rmtree(scratch, ignore_errors=True)
    total = {"runs": len(runs), "busy": args.busy, "count": args.count,
             "training": args.training,
             "disagreements": sum(r["disagree"] for r in runs),
             "failed": sum(r["failed"] for r in runs),
             "programs": sum(r["agree"] + r["disagree"] + r["failed"] for r in runs),
             "error": failed}
    if args.json:
        emit({**total, "per_run": runs}, True)
    else:
        print(f"disagreements: {total['disagreements']} in {total['runs']} runs of "
              f"{args.count} programs ({total['programs']} programs, {total['failed']} failed "
              f"to run) beside {args.busy} busy core(s)")
        if failed:
            print(f"stopped: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
