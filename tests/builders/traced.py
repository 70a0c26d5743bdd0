"""``distviz trace`` run on the programs under tests/programs: the command line, its
environment, its results, and the ``traced`` fixture that starts marked runs side by side."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import psutil
import pytest
from guards import HANG_GUARD_S, WAIT_GUARD_S
from side_by_side import marked, side_by_side

from distviz.trace import Trace, load

ROOT = Path(__file__).resolve().parents[2]


PROGRAMS = Path("tests") / "programs"


@dataclass
class Traced:
    """One ``distviz trace`` run: its exit status, output, index and traces by file name."""

    code: int
    stdout: str
    stderr: str
    out: Path
    index: dict[str, Any]
    traces: dict[str, Trace]

    def context(self, initiator: str, k: int) -> Trace:
        return self.traces[f"{initiator}.ctx{k}.trace.json"]

    def row(self, initiator: str, k: int) -> dict[str, Any]:
        return next(c for c in self.index["contexts"]
                    if c["initiator"] == initiator and c["context"] == k)


def _environment(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"RPC_INIT_METHOD": f"file://{tmp}/rpc-rendezvous",
                "PG_INIT_METHOD": f"file://{tmp}/pg-rendezvous",
                "TP_SOCKET_IFNAME": "lo", "GLOO_SOCKET_IFNAME": "lo",
                "PYTHONPATH": str(ROOT), "NO_COLOR": "1", "COLUMNS": "120"})
    return env


def programs_running(marker: str) -> list[int]:
    """Processes whose environment mentions ``marker`` (the run's own folder)."""
    found = []
    for proc in psutil.process_iter():
        if proc.pid == os.getpid():
            continue
        try:
            if any(marker in value for value in proc.environ().values()):
                found.append(proc.pid)
        except psutil.Error:
            continue
    return found


def trace_command(tmp: Path, program: list[str], *options: str) -> list[str]:
    return [sys.executable, "-m", "distviz", "trace", "-o", str(tmp / "traces"), *options, "--",
            sys.executable, *program]


def finish(tmp: Path, proc: subprocess.CompletedProcess[str] | Any, stdout: str,
           stderr: str) -> Traced:
    out = tmp / "traces"
    deadline = time.monotonic() + WAIT_GUARD_S
    while programs_running(str(tmp)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not programs_running(str(tmp)), "the traced program left processes behind"
    index = json.loads((out / "index.json").read_text(encoding="utf-8"))
    traces = {Path(c["file"]).name: load(c["file"]) for c in index["contexts"]}
    return Traced(code=proc.returncode, stdout=stdout, stderr=stderr, out=out, index=index,
                  traces=traces)


def run_traced(tmp: Path, program: list[str], *options: str) -> Traced:
    proc = subprocess.run(trace_command(tmp, program, *options), cwd=ROOT, env=_environment(tmp),
                          capture_output=True, text=True, timeout=HANG_GUARD_S)
    return finish(tmp, proc, proc.stdout, proc.stderr)


RUNS: dict[str, tuple[list[str], list[str]]] = {
    "rnn": ([str(PROGRAMS / "rnn" / "main.py"), "2"], ["--contexts", "all",
                                                       "--interop-threads", "1"]),
    "ps": ([str(PROGRAMS / "ps_trainers.py"), "2"], ["--contexts", "all"]),
    "pipeline": ([str(PROGRAMS / "pipeline.py"), "2"], ["--contexts", "2"]),
    "ddp": ([str(PROGRAMS / "ddp_remote.py"), "2"], []),
    "hang": ([str(PROGRAMS / "hang_unused.py")], []),
    "raise": ([str(PROGRAMS / "faults.py"), "raise"], []),
    "crash": ([str(PROGRAMS / "faults.py"), "crash"], ["--contexts", "all"]),
    "no-backward": ([str(PROGRAMS / "faults.py"), "no-backward"], []),
    "outside": ([str(PROGRAMS / "faults.py"), "outside-context"], []),
    "retain": ([str(PROGRAMS / "passes.py"), "retain"], []),
    "no-retain": ([str(PROGRAMS / "passes.py"), "no-retain"], []),
    "unused-tensors": ([str(PROGRAMS / "unused_tensors.py")], []),
    "inplace": ([str(PROGRAMS / "weight_on_ps.py"), "zero-grads"], []),
    "held": ([str(PROGRAMS / "weight_on_ps.py"), "held"], ["--contexts", "all"]),
    "custom": ([str(PROGRAMS / "custom_functions.py")], ["--contexts", "all"]),
}


@pytest.fixture(scope="module")
def traced(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], Traced]]:
    jobs = {name: partial(run_traced, tmp_path_factory.mktemp(name), RUNS[name][0],
                          *RUNS[name][1]) for name in marked(request)}
    with side_by_side(jobs) as result:
        yield result
