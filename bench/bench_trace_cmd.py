"""T1: ``distviz trace`` over a multi-iteration training program vs the plain program (wall).

    python bench/bench_trace_cmd.py [--iterations 150[,1000]] [--repeat 3]
                                    [--modes plain,none,first,all] [--json]

Runs ``bench/train_program.py`` (the RPC RNN tutorial, one dist_autograd context per
iteration) plain (``python train_program.py``) and under ``distviz trace``, alternating inside
each repeat so that machine noise hits every mode: ``--contexts none`` (every backward watched,
none recorded: the watch alone), the default ``--contexts first`` (one context recorded, every
other backward watched), and ``--contexts all`` (every context recorded, replayed, observed on
both workers and written). Ratios are against the plain run of the same repeat and iteration
count; targets: none <= 1.03 (at 400 iterations), first <= 1.05, all <= 1.10 (at 50
iterations). ``MODE_pairs`` is the line to read: the median of the per-repeat (alternating,
paired) ratios with their range, and the 90 % interval of that median (a seeded bootstrap,
``common.median_interval``): where it spans the target, the run had too few pairs for the
machine's noise to say on which side the ratio is. Whole-command wall times, stdout to
/dev/null; and the CPU seconds of the whole process tree (user + system), which a busy machine
disturbs less than wall time. For each run of 1,000 iterations or more, the trainer's resident
set after the last iteration against after iteration 100 (``rss_growth``, the worst run; target
<= 1.05): sampled every 50 iterations, the median of the last 100 iterations' samples over that
of iterations 100 to 200 (``rss_growth_points``: the two single samples). ``--objects`` adds
the objects the trainer's garbage collector tracks, after the last iteration minus after
iteration 100 (``objects_added``: a Python object kept per step shows there, free of the
allocator's noise; the full collections slow the runs, so not for speed).
Each run also splits its wall time in two: the trainer's training loop (``loop_ratio``: the
cost of every step, start-up and shutdown left out) and the rest (``start_end_s``: seconds
more than plain, start-up and shutdown of the command, its processes and distviz's summary).
``--step-cost N`` adds N ``--contexts none`` runs whose trainer alternates its steps between
traced and distviz's patches set aside (``step_cost_ratio``: traced steps over the others,
after 25 steps of warm-up): the watch's cost per step, free of the run-to-run noise of a
shared machine, which reaches 15 % between two plain runs; and ``step_cpu_ratio``, the same for
the CPU seconds of the trainer's own thread, where distviz's per-step work runs (the other
threads of both processes, TensorPipe's polling among them, are left out).

distviz is byte-compiled first: with ``PYTHONDONTWRITEBYTECODE`` set, every traced process
would compile each distviz module it imports, on every run (an installed distviz, like torch,
is compiled once).
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from common import BENCH, REPO, emit, median_interval, run_child

PROGRAM = BENCH / "train_program.py"
MODES = ("plain", "none", "first", "all")
RSS_FROM = 1000     # iterations from which the trainer's memory growth is measured
#: the whole-run targets (issue 49: ``none`` at 400 iterations, ``all`` at 50; ``first`` 1.05)
TARGETS = {"none": 1.03, "first": 1.05, "all": 1.10}


def _argv(mode: str, iterations: int, work: Path, k: int) -> list[str]:
    program = [sys.executable, str(PROGRAM), str(iterations),
               str(work / f"rdv-{mode}-{iterations}-{k}")]
    if mode == "plain":
        return program
    return [sys.executable, "-m", "distviz", "trace", "-o",
            str(work / f"traces-{mode}-{iterations}-{k}"), "--contexts", mode, "--", *program]


def _cpu_seconds() -> float:
    """User + system seconds of every child process waited for so far."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _rss(path: Path) -> dict[int, int]:
    """The trainer's resident set in KiB by iteration (100, every 50th after it, the last)."""
    try:
        rows = [line.split() for line in path.read_text().splitlines() if line.strip()]
    except OSError:
        return {}
    return {int(row[0]): int(row[1]) for row in rows}


