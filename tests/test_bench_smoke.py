"""The benchmarks cannot rot: every bench/ script runs once on tiny sizes (``run_all.py --quick``).

Benchmarks are not tests: nothing here checks a speed target, only that each script still runs
against the current library and that the table has a row for every benchmark.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from guards import HANG_GUARD_S

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"


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
def test_run_all_quick_runs_every_benchmark_script() -> None:
    proc = subprocess.run([sys.executable, str(BENCH / "run_all.py"), "--quick", "--repeat", "1"],
                          cwd=REPO, capture_output=True, text=True, timeout=HANG_GUARD_S, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    rows = [ln for ln in proc.stdout.splitlines() if ln.startswith("| B") or ln.startswith("| L")]
    assert {r.split("|")[1].strip() for r in rows} == {"B1", "B2", "B3", "B4", "B5", "B6", "B7",
                                                      "B8", "B9", "L1"}
    assert not any(r.rstrip(" |").endswith("error") for r in rows), proc.stdout


def test_profile_hooks_runs_on_a_tiny_graph() -> None:
    proc = subprocess.run([sys.executable, str(BENCH / "profile_hooks.py"), "--micro", "2",
                           "--depth", "1", "--repeat", "1", "--json"],
                          cwd=REPO, capture_output=True, text=True, timeout=HANG_GUARD_S, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert '"distviz_ratio"' in proc.stdout.splitlines()[-1]


@pytest.mark.rpc
def test_bench_whatif_runs_on_one_scenario() -> None:
    proc = subprocess.run([sys.executable, str(BENCH / "bench_whatif.py"), "--repeat", "1",
                           "--only", "design_note", "--no-injected", "--json"],
                          cwd=REPO, capture_output=True, text=True, timeout=HANG_GUARD_S, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(proc.stdout.splitlines()[-1])["rows"]
    assert [r["kind"] for r in rows] == ["same run", "next run"]
    assert rows[0]["error"] < 1e-6          # without changes the simulation reproduces the run


@pytest.mark.rpc
def test_bench_fuzz_runs_a_tiny_fuzz_and_prints_its_table() -> None:
    proc = subprocess.run([sys.executable, str(BENCH / "bench_fuzz.py"), "--count", "2",
                           "--seed", "5"], cwd=REPO, capture_output=True, text=True, timeout=HANG_GUARD_S,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0] == "| what | value |"
    assert any(ln.startswith("| outcome agreement (predicted = real) | ") for ln in lines)
    assert any(ln.startswith("| programs (seed, workers) | 2 (seed 5, 2-6) |") for ln in lines)


@pytest.mark.rpc
def test_bench_trace_cmd_runs_on_a_tiny_program() -> None:
    proc = subprocess.run([sys.executable, str(BENCH / "bench_trace_cmd.py"), "--iterations", "2",
                           "--repeat", "1", "--modes", "all", "--json"],
                          cwd=REPO, capture_output=True, text=True, timeout=HANG_GUARD_S, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = proc.stdout.splitlines()[-1]
    assert '"all_s"' in report and '"contexts_recorded_all": 2' in report
    assert '"all_cpu_s"' in report
