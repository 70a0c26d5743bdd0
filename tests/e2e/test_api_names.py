"""The Python API names what ``distviz trace`` names, from the first context of a process on:
a predicted hang gives the RPC's call site and variable, and a module in a local variable
names its leaves (real RPC workers; seconds)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from guards import HANG_GUARD_S

from distviz.trace import load


@pytest.mark.rpc
def test_first_backward_of_a_process_names_the_unused_rpc_and_local_module(tmp_path: Path
                                                                           ) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1", TP_SOCKET_IFNAME="lo")
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "scripts" / "api_first_hang.py"),
                           str(tmp_path)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = proc.stdout.strip().splitlines()[-1]
    assert line.startswith("hang: predicted: "), proc.stdout
    assert "rpc_sync(mult) at tests/scripts/api_first_hang.py:36 in worker" in line, line
    assert "assigned to `side`" in line, line
    t = load(tmp_path / "first.json")
    leaves = {n.var for n in t.nodes if n.kind == "accumulate_grad"}
    assert {"worker0.head.weight", "worker0.head.bias"} <= leaves, leaves
