"""F1: fidelity at scale: random programs on real workers, the replay against PyTorch.

    python bench/bench_fuzz.py [--count 500] [--seed 0] [--workers 2-6] [--training F] [--json]
    python bench/bench_fuzz.py --from-json REPORT     # the table of a `distviz fuzz --json` report

Runs ``distviz.fuzz.runner.fuzz`` (what ``distviz fuzz`` runs; one fork server serves every
program) and prints the table for ``bench/README.md``: outcome agreement, per-worker order
agreement with the observed arrival order, how often the FIFO guess alone was exact, the
executed set, gradients against the single-process reference, outcome counts and wall time.
Disagreements are listed with their minimal programs (as scenario text, under ``--json``);
nothing is written to disk.
"""

from __future__ import annotations

import argparse
import json
import statistics
from typing import Any

from common import emit

from distviz.fuzz.runner import FuzzOptions, FuzzReport, fuzz


def table(summary: dict[str, Any], per_program_s: list[float]) -> str:
    """The Markdown table of one fuzz run."""
    def pct(key: str) -> str:
        v = summary.get(key)
        return "n/a" if v is None else f"{v:.2f} %"

    pred = summary["predicted"]
    real = summary["real"]
    rows = [
        ("programs (seed, workers)", f"{summary['count']} (seed {summary['seed']}, "
                                     f"{summary['workers'][0]}-{summary['workers'][1]})"),
        ("agree / disagree / failed to run", f"{summary['agree']} / {summary['disagree']} / "
                                             f"{summary['failed']}"),
        ("outcome agreement (predicted = real)", pct("outcome_agreement_pct")),
        ("order agreement, every worker, with the observed arrival order",
         pct("order_agreement_pct")),
        ("FIFO guess alone exact", pct("fifo_exact_pct")),
        ("executed set equal", pct("executed_pct")),
        ("leaves with gradients equal", pct("leaves_pct")),
        ("gradients equal the reference (completed runs)",
         f"{pct('gradients_equal_pct')} of {summary['gradients_compared']}"),
        ("outcomes predicted: completed / hang / error",
         " / ".join(str(pred.get(k, 0)) for k in ("completed", "hang", "error"))),
        ("outcomes real: completed / hang / error",
         " / ".join(str(real.get(k, 0)) for k in ("completed", "hang", "error"))),
        *([("training programs (2-3 iterations; every context judged, final parameters "
            "against the reference)", str(summary["training"]))] if summary.get("training")
          else []),
        ("wall time", f"{summary['wall_s']:.0f} s ({statistics.median(per_program_s):.2f} s "
                      "median per program)" if per_program_s else f"{summary['wall_s']:.0f} s"),
    ]
    lines = ["| what | value |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", default="2-6")
    parser.add_argument("--hang-timeout", type=float, default=2.0)
    parser.add_argument("--training", type=float, default=0.0,
                        help="fraction (0-1) of training programs")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--from-json", metavar="REPORT",
                        help="print the table of a saved `distviz fuzz --json` report")
    args = parser.parse_args()
    if args.from_json:
        with open(args.from_json, encoding="utf-8") as fh:
            saved = json.load(fh)
        per = [p["seconds"] for p in saved["programs"] if "reproduced" not in p]
        print(table(saved["summary"], per))
        return
    lo, _, hi = args.workers.partition("-")
    options = FuzzOptions(count=args.count, seed=args.seed, min_workers=int(lo),
                          max_workers=int(hi or lo), hang_timeout=args.hang_timeout,
                          training=args.training)
    report: FuzzReport = fuzz(options)
    summary = report.summary()
    per = [r.seconds for r in report.results if r.finding is None]
    found = [{"name": r.name, "disagreements": list(r.judged.disagreements) if r.judged
              else [], "error": r.error, "reproduced": r.finding.reproduced,
              "minimal": r.finding.minimal}
             for r in report.results if r.finding is not None]
    if not args.json:
        print(table(summary, per))
        for f in found:
            print(f"\n{f['name']}: {f['disagreements'] or f['error']} "
                  f"(reproduced: {f['reproduced']})\n{f['minimal']}")
        return
    emit({**summary, "median_program_s": statistics.median(per) if per else None,
          "findings": found}, True)


if __name__ == "__main__":
    main()
