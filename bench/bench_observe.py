"""B7 (and B4's denominator): the real dist_autograd.backward with distviz's hooks vs without.

    python bench/bench_observe.py [--micro 200] [--depth 8] [--repeat 3] [--json]

Runs the pipeline scenario through ``run_scenario`` ``repeat`` times with
``RunOptions(observe=True)`` and ``repeat`` times with ``observe=False``, alternating (one fork
server serves all runs, so start-up is paid once), and reports the backward time PyTorch took in
each, ``real["pass_seconds"]`` (the pass on the initiator, hooks on every recorded node or none).
The single-process reference is off: it runs after the backward and does not change its time.
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from common import SCENARIOS, emit

from distviz.runner.supervisor.run import RunOptions, run_scenario, stop_server
from distviz.scenario import load_scenario


def _pass_seconds(scenario: Any, observe: bool) -> float:
    opts = RunOptions(observe=observe, reference=False, keep_server=True, hang_timeout=60.0)
    result = run_scenario(scenario, opts)
    if result.error is not None:
        raise result.error
    assert result.trace is not None and result.trace.real is not None
    real = result.trace.real
    if real.get("outcome") != "completed":
        raise RuntimeError(f"the real backward did not complete: {real.get('outcome')}")
    return float(sum(real["pass_seconds"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--micro", type=int, default=200)
    parser.add_argument("--depth", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    overrides = {"micro": str(args.micro), "depth": str(args.depth)}
    scenario = load_scenario(str(SCENARIOS / "pipeline.yaml"), overrides)
    on: list[float] = []
    off: list[float] = []
    try:
        for i in range(max(1, args.repeat)):
            order = (True, False) if i % 2 == 0 else (False, True)
            for observe in order:
                (on if observe else off).append(_pass_seconds(scenario, observe))
    finally:
        stop_server()
    emit({"observe_s": statistics.median(on), "observe_min_s": min(on),
          "observe_max_s": max(on), "plain_s": statistics.median(off), "plain_min_s": min(off),
          "plain_max_s": max(off), "observe_all": on, "plain_all": off}, args.json)


if __name__ == "__main__":
    main()
