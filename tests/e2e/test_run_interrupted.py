"""Ctrl-C during ``distviz run`` of a training scenario keeps every context recorded so far.

The recording is written (atomically) with the contexts the trainers finished before the
interrupt, and says it is partial; the exit status is still Ctrl-C's.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from guards import HANG_GUARD_S

from distviz.trace.contexts_file import load_recording

pytestmark = pytest.mark.rpc

ROOT = Path(__file__).resolve().parents[2]


def test_ctrl_c_during_a_50_context_recording_keeps_every_recorded_context(
        tmp_path: Path) -> None:
    out = tmp_path / "partial.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "distviz", "run", str(ROOT / "scenarios" / "seed_training.yaml"),
         "--set", "epochs=50", "--contexts", "all", "--verbose", "-o", str(out)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    seen: list[str] = []
    deadline = time.monotonic() + 400
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen.append(line)
        if "distviz: recorded context 5 " in line:
            break
    assert any("recorded context 5 " in line for line in seen), "".join(seen)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=HANG_GUARD_S)
    assert proc.returncode == 130, stdout + stderr
    assert "context" in stderr and f"were saved to {out}" in stderr, stderr
    recording = load_recording(out)
    n = len(recording.contexts)
    assert 5 <= n < 50
    assert recording.meta["partial"] == (
        f"interrupted by Ctrl-C after {n} recorded contexts; the run did not finish (no "
        "reference, no final parameters)")
    # every context recorded so far, in order, each with its graph and its real backward
    assert [it.index for it in recording.iterations if it is not None] == list(range(1, n + 1))
    assert all(t.nodes and t.real is not None and t.real["outcome"] == "completed"
               for t in recording.contexts)
    assert not list(tmp_path.glob(".*.tmp"))      # written atomically: no leftovers