def _objects_added(path: Path) -> int | None:
    """With ``--objects``: the objects the trainer's garbage collector tracks after its last
    iteration minus after iteration 100 (0: nothing kept per step)."""
    try:
        rows = [line.split() for line in path.read_text().splitlines() if line.strip()]
    except OSError:
        return None
    counts = {int(row[0]): int(row[2]) for row in rows if len(row) > 2}
    return counts[max(counts)] - counts[100] if 100 in counts else None


RSS_WINDOW = 100    # iterations: the median of the samples in a window, not one sample


def _rss_growth(kib: dict[int, int]) -> tuple[float, float] | None:
    """The trainer's resident set after its last iteration over after iteration 100: the
    median of the samples of the last ``RSS_WINDOW`` iterations over that of iterations 100
    to 100 + ``RSS_WINDOW`` (the allocator moves one sample by several percent either way;
    plain runs too), and the two single samples."""
    if 100 not in kib or len(kib) < 2:
        return None
    last = max(kib)
    early = [v for it, v in kib.items() if it <= 100 + RSS_WINDOW]
    late = [v for it, v in kib.items() if it >= last - RSS_WINDOW]
    return (round(statistics.median(late) / statistics.median(early), 4),
            round(kib[last] / kib[100], 4))


def _measure(args: argparse.Namespace, modes: tuple[str, ...], iterations: int,
             work: Path) -> dict[str, Any]:
    times: dict[str, list[float]] = {m: [] for m in modes}
    cpu: dict[str, list[float]] = {m: [] for m in modes}
    growth: dict[str, list[float]] = {m: [] for m in modes}
    points: dict[str, list[float]] = {m: [] for m in modes}    # the two single samples
    objects: dict[str, list[int]] = {m: [] for m in modes}     # with --objects
    loops: dict[str, list[float]] = {m: [] for m in modes}
    curves: dict[str, list[str]] = {m: [] for m in modes}    # "iteration:MiB ..." per run
    for k in range(max(1, args.repeat)):
        order = modes if k % 2 == 0 else tuple(reversed(modes))
        for mode in order:
            before = _cpu_seconds()
            rss = work / f"rss-{mode}-{iterations}-{k}"
            if iterations >= RSS_FROM:
                os.environ["BENCH_RSS_FILE"] = str(rss)
            loop = os.environ["BENCH_LOOP_FILE"] = str(work / f"loop-{mode}-{iterations}-{k}")
            wall, _, _ = run_child(_argv(mode, iterations, work, k), timeout=3600,
                                   cwd=REPO, stdout_devnull=True)
            os.environ.pop("BENCH_RSS_FILE", None)
            os.environ.pop("BENCH_LOOP_FILE", None)
            times[mode].append(wall)
            loops[mode].append(float(Path(loop).read_text()))
            cpu[mode].append(_cpu_seconds() - before)
            kib = _rss(rss)
            added = _objects_added(rss)
            if added is not None:
                objects[mode].append(added)
            g = _rss_growth(kib)
            if g is not None:
                growth[mode].append(g[0])
                points[mode].append(g[1])
                curves[mode].append(" ".join(f"{it}:{v / 1024:.0f}"
                                             for it, v in sorted(kib.items()) if it % 250 == 0
                                             or it in (100, max(kib))))
    out: dict[str, Any] = {}
    for mode in modes:
        out[f"{mode}_s"] = statistics.median(times[mode])
        out[f"{mode}_all"] = times[mode]
        out[f"{mode}_cpu_s"] = statistics.median(cpu[mode])
        out[f"{mode}_cpu_all"] = [round(c, 2) for c in cpu[mode]]
        out[f"{mode}_loop_s"] = statistics.median(loops[mode])
        if growth[mode]:
            out[f"{mode}_rss_growth"] = max(growth[mode])
            out[f"{mode}_rss_growths"] = growth[mode]
            out[f"{mode}_rss_growth_points"] = max(points[mode])
            out[f"{mode}_rss_growths_points"] = points[mode]
            out[f"{mode}_rss_mib"] = curves[mode]
        if objects[mode]:
            out[f"{mode}_objects_added"] = objects[mode]
        written = len(list(work.glob(f"traces-{mode}-{iterations}-{args.repeat - 1}/*.trace.json")))
        if mode != "plain":
            out[f"{mode}_traces_written"] = written
    if "plain" in modes:
        plain = times["plain"]
        for mode in modes[1:]:
            out[f"{mode}_ratio"] = statistics.median(times[mode]) / statistics.median(plain)
            out[f"{mode}_ratios"] = [m / p for m, p in zip(times[mode], plain, strict=True)]
            pairs = out[f"{mode}_ratios"]
            low, high = median_interval(pairs)
            out[f"{mode}_pairs"] = (f"{statistics.median(pairs):.3f} [{min(pairs):.3f}-"
                                    f"{max(pairs):.3f}] ({len(pairs)} alternating pairs; "
                                    f"90 % interval of the median {low:.3f}-{high:.3f}; "
                                    f"target {TARGETS[mode]})")
            out[f"{mode}_cpu_ratio"] = statistics.median(cpu[mode]) / statistics.median(
                cpu["plain"])
            out[f"{mode}_cpu_ratios"] = [round(m / p, 3) for m, p in
                                         zip(cpu[mode], cpu["plain"], strict=True)]
            out[f"{mode}_loop_ratio"] = statistics.median(loops[mode]) / statistics.median(
                loops["plain"])
            out[f"{mode}_loop_ratios"] = [round(m / p, 3) for m, p in
                                          zip(loops[mode], loops["plain"], strict=True)]
            out[f"{mode}_start_end_s"] = round(statistics.median(
                [(t - lp) - (tp - pp) for t, lp, tp, pp in
                 zip(times[mode], loops[mode], plain, loops["plain"], strict=True)]), 3)
    return out


