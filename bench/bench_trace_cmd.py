"""T1: ``distviz trace`` over a multi-iteration training program vs the plain program (wall).

    python bench/bench_trace_cmd.py [--iterations 150] [--repeat 3] [--modes plain,first,all]
                                    [--json]

Runs ``bench/train_program.py`` (the RPC RNN tutorial, one dist_autograd context per
iteration) three ways, alternating inside each repeat so that machine noise hits all three:
plain (``python train_program.py``), under ``distviz trace`` with the default
``--contexts first`` (one context recorded, every other context goes straight to PyTorch),
and under ``distviz trace --contexts all`` (every context recorded, replayed, observed on both
workers and written). Ratios are against the plain run of the same repeat; targets: first
<= 1.05, all <= 1.10. Whole-command wall times, stdout to /dev/null; and the CPU seconds of
the whole process tree (user + system), which a busy machine disturbs less than wall time.

distviz is byte-compiled first: with ``PYTHONDONTWRITEBYTECODE`` set, every traced process
would compile each distviz module it imports, on every run (an installed distviz, like torch,
is compiled once).
"""

from __future__ import annotations

import argparse
import compileall
import resource
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from common import BENCH, REPO, emit, run_child

PROGRAM = BENCH / "train_program.py"


def _argv(mode: str, iterations: int, work: Path, k: int) -> list[str]:
    program = [sys.executable, str(PROGRAM), str(iterations), str(work / f"rdv-{mode}-{k}")]
    if mode == "plain":
        return program
    return [sys.executable, "-m", "distviz", "trace", "-o", str(work / f"traces-{mode}-{k}"),
            "--contexts", mode, "--", *program]


def _cpu_seconds() -> float:
    """User + system seconds of every child process waited for so far."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=150)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--modes", default="plain,first,all",
                        help="Which runs to make (the ratios need plain).")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    modes = tuple(m for m in ("plain", "first", "all") if m in args.modes.split(","))
    times: dict[str, list[float]] = {m: [] for m in modes}
    cpu: dict[str, list[float]] = {m: [] for m in modes}
    compileall.compile_dir(str(REPO / "distviz"), quiet=1)
    with tempfile.TemporaryDirectory(prefix="bench-trace-cmd-") as tmp:
        work = Path(tmp)
        for k in range(max(1, args.repeat)):
            order = modes if k % 2 == 0 else tuple(reversed(modes))
            for mode in order:
                before = _cpu_seconds()
                wall, _, _ = run_child(_argv(mode, args.iterations, work, k), timeout=900,
                                       cwd=REPO, stdout_devnull=True)
                times[mode].append(wall)
                cpu[mode].append(_cpu_seconds() - before)
        recorded = len(list(work.glob(f"traces-all-{args.repeat - 1}/*.trace.json")))
    out: dict[str, Any] = {"iterations": args.iterations, "contexts_recorded_all": recorded}
    for mode in modes:
        out[f"{mode}_s"] = statistics.median(times[mode])
        out[f"{mode}_all"] = times[mode]
        out[f"{mode}_cpu_s"] = statistics.median(cpu[mode])
        out[f"{mode}_cpu_all"] = [round(c, 2) for c in cpu[mode]]
    if "plain" in modes:
        plain = times["plain"]
        for mode in modes[1:]:
            out[f"{mode}_ratio"] = statistics.median(times[mode]) / statistics.median(plain)
            out[f"{mode}_ratios"] = [m / p for m, p in zip(times[mode], plain, strict=True)]
            out[f"{mode}_cpu_ratio"] = statistics.median(cpu[mode]) / statistics.median(
                cpu["plain"])
            out[f"{mode}_cpu_ratios"] = [round(m / p, 3) for m, p in
                                         zip(cpu[mode], cpu["plain"], strict=True)]
    emit(out, args.json)


if __name__ == "__main__":
    main()
