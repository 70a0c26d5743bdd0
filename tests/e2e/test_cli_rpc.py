"""The command-line shell on real RPC workers: ``distviz run --json`` and ``--inject-delay``
(the rest is tests/pure/cli/test_cli.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from guards import HANG_GUARD_S
from typer.testing import CliRunner

from distviz.cli import app


@pytest.mark.rpc
def test_run_json_is_one_json_object(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "distviz", "run",
                          str(ROOT / "scenarios" / "design_note.yaml"), "--json", "-o",
                          str(tmp_path / "t.json")], capture_output=True, text=True,
                         cwd=tmp_path, timeout=HANG_GUARD_S)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["replay"]["outcome"] == "completed"
    assert report["real"]["outcome"] == "completed"
    a = report["agreement"]
    assert (a["outcome"], a["order"], a["executed"], a["gradients"]) == (True, True, True, True)
    assert report["trace"] == str(tmp_path / "t.json")


@pytest.mark.rpc
def test_run_inject_delay_slows_the_real_backward(tmp_path: Path) -> None:
    """``--inject-delay recv=20ms`` holds every RecvRpcBackward 20 ms before it sends (the
    design note has one on each worker, one after the other); the run says so, and the time
    report and ``replay --what-if`` read the delayed trace."""
    trace_path = tmp_path / "slow.json"
    out = subprocess.run([sys.executable, "-m", "distviz", "run",
                          str(ROOT / "scenarios" / "design_note.yaml"), "--json", "--no-reference",
                          "--inject-delay", "recv=20ms", "--inject-delay", "worker1=3x",
                          "-o", str(trace_path)],
                         capture_output=True, text=True, cwd=tmp_path, timeout=HANG_GUARD_S)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["real"]["injected"] == {"recv_s": 0.02, "slow": {"worker1": 3.0}}
    assert report["real"]["durations"] == "measured"
    events = json.loads(trace_path.read_text(encoding="utf-8"))["real"]["events"]
    recvs = [e for e in events if "RecvRpcBackward" in e["node"]]
    assert len(recvs) == 2 and all(e["dur_us"] >= 20_000 for e in recvs)
    (p,) = report["timing"]["passes"]
    assert p["wall_us"] >= 40_000
    path = p["critical_path"]
    assert path["length_us"] == pytest.approx(p["wall_us"], abs=0.01)
    assert {e["node"] for e in recvs} <= set(path["nodes"])
    bad = subprocess.run([sys.executable, "-m", "distviz", "run",
                          str(ROOT / "scenarios" / "design_note.yaml"), "--inject-delay",
                          "worker7=3x"], capture_output=True, text=True, cwd=tmp_path,
                         timeout=HANG_GUARD_S)
    assert bad.returncode == 2
    assert bad.stderr.strip().startswith("error: --inject-delay 'worker7=3x': no worker")
    res = CliRunner().invoke(app, ["replay", str(trace_path), "--what-if", "latency=1ms"])
    assert res.exit_code == 0, res.output
    assert "what-if (latency +1 ms): backward" in res.output