#: ``--parts``: what each row sets aside (``train_program.py``'s ``BENCH_AB_ONLY``); ``all``:
#: every wrapper a step calls, and the module hooks
PARTS = {"rpc": "rpc_sync,rpc_async,remote,to_here", "backward": "backward",
         "context": "__enter__,__exit__", "step": "step", "find_builtin": "_find_builtin",
         "all": ""}


def _ab_run(mode: str, iterations: int, work: Path, k: int, only: str) -> tuple[float, float, float]:
    """One ``--contexts MODE`` run whose trainer alternates its steps as traced and with
    distviz's wrappers ``only`` (all: "") set aside: (wall ratio, CPU ratio, the trainer
    thread's CPU microseconds per step more when traced)."""
    loop = work / f"ab-{mode}-{iterations}-{k}"
    os.environ.update(BENCH_AB="1", BENCH_LOOP_FILE=str(loop))
    if only:
        os.environ["BENCH_AB_ONLY"] = only
    try:
        run_child(_argv(mode, iterations, work, 100 + k), timeout=3600, cwd=REPO,
                  stdout_devnull=True)
    finally:
        for key in ("BENCH_AB", "BENCH_LOOP_FILE", "BENCH_AB_ONLY"):
            os.environ.pop(key, None)
    fields = loop.read_text().split()    # <loop s> traced <s> aside <s> cpu <s> <s> steps <n>
    steps = int(fields[9]) if len(fields) > 9 else (iterations - AB_WARMUP) // 2
    return (float(fields[2]) / float(fields[4]), float(fields[6]) / float(fields[7]),
            (float(fields[6]) - float(fields[7])) / steps * 1e6)


AB_WARMUP = 25      # train_program.py's


