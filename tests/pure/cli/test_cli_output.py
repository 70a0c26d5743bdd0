"""What the commands print in a pipe: nothing is cut at the pipe's default 80 columns."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import replay_fixtures as F
from conftest import ROOT
from guards import HANG_GUARD_S

LONG = "a_leaf_with_a_name_long_enough_to_pass_eighty_columns_in_any_tree_" + "x" * 20


def _long_named_trace(tmp_path: Path) -> Path:
    trace = F.design_note()
    for node in trace.nodes:
        if node.var == "t4":
            node.var = LONG
    path = tmp_path / "long.json"
    trace.save(path)
    return path


@pytest.mark.parametrize("args", [["graph"], ["replay", "--graph"]])
def test_graph_in_a_pipe_is_not_cut_at_80_columns(tmp_path: Path, args: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    done = subprocess.run([sys.executable, "-m", "distviz", args[0],
                           str(_long_named_trace(tmp_path)), *args[1:]],
                          capture_output=True, text=True, cwd=ROOT, timeout=HANG_GUARD_S, env=env)
    assert done.returncode == 0, done.stderr
    leaf = next(line for line in done.stdout.splitlines() if LONG in line)
    assert leaf.endswith(f"AccumulateGrad {LONG} [2, 2] float32  deps 1")
    assert len(leaf) > 80
