"""W1: the what-if simulation's predicted backward wall time against real runs.

    python bench/bench_whatif.py [--repeat 5] [--only design_note,pipeline] [--no-injected] [--json]

For every shipped scenario whose real backward completes, ``repeat`` pairs of runs (one fork
server for all, reference off), alternating so that machine noise hits both halves:

* **same run** (target: within 25 %): ``predict(trace)`` without changes against that run's own
  measured time; the simulation must reproduce it (the largest error of all the runs);
* **next run** (no target): the median prediction from the first half of the runs against the
  median measured time of the second half: how much runs of one scenario differ on this
  machine, which no prediction from one run can do better than.

Then, on ``scenarios/pipeline.yaml`` with ``--set width=256 --set micro=8`` (``--pipeline-set``;
large enough that a slower stage's compute shows above the machine's noise), for each injected
delay (``--inject-delay``): the median prediction from ``repeat`` undelayed runs with the
matching ``--what-if`` (``recv=1ms`` -> ``recv=1ms``, ``stage1=3x`` -> ``slow=stage1:3x``)
against the median of ``repeat`` delayed real runs, alternating. Prints a Markdown table;
``--json`` prints one JSON line instead.
"""

from __future__ import annotations

import argparse
import json
import statistics
from typing import Any

from common import SCENARIOS

from distviz.analyses.changes import WhatIf, parse_inject_delay, what_if_for_injection
from distviz.analyses.whatif import predict
from distviz.runner.supervisor.run import RunOptions, run_scenario, stop_server
from distviz.scenario import load_scenario
from distviz.trace import Trace

INJECTED = ("recv=1ms", "recv=3ms", "stage0=2x", "stage1=3x", "stage3=5x")
TARGET = 0.25


def _run(scenario: Any, inject: dict[str, Any]) -> Trace | None:
    """One real run; the trace when its backward completed, else ``None``."""
    opts = RunOptions(reference=False, keep_server=True, hang_timeout=30.0, inject=inject)
    result = run_scenario(scenario, opts)
    trace = result.trace
    if result.error is not None or trace is None or trace.real is None:
        return None
    return trace if trace.real.get("outcome") == "completed" else None


def _wall_ms(trace: Trace) -> float:
    assert trace.real is not None
    return 1000.0 * sum(float(s) for s in trace.real["pass_seconds"])


def _spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f} [{min(xs):.2f}-{max(xs):.2f}]"


def _row(what: str, kind: str, measured: list[float], predicted: list[float],
         target: bool = True) -> dict[str, Any]:
    m, p = statistics.median(measured), statistics.median(predicted)
    err = (p - m) / m if m else 0.0
    return {"what": what, "kind": kind, "measured_ms": measured, "predicted_ms": predicted,
            "error": err, "met": abs(err) <= TARGET if target else None}


def scenario_rows(name: str, repeat: int) -> list[dict[str, Any]]:
    """Same-run and next-run rows for one scenario; ``[]`` when its backward never completes."""
    scenario = load_scenario(str(SCENARIOS / f"{name}.yaml"))
    first: list[Trace] = []
    second: list[Trace] = []
    for _ in range(repeat):
        for half in (first, second):
            t = _run(scenario, {})
            if t is None:
                return []
            half.append(t)
    both = first + second
    walls = [_wall_ms(t) for t in both]
    preds = [predict(t).predicted_us / 1000.0 for t in both]
    same = max(abs(p - w) / w for p, w in zip(preds, walls, strict=True))
    return [{"what": name, "kind": "same run", "measured_ms": walls, "predicted_ms": preds,
             "error": same, "met": same <= TARGET},
            _row(name, "next run", walls[repeat:], preds[:repeat], target=False)]


def _durations(traces: list[Trace]) -> dict[str, list[float]]:
    """Each node's measured durations (µs) over ``traces``."""
    out: dict[str, list[float]] = {}
    for t in traces:
        for ev in (t.real or {}).get("events") or []:
            if ev.get("dur_us") is not None:
                out.setdefault(str(ev["node"]), []).append(float(ev["dur_us"]))
    return out