def _step_cost(iterations: int, repeat: int, work: Path, mode: str = "none") -> dict[str, Any]:
    """``--contexts MODE`` runs whose trainer alternates its steps as traced and with
    distviz's patches set aside (``train_program.py``'s ``BENCH_AB``): the cost per step,
    inside one run, where the machine's noise falls on both kinds of step alike."""
    runs = [_ab_run(mode, iterations, work, k, "") for k in range(max(1, repeat))]
    key = "" if mode == "none" else f"_{mode}"
    return {f"step_cost_ratio{key}": statistics.median(r[0] for r in runs),
            f"step_cost_ratios{key}": [round(r[0], 4) for r in runs],
            f"step_cpu_ratio{key}": statistics.median(r[1] for r in runs),
            f"step_cpu_ratios{key}": [round(r[1], 4) for r in runs],
            f"step_cpu_us{key}": round(statistics.median(r[2] for r in runs), 1),
            f"step_cpu_us_all{key}": [round(r[2], 1) for r in runs]}


def _parts(iterations: int, repeat: int, work: Path, mode: str,
           names: list[str] | None = None) -> dict[str, Any]:
    """The trainer thread's CPU per step that each part costs (``PARTS``), set aside alone
    inside one run: microseconds per step, median of ``repeat`` runs [range]."""
    out: dict[str, Any] = {}
    for k in range(max(1, repeat)):
        for part, only in PARTS.items():
            if names and part not in names:
                continue
            got = _ab_run(mode, iterations, work, 200 + 10 * k + len(out), only)
            out.setdefault(part, []).append(round(got[2], 1))
    return {f"part_cpu_us_{mode}_{part}": f"{statistics.median(v):.0f} [{min(v):.0f}-{max(v):.0f}]"
            for part, v in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", default="150",
                        help="Iterations per run; several, comma-separated (150,1000).")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--modes", default="plain,none,first,all",
                        help="Which runs to make (the ratios need plain).")
    parser.add_argument("--step-cost", type=int, default=0, metavar="N",
                        help="Also N runs of the watch's cost per step, measured inside one "
                             "run (steps alternately traced and with distviz set aside).")
    parser.add_argument("--step-modes", default="none",
                        help="The modes of the --step-cost and --parts runs (none,all).")
    parser.add_argument("--parts", type=int, default=0, metavar="N",
                        help="Also N runs per part (RPC wrappers, backward, context, optimizer "
                             "step, _find_builtin, all) of the trainer thread's CPU per step "
                             "that part costs, set aside alone inside one run.")
    parser.add_argument("--part-names", default="",
                        help=f"Only these parts ({','.join(PARTS)}; default: all).")
    parser.add_argument("--objects", action="store_true",
                        help="Also count the objects the trainer's garbage collector tracks "
                             "at each memory sample, after a full collection (slows the runs: "
                             "for memory, not speed).")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    modes = tuple(m for m in MODES if m in args.modes.split(","))
    counts = [int(n) for n in str(args.iterations).split(",") if n.strip()]
    if args.objects:
        os.environ["BENCH_OBJECTS"] = "1"
    compileall.compile_dir(str(REPO / "distviz"), quiet=1)
    out: dict[str, Any] = {"iterations": counts[0] if len(counts) == 1 else counts}
    with tempfile.TemporaryDirectory(prefix="bench-trace-cmd-") as tmp:
        for n in counts:
            got = _measure(args, modes, n, Path(tmp))
            if len(counts) == 1:
                out.update(got)
                out["contexts_recorded_all"] = got.get("all_traces_written", 0)
            else:
                out.update({f"{key}@{n}": v for key, v in got.items()})
        for mode in args.step_modes.split(","):
            if args.step_cost:
                out.update(_step_cost(max(counts), args.step_cost, Path(tmp), mode))
            if args.parts:
                out.update(_parts(max(counts), args.parts, Path(tmp), mode,
                                  args.part_names.split(",") if args.part_names else None))
    emit(out, args.json)


if __name__ == "__main__":
    main()
