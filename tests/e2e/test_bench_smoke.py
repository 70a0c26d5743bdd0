"""The benchmarks cannot rot: every bench/ script runs once on tiny sizes (``run_all.py --quick``).

Benchmarks are not tests: nothing here checks a speed target, only that each script still runs
against the current library and that the table has a row for every benchmark. The scripts of
the selected tests run two at a time (``side_by_side``); each test reads its own.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import pytest
from guards import HANG_GUARD_S
from side_by_side import marked, side_by_side

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench"

Ran = subprocess.CompletedProcess[str]

#: Each test's script and arguments, by the name the test reads it by.
SCRIPTS: dict[str, list[str]] = {
    "run_all": ["run_all.py", "--quick", "--repeat", "1"],
    "profile_hooks": ["profile_hooks.py", "--micro", "2", "--depth", "1", "--repeat", "1",
                      "--json"],
    "whatif": ["bench_whatif.py", "--repeat", "1", "--only", "design_note", "--no-injected",
               "--json"],
    "fuzz": ["bench_fuzz.py", "--count", "2", "--seed", "5"],
    "fuzz_load": ["bench_fuzz_load.py", "--runs", "1", "--seeds", "5", "--count", "1",
                  "--training", "0", "--busy", "0", "--json"],
    "trace_cmd": ["bench_trace_cmd.py", "--iterations", "2", "--repeat", "1", "--modes", "all",
                  "--json"],
    "trace_fixed": ["bench_trace_fixed.py", "--repeat", "1", "--plain-s", "10", "--json"],
}


def _script(args: list[str]) -> Ran:
    return subprocess.run([sys.executable, str(BENCH / args[0]), *args[1:]], cwd=REPO,
                          capture_output=True, text=True, timeout=HANG_GUARD_S, check=False)


@pytest.fixture(scope="module")
def ran(request: pytest.FixtureRequest) -> Iterator[Callable[[str], Ran]]:
    with side_by_side({name: partial(_script, SCRIPTS[name])
                       for name in marked(request)}) as result:
        yield result


@pytest.fixture
def run_all_module(monkeypatch: pytest.MonkeyPatch) -> object:
    monkeypatch.syspath_prepend(str(BENCH))
    import run_all  # bench/run_all.py (imports stdlib and bench/common.py only)
    return run_all


def test_table_cells_show_median_min_and_max(run_all_module: object) -> None:
    ra = run_all_module
    assert ra.cell([3.0, 1.0, 2.0], "s") == "2.000 s [1.000 s-3.000 s]"  # type: ignore[attr-defined]
    assert ra.ratio_cell([2.0, 4.0], [2.0, 2.0]) == (1.5, "1.50 [1.00-2.00]")  # type: ignore[attr-defined]
    row = ra.Row("B9", "what", met=False)  # type: ignore[attr-defined]
    text = ra.table([row])  # type: ignore[attr-defined]
    assert text.splitlines()[0].startswith("| id ") and "| B9 " in text and "**no**" in text


@pytest.mark.rpc
@pytest.mark.runs("run_all")
def test_run_all_quick_runs_every_benchmark_script(ran: Callable[[str], Ran]) -> None:
    proc = ran("run_all")
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    rows = [ln for ln in proc.stdout.splitlines() if ln.startswith("| B") or ln.startswith("| L")]
    assert {r.split("|")[1].strip() for r in rows} == {"B1", "B2", "B3", "B4", "B5", "B6", "B7",
                                                      "B8", "B9", "L1"}
    assert not any(r.rstrip(" |").endswith("error") for r in rows), proc.stdout


@pytest.mark.runs("profile_hooks")
def test_profile_hooks_runs_on_a_tiny_graph(ran: Callable[[str], Ran]) -> None:
    proc = ran("profile_hooks")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert '"distviz_ratio"' in proc.stdout.splitlines()[-1]


@pytest.mark.rpc
@pytest.mark.runs("whatif")
def test_bench_whatif_runs_on_one_scenario(ran: Callable[[str], Ran]) -> None:
    proc = ran("whatif")
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(proc.stdout.splitlines()[-1])["rows"]
    assert [r["kind"] for r in rows] == ["same run", "next run"]
    assert rows[0]["error"] < 1e-6          # without changes the simulation reproduces the run


@pytest.mark.rpc
@pytest.mark.runs("fuzz")
def test_bench_fuzz_runs_a_tiny_fuzz_and_prints_its_table(ran: Callable[[str], Ran]) -> None:
    proc = ran("fuzz")
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0] == "| what | value |"
    assert any(ln.startswith("| outcome agreement (predicted = real) | ") for ln in lines)
    assert any(ln.startswith("| programs (seed, workers) | 2 (seed 5, 2-6) |") for ln in lines)


@pytest.mark.rpc
@pytest.mark.runs("fuzz_load")
def test_bench_fuzz_load_counts_the_disagreements_of_a_tiny_fuzz(ran: Callable[[str], Ran]) -> None:
    proc = ran("fuzz_load")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.splitlines()[-1])
    assert (out["runs"], out["programs"], out["busy"]) == (1, 1, 0)   # no spinner in the suite
    assert out["disagreements"] == sum(r["disagree"] for r in out["per_run"])


@pytest.mark.rpc
@pytest.mark.runs("trace_cmd")
def test_bench_trace_cmd_runs_on_a_tiny_program(ran: Callable[[str], Ran]) -> None:
    proc = ran("trace_cmd")
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = proc.stdout.splitlines()[-1]
    assert '"all_s"' in report and '"contexts_recorded_all": 2' in report
    assert '"all_cpu_s"' in report


@pytest.mark.rpc
@pytest.mark.runs("trace_fixed")
def test_bench_trace_fixed_measures_each_part(ran: Callable[[str], Ran]) -> None:
    proc = ran("trace_fixed")
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.splitlines()[-1])
    assert report["parent_start_ms"] > 0 and report["process_import_ms"] > 0
    assert report["fixed_ratio"] > 1