def realized(wi: WhatIf, base: list[Trace], delayed: list[Trace]) -> WhatIf:
    """The delay the machine really gave: a recv's extra time, or a worker's factor, as the
    median over nodes of the delayed runs' durations against the undelayed runs' medians (a
    sleep can wake up late on a busy machine)."""
    b, d = _durations(base), _durations(delayed)
    med = {n: statistics.median(v) for n, v in b.items() if v}
    recv_us = wi.recv_us
    if wi.recv_us:
        extra = [x - med[n] for n, xs in d.items() if "RecvRpcBackward" in n and n in med
                 for x in xs]
        recv_us = statistics.median(extra) if extra else wi.recv_us
    slow = []
    for w, _f in wi.slow:
        ratios = [x / med[n] for n, xs in d.items() if n.startswith(f"{w}/") and med.get(n)
                  for x in xs]
        slow.append((w, statistics.median(ratios) if ratios else _f))
    return WhatIf(wi.latency_us, wi.bandwidth_bits, tuple(slow), recv_us)


def injected_rows(repeat: int, settings: tuple[str, ...],
                  params: dict[str, str]) -> list[dict[str, Any]]:
    """One row per injected delay on the pipeline scenario with ``params``; each row also has
    the prediction with the delay the machine really gave (``realized``)."""
    scenario = load_scenario(str(SCENARIOS / "pipeline.yaml"), params)
    sets = "".join(f" --set {k}={v}" for k, v in sorted(params.items()))
    base: list[Trace] = []
    delayed: dict[str, list[Trace]] = {s: [] for s in settings}
    for _ in range(repeat):
        t = _run(scenario, {})
        if t is not None:
            base.append(t)
        for s in settings:
            d = _run(scenario, parse_inject_delay([s], list(scenario.workers)))
            if d is not None:
                delayed[s].append(d)
    rows = []
    for s in settings:
        wi = what_if_for_injection(parse_inject_delay([s], list(scenario.workers)))
        preds = [predict(t, wi).predicted_us / 1000.0 for t in base]
        if not preds or not delayed[s]:
            continue
        row = _row(f"pipeline{sets} --inject-delay {s} (what-if {wi.describe()})",
                   "injected", [_wall_ms(d) for d in delayed[s]], preds)
        real_wi = realized(wi, base, delayed[s])
        real_preds = [predict(t, real_wi).predicted_us / 1000.0 for t in base]
        m = statistics.median(row["measured_ms"])
        row["realized"] = {"what_if": real_wi.describe(), "predicted_ms": real_preds,
                           "error": (statistics.median(real_preds) - m) / m}
        rows.append(row)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table."""
    out = ["| scenario | compared | measured ms | predicted ms | error | target | met? |",
           "|---|---|---|---|---|---|---|"]
    notes = []
    for r in rows:
        err = f"{100 * r['error']:+.0f} %" if r["kind"] != "same run" else \
            f"{100 * r['error']:.2g} % (largest)"
        target, met = ("within 25 %", "yes" if r["met"] else "**no**") \
            if r["met"] is not None else ("-", "-")
        out.append(f"| {r['what']} | {r['kind']} | {_spread(r['measured_ms'])} | "
                   f"{_spread(r['predicted_ms'])} | {err} | {target} | {met} |")
        if "realized" in r:
            x = r["realized"]
            notes.append(f"- {r['what'].split(' (what-if')[0]}: the machine gave "
                         f"{x['what_if']}; predicted with that: "
                         f"{_spread(x['predicted_ms'])} ms ({100 * x['error']:+.0f} %)")
    return "\n".join(out + ([""] + notes if notes else []))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", default="", help="comma-separated scenario names")
    parser.add_argument("--no-injected", action="store_true")
    parser.add_argument("--pipeline-set", default="width=256,micro=8",
                        help="params of the pipeline for the injected delays")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n] or sorted(
        p.stem for p in SCENARIOS.glob("*.yaml"))
    rows: list[dict[str, Any]] = []
    try:
        for name in names:
            rows.extend(scenario_rows(name, max(1, args.repeat)))
        if not args.no_injected:
            params = dict(kv.split("=", 1) for kv in args.pipeline_set.split(",") if kv)
            rows.extend(injected_rows(max(1, args.repeat), INJECTED, params))
    finally:
        stop_server()
    if args.json:
        print(json.dumps({"rows": rows}))
    else:
        print(table(rows))


if __name__ == "__main__":
    main()
