"""Run every distviz benchmark side by side and print one table of medians, ratios and targets.

    python bench/run_all.py [--quick] [--repeat N] [--only B1,B3] [--keep DIR]

Each benchmark runs ``--repeat`` times (default 5) in fresh processes, distviz and its plain
torch baseline alternating within a repeat, so machine noise hits both alike. Cells read
``median [min-max]``; ratios are median / median. ``--quick`` uses tiny sizes so the whole run
takes well under a minute (the smoke test uses it; its numbers say nothing about the targets).

| id | distviz side | baseline |
|---|---|---|
| B1 | ``distviz run scenarios/design_note.yaml`` | ``bench/baseline_design_note.py`` |
| B2 | ``distviz run scenarios/pipeline.yaml --set micro=200 --set depth=8`` | ``bench/baseline_pipeline.py`` |
| B3 | ``bench/bench_replay.py --nodes N`` (10k, 100k, 1M) | targets only |
| B4 | replay of B2's trace (``bench_replay.py --trace``) | PyTorch's backward, no hooks (B7) |
| B5 | bytes per node (B2's trace, synthetic 1M); ``trace.load`` of 1M | targets only |
| B6 | B2's trace: the default PNG and SVG (view, size, not shrunk), the worker summary (``bench_pictures.py``) | targets only |
| B7 | real backward with hooks (``bench_observe.py``) | the same without hooks |
| B8 | the HTML viewer of a 100k-node trace: export, first paint, a step, a search in headless Chromium (``bench_viewer.py``) | targets only |
| B9 | a 1M-node trace file: load, replay, peak memory in one process (``bench_big.py``) | the code of ``B9_BASELINE``, same run |
| L1 | ``bench_log.py``: per-step log time, last 10% / first 10% | targets only |

Exit status: 0 when every benchmark ran (met or not), 1 when one of them failed to run.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from common import BENCH, SCENARIOS, BenchError, run_child, run_json

GIB_MIB = 1024.0
# ``distviz run`` exit statuses that still mean "it ran to the end": 0 and 8 (the replay disagrees
# with PyTorch: a correctness finding, reported under the table, not a failure to measure).
DISTVIZ_OK = (0, 8)


@dataclass
class Sizes:
    """Problem sizes of one run (full or ``--quick``)."""

    micro: int
    depth: int
    synthetic: tuple[int, int, int]
    load_nodes: int
    log_nodes: int
    viewer_nodes: int


FULL = Sizes(micro=200, depth=8, synthetic=(10_000, 100_000, 1_000_000), load_nodes=1_000_000,
             log_nodes=12_000, viewer_nodes=100_000)
QUICK = Sizes(micro=4, depth=2, synthetic=(1_000, 3_000, 30_000), load_nodes=30_000,
              log_nodes=2_000, viewer_nodes=3_000)


@dataclass
class Row:
    """One line of the table. ``met`` is None for rows without a target."""

    id: str
    what: str
    distviz: str = "-"
    baseline: str = "-"
    value: str = "-"
    target: str = "-"
    met: bool | None = None
    error: str | None = None


@dataclass
class Bench:
    """Shared state of one run: sizes, repeats, scratch folder, rows and raw samples."""

    sizes: Sizes
    repeat: int
    tmp: Path
    quick: bool
    rows: list[Row] = field(default_factory=list)
    samples: dict[str, list[float]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def add(self, key: str, value: float) -> None:
        self.samples.setdefault(key, []).append(value)

    @property
    def pipeline_trace(self) -> Path:
        return self.tmp / "pipeline.trace.json"


# -- formatting --------------------------------------------------------------------------------

def fmt_num(x: float, unit: str) -> str:
    if unit == "s":
        return f"{x:.3f} s" if x < 10 else f"{x:.1f} s"
    if unit == "MiB":
        return f"{x:,.0f} MiB"
    if unit == "B":
        return f"{x:,.0f} B"
    if unit == "us":
        return f"{x:.1f} µs"
    return f"{x:.2f}"


def cell(values: list[float], unit: str) -> str:
    """``median [min-max]`` (just the value when there is one sample)."""
    if not values:
        return "-"
    med = statistics.median(values)
    if len(values) == 1:
        return fmt_num(med, unit)
    return f"{fmt_num(med, unit)} [{fmt_num(min(values), unit)}-{fmt_num(max(values), unit)}]"


def ratio_cell(num: list[float], den: list[float]) -> tuple[float, str]:
    """Ratio of medians, and the range of the paired per-repeat ratios."""
    r = statistics.median(num) / statistics.median(den)
    pairs = [a / b for a, b in zip(num, den, strict=True) if b > 0]
    if len(pairs) > 1:
        return r, f"{r:.2f} [{min(pairs):.2f}-{max(pairs):.2f}]"
    return r, f"{r:.2f}"


def table(rows: list[Row]) -> str:
    """The rows as a Markdown table (readable in a terminal, pasteable into the README)."""
    head = ["id", "what", "distviz", "baseline", "ratio / value", "target", "met?"]
    body = []
    for r in rows:
        met = "error" if r.error else ("-" if r.met is None else ("yes" if r.met else "**no**"))
        body.append([r.id, r.what, r.distviz, r.baseline, r.value, r.target, met])
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
    lines = ["| " + " | ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)) + " |",
             "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines += ["| " + " | ".join(c.ljust(w) for c, w in zip(b, widths, strict=True)) + " |" for b in body]
    return "\n".join(lines)


def say(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# -- the benchmarks ------------------------------------------------------------------------------

def distviz_cmd() -> list[str]:
    exe = shutil.which("distviz")
    return [exe] if exe else [sys.executable, "-m", "distviz"]


def distviz_run(b: Bench, key: str, args: list[str]) -> float:
    """Time ``distviz run ARGS > /dev/null``; note an exit status other than 0 under the table."""
    wall, _out, code = run_child([*distviz_cmd(), "run", *args], cwd=b.tmp, stdout_devnull=True,
                                 ok_codes=DISTVIZ_OK)
    if code != 0:
        note = (f"{key}: `distviz run` exited with status {code} (8: the replay disagrees with "
                "PyTorch's real run); timed anyway")
        if note not in b.notes:
            b.notes.append(note)
    return wall


def bench_b1(b: Bench) -> list[Row]:
    scenario = str(SCENARIOS / "design_note.yaml")
    out = str(b.tmp / "design_note.trace.json")
    for i in range(b.repeat):
        sides: list[tuple[str, Callable[[], float]]] = [
            ("b1.distviz", lambda: distviz_run(b, "B1", [scenario, "-o", out])),
            ("b1.base", lambda: run_child([sys.executable, str(BENCH / "baseline_design_note.py")],
                                          cwd=b.tmp, stdout_devnull=True)[0])]
        for key, fn in sides if i % 2 == 0 else sides[::-1]:
            b.add(key, fn())
    r, text = ratio_cell(b.samples["b1.distviz"], b.samples["b1.base"])
    return [Row("B1", "design_note: `distviz run` vs bare 2-worker script (wall)",
                cell(b.samples["b1.distviz"], "s"), cell(b.samples["b1.base"], "s"), text,
                "ratio <= 1.0", r <= 1.0)]


def bench_b2(b: Bench) -> list[Row]:
    s = b.sizes
    scenario = str(SCENARIOS / "pipeline.yaml")
    out = str(b.pipeline_trace)
    sets = ["--set", f"micro={s.micro}", "--set", f"depth={s.depth}"]
    for i in range(b.repeat):
        def dv() -> float:
            return distviz_run(b, "B2", [scenario, *sets, "-o", out])

        def base() -> float:
            import json
            wall, text, _code = run_child([sys.executable, str(BENCH / "baseline_pipeline.py"),
                                    "--micro", str(s.micro), "--depth", str(s.depth), "--json"],
                                   cwd=b.tmp)
            b.add("b2.base_backward", float(json.loads(text.splitlines()[-1])["backward_s"]))
            return wall
        sides = [("b2.distviz", dv), ("b2.base", base)]
        for key, fn in sides if i % 2 == 0 else sides[::-1]:
            b.add(key, fn())
    r, text = ratio_cell(b.samples["b2.distviz"], b.samples["b2.base"])
    return [Row("B2", f"pipeline micro={s.micro} depth={s.depth}, 4 workers: `distviz run` vs "
                "bare script (wall)", cell(b.samples["b2.distviz"], "s"),
                cell(b.samples["b2.base"], "s"), text, "ratio <= 1.5", r <= 1.5)]


def bench_b3(b: Bench) -> list[Row]:
    sizes = b.sizes.synthetic
    for _ in range(b.repeat):
        for n in sizes:
            res = run_json("bench_replay.py", ["--nodes", str(n)])
            b.add(f"b3.t{n}", float(res["replay_s"]))
            b.add(f"b3.cpu{n}", float(res["replay_cpu_s"]))
            b.add(f"b3.mem{n}", float(res["peak_rss_mib"]))
            b.add(f"b3.nodes{n}", float(res["nodes"]))
    small, mid, big = sizes
    rows = []
    for n in sizes:
        t = b.samples[f"b3.t{n}"]
        met = statistics.median(t) <= 10.0 if n == big else None
        cpu = statistics.median(b.samples[f"b3.cpu{n}"])
        rows.append(Row("B3", f"replay, synthetic {int(b.samples[f'b3.nodes{n}'][0]):,} nodes "
                        "(wall; CPU in the value)", cell(t, "s"),
                        value=f"{statistics.median(t):.3f} s (cpu {cpu:.3f} s)",
                        target="<= 10 s" if n == big else "-", met=met))
    mem = b.samples[f"b3.mem{big}"]
    rows.append(Row("B3", f"replay, synthetic {int(b.samples[f'b3.nodes{big}'][0]):,} nodes: "
                    "peak RSS of the process "
                    "(trace + replay)", cell(mem, "MiB"),
                    value=f"{statistics.median(mem) / GIB_MIB:.2f} GiB", target="<= 2 GiB",
                    met=statistics.median(mem) <= 2 * GIB_MIB))
    r, text = ratio_cell(b.samples[f"b3.t{big}"], b.samples[f"b3.t{mid}"])
    rc, _ = ratio_cell(b.samples[f"b3.cpu{big}"], b.samples[f"b3.cpu{mid}"])
    rows.append(Row("B3", f"replay scaling: time({big:,}) / time({mid:,}) (wall; CPU in the "
                    "value)", value=f"{text} (cpu {rc:.2f})", target="<= 11", met=r <= 11))
    _ = small
    return rows


def bench_b7(b: Bench) -> list[Row]:
    s = b.sizes
    res = run_json("bench_observe.py", ["--micro", str(s.micro), "--depth", str(s.depth),
                                        "--repeat", str(b.repeat)])
    b.samples["b7.observe"] = [float(x) for x in res["observe_all"]]
    b.samples["b7.plain"] = [float(x) for x in res["plain_all"]]
    r, text = ratio_cell(b.samples["b7.observe"], b.samples["b7.plain"])
    return [Row("B7", "real dist backward (B2 graph): distviz hooks on vs off "
                "(real.pass_seconds)", cell(b.samples["b7.observe"], "s"),
                cell(b.samples["b7.plain"], "s"), text, "ratio <= 1.5", r <= 1.5)]


def bench_b4(b: Bench) -> list[Row]:
    if not b.pipeline_trace.exists():
        raise BenchError("needs B2's trace: run B2 first (--only B2,B4)")
    if "b7.plain" not in b.samples:
        bench_b7(b)
    res = run_json("bench_replay.py", ["--trace", str(b.pipeline_trace),
                                       "--repeat", str(b.repeat)])
    replay_s = [float(res["replay_s"])]  # median of --repeat replays in one process
    b.samples["b4.replay"] = replay_s
    plain = b.samples["b7.plain"]
    r = replay_s[0] / statistics.median(plain)
    base_bw = b.samples.get("b2.base_backward", [])
    note = f"; bare script's own backward {cell(base_bw, 's')}" if base_bw else ""
    return [Row("B4", f"replay of B2's trace ({int(res['nodes']):,} nodes) vs PyTorch's "
                f"dist backward, no hooks{note}",
                f"{fmt_num(res['replay_s'], 's')} [{fmt_num(res['replay_min_s'], 's')}-"
                f"{fmt_num(res['replay_max_s'], 's')}]", cell(plain, "s"), f"{r:.2f}",
                "ratio <= 0.5", r <= 0.5)]


def bench_b5(b: Bench) -> list[Row]:
    rows = []
    if b.pipeline_trace.exists():
        res = run_json("bench_trace.py", ["--size", str(b.pipeline_trace)])
        bpn = float(res["bytes_per_node"])
        rows.append(Row("B5", f"B2's trace on disk ({int(res['nodes']):,} nodes, "
                        f"{int(res['real_events']):,} real events)", f"{res['bytes']:,} B",
                        value=f"{bpn:.0f} B/node", target="<= 400 B/node", met=bpn <= 400))
    n = b.sizes.load_nodes
    path = b.tmp / f"synthetic{n}.trace.json"
    made = run_json("bench_trace.py", ["--make", str(n), "--out", str(path)])
    bpn = float(made["bytes_per_node"])
    rows.append(Row("B5", f"synthetic trace on disk ({int(made['nodes']):,} nodes)",
                    f"{made['bytes']:,} B", value=f"{bpn:.0f} B/node", target="<= 400 B/node",
                    met=bpn <= 400))
    for _ in range(b.repeat):
        res = run_json("bench_trace.py", ["--load", str(path)])
        b.add("b5.load", float(res["load_s"]))
        b.add("b5.load_cpu", float(res["load_cpu_s"]))
    t = statistics.median(b.samples["b5.load"])
    cpu = statistics.median(b.samples["b5.load_cpu"])
    rows.append(Row("B5", f"`distviz.trace.load` of the {int(made['nodes']):,}-node trace "
                    "(fresh process; wall, CPU in the value)", cell(b.samples["b5.load"], "s"),
                    value=f"{t:.2f} s (cpu {cpu:.2f} s)",
                    target="<= 5 s", met=t <= 5.0))
    path.unlink(missing_ok=True)
    return rows


def bench_b6(b: Bench) -> list[Row]:
    if not b.pipeline_trace.exists():
        raise BenchError("needs B2's trace: run B2 first (--only B2,B6)")
    res = run_json("bench_pictures.py", ["--trace", str(b.pipeline_trace),
                                         "--repeat", str(b.repeat)])
    n = int(res["nodes"])
    rows = []
    for fmt in ("png", "svg"):
        w, h = int(res[f"{fmt}_width"]), int(res[f"{fmt}_height"])
        ok = not res[f"{fmt}_shrunk"] and 0 < max(w, h) <= 10_000
        rows.append(Row("B6", f"default {fmt.upper()} of B2's trace ({n:,} nodes): the view "
                        "chosen, its size, whether Graphviz shrank it",
                        f"{res[f'{fmt}_view']}, {w:,} x {h:,} px, "
                        f"{'shrunk' if res[f'{fmt}_shrunk'] else 'not shrunk'}",
                        value=f"{float(res[f'{fmt}_s']):.2f} s to choose and draw",
                        target="readable: <= 10,000 px, not shrunk", met=ok))
    med = float(res["summary_s"])
    rows.append(Row("B6", "worker summary of B2's trace (`--view summary`, SVG; trace loaded)",
                    f"{fmt_num(med, 's')} [{fmt_num(res['summary_min_s'], 's')}-"
                    f"{fmt_num(res['summary_max_s'], 's')}]", value=f"{med:.2f} s",
                    target="< 1 s", met=med < 1.0))
    cmd = float(res["summary_cmd_s"])
    rows.append(Row("B6", "the whole `distviz export TRACE --view summary -f svg` command "
                    "(start-up, load, replay included)",
                    f"{fmt_num(cmd, 's')} [{fmt_num(res['summary_cmd_min_s'], 's')}-"
                    f"{fmt_num(res['summary_cmd_max_s'], 's')}]", value=f"{cmd:.2f} s"))
    return rows


def bench_b8(b: Bench) -> list[Row]:
    n = b.sizes.viewer_nodes
    if shutil.which("chromium") is None and shutil.which("chromium-browser") is None:
        return [Row("B8", "HTML viewer in headless Chromium: skipped, no chromium on PATH")]
    res = run_json("bench_viewer.py", ["--nodes", str(n), "--repeat", str(min(b.repeat, 3))],
                   timeout=1800)
    what = f"HTML viewer, synthetic {n:,} nodes"
    exp, paint = float(res["export_s"]), float(res["paint_ms"]) / 1000
    step = float(res["step_ms"])
    return [
        Row("B8", f"{what}: `distviz export -f html` (fresh process; page "
            f"{int(res['html_bytes']) / 2**20:.1f} MiB)",
            f"{fmt_num(exp, 's')} [{fmt_num(res['export_min_s'], 's')}-"
            f"{fmt_num(res['export_max_s'], 's')}]", value=f"{exp:.2f} s", target="<= 5 s",
            met=exp <= 5.0),
        Row("B8", f"{what}: first paint in headless Chromium (opens on {res['first_view']})",
            f"{paint:.3f} s (max {float(res['paint_max_ms']) / 1000:.3f} s)",
            value=f"{paint:.2f} s", target="<= 3 s", met=paint <= 3.0),
        Row("B8", f"{what}: next step in the full view at {float(res['zoom']):.0%} zoom, key to "
            f"shown frame ({int(res['steps'])} steps; script alone "
            f"{float(res['step_js_ms']):.1f} ms; every node laid out in "
            f"{float(res['full_ms']):.0f} ms)",
            f"{step:.1f} ms (max {float(res['step_max_ms']):.1f} ms)", value=f"{step:.1f} ms",
            target="<= 50 ms", met=step <= 50.0),
        Row("B8", f"{what}: search finds the variable {res.get('search_var')} and shows it",
            f"{float(res.get('search_ms', 0)):.0f} ms",
            value="found" if res.get("search_found") else "not found", target="found",
            met=bool(res.get("search_found"))),
    ]


#: The code when the big-graph issue was filed: B9 compares with it in the same run (its own
#: numbers then, on this machine: load 5.5 s, replay 8.5 s, 1.5 GiB; targets 2 s, 5 s, 1 GiB).
B9_BASELINE = "fcadb95"
B9_RATIO_TARGETS = {"load": 2 / 5.5, "replay": 5 / 8.5, "rss": 1 / 1.5}


def _has_revision(rev: str) -> bool:
    """Whether the checkout bench/ lives in is a git repository that has ``rev``."""
    proc = subprocess.run(["git", "-C", str(BENCH.parent), "cat-file", "-e", f"{rev}^{{commit}}"],
                          capture_output=True, check=False)
    return proc.returncode == 0


def bench_b9(b: Bench) -> list[Row]:
    n = b.sizes.load_nodes
    path = b.tmp / f"big{n}.trace.json"
    run_json("bench_trace.py", ["--make", str(n), "--out", str(path)], timeout=1800)
    # the baseline needs git and that revision: not in --quick, nor in a copy without history
    base = [] if b.quick or not _has_revision(B9_BASELINE) else ["--baseline", B9_BASELINE]
    if not b.quick and not base:
        b.notes.append(f"B9: no git revision {B9_BASELINE} here, so no ratios")
    for _ in range(b.repeat):
        res = run_json("bench_big.py", ["--trace", str(path), *base], timeout=1800)
        for key, value, ratio in (("load", "load_s", "load_ratio"),
                                  ("replay", "replay_s", "replay_ratio"),
                                  ("rss", "peak_rss_mib", "peak_rss_ratio")):
            b.add(f"b9.{key}", float(res[value]))
            if base:
                b.add(f"b9.{key}.ratio", float(res[ratio]))
    path.unlink(missing_ok=True)
    nodes = int(res["nodes"])
    load, rep = statistics.median(b.samples["b9.load"]), statistics.median(b.samples["b9.replay"])
    rss = statistics.median(b.samples["b9.rss"])
    rows = [
        Row("B9", f"{nodes:,}-node trace file: `distviz.trace.load` (fresh process)",
            cell(b.samples["b9.load"], "s"), value=f"{load:.2f} s", target="<= 2 s",
            met=load <= 2.0),
        Row("B9", f"{nodes:,}-node trace file: FAST replay after the load",
            cell(b.samples["b9.replay"], "s"), value=f"{rep:.2f} s", target="<= 5 s",
            met=rep <= 5.0),
        Row("B9", f"{nodes:,}-node trace file: peak RSS of load + replay",
            cell(b.samples["b9.rss"], "MiB"), value=f"{rss / GIB_MIB:.2f} GiB",
            target="<= 1 GiB", met=rss <= GIB_MIB),
    ]
    for key, what in (("load", "load"), ("replay", "replay"), ("rss", "peak RSS")):
        if not base:
            break
        r = statistics.median(b.samples[f"b9.{key}.ratio"])
        goal = B9_RATIO_TARGETS[key]
        rows.append(Row("B9", f"{nodes:,}-node trace file: {what} / the same with the code of "
                        f"{B9_BASELINE} (same run)", cell(b.samples[f"b9.{key}.ratio"], ""),
                        value=f"{r:.2f}", target=f"<= {goal:.2f}", met=r <= goal))
    return rows


def bench_l1(b: Bench) -> list[Row]:
    for _ in range(b.repeat):
        res = run_json("bench_log.py", ["--nodes", str(b.sizes.log_nodes)])
        b.add("l1.ratio", float(res["ratio"]))
        b.add("l1.last", float(res["last_us"]))
    r = statistics.median(b.samples["l1.ratio"])
    return [Row("L1", f"terminal log ({b.sizes.log_nodes:,} nodes): per-step time, last 10% / "
                "first 10%", cell(b.samples["l1.last"], "us") + " per step (last 10%)",
                value=cell(b.samples["l1.ratio"], ""), target="~1 (<= 1.5)", met=r <= 1.5)]


# B2 before B4/B5/B6 (they use its trace), B7 before B4 (its denominator).
BENCHES: dict[str, Callable[[Bench], list[Row]]] = {
    "B1": bench_b1, "B2": bench_b2, "B7": bench_b7, "B4": bench_b4, "B3": bench_b3,
    "B5": bench_b5, "B6": bench_b6, "B8": bench_b8, "B9": bench_b9, "L1": bench_l1}
ORDER = ["B1", "B2", "B3", "B4", "B5", "B6", "B7", "B8", "B9", "L1"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    parser.add_argument("--repeat", type=int, default=5, help="runs per benchmark (default 5)")
    parser.add_argument("--only", default="", help="comma-separated ids, e.g. B1,B3")
    parser.add_argument("--keep", type=Path, help="keep the traces in this folder")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat {args.repeat}: expected 1 or more")
    wanted = [x.strip().upper() for x in args.only.split(",") if x.strip()] or list(BENCHES)
    unknown = [w for w in wanted if w not in BENCHES]
    if unknown:
        parser.error(f"--only: unknown id {', '.join(unknown)} (expected {', '.join(ORDER)})")
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        tmp = args.keep.resolve()
    else:
        tmp = Path(tempfile.mkdtemp(prefix="distviz-bench-"))
    b = Bench(sizes=QUICK if args.quick else FULL, repeat=args.repeat, tmp=tmp, quick=args.quick)
    results: dict[str, list[Row]] = {}
    t0 = time.perf_counter()
    try:
        for key in BENCHES:
            if key not in wanted:
                continue
            say(f"{key} ...")
            t = time.perf_counter()
            try:
                results[key] = BENCHES[key](b)
            except (BenchError, OSError, ValueError, KeyError, RuntimeError) as exc:
                first = str(exc).strip().splitlines()
                results[key] = [Row(key, "failed to run", error=str(exc),
                                    value=first[0][:80] if first else type(exc).__name__)]
                say(f"{key} failed: {exc}")
            say(f"{key} done in {time.perf_counter() - t:.1f} s")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    rows = [r for key in ORDER if key in results for r in results[key]]
    mode = "quick sizes: the numbers say nothing about the targets" if args.quick else "full sizes"
    print(f"distviz benchmarks ({mode}; {args.repeat} runs each; cells are median [min-max]; "
          f"total {time.perf_counter() - t0:.0f} s)\n")
    print(table(rows))
    for note in b.notes:
        print(f"\nnote: {note}")
    errors = [r for r in rows if r.error]
    for r in errors:
        print(f"\n{r.id} failed:\n{r.error}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
