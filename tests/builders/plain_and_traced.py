"""A third-party pytest suite run twice side by side, plain and under ``pytest --distviz``, and
the two runs compared test by test (``bench/bench_pytorch_tests.py``'s table): what the PyTorch
tests check and the fairscale check share."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from bench_pytorch_tests import SUITE as PYTORCH_SUITE  # noqa: E402  (PyTorch's tests' folder)
from bench_pytorch_tests import outcomes, table  # noqa: E402

__all__ = ["PYTORCH_SUITE", "compare_plain_and_traced", "outcomes"]


def _pytest(suite: Path, args: Sequence[str], tmp: Path, how: str, env: Mapping[str, str],
            timeout: float) -> tuple[int, str]:
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args,
            f"--junitxml={tmp / (how + '.xml')}"]
    if how == "traced":
        argv.append(f"--distviz={tmp / 'traces'}")
    path = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    full = dict(os.environ, TP_SOCKET_IFNAME="lo", GLOO_SOCKET_IFNAME="lo", NO_COLOR="1",
                PYTHONPATH=os.pathsep.join(path), **env)
    proc = subprocess.run(argv, cwd=suite, env=full, capture_output=True, text=True,
                          timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr


def compare_plain_and_traced(suite: Path, args: Sequence[str], tmp: Path, *,
                             env: Mapping[str, str] | None = None, timeout: float = 900
                             ) -> tuple[dict[str, Any], str]:
    """Run ``pytest ARGS`` in ``suite`` plain and traced at once (each its own junit file in
    ``tmp``; the traced one's traces in ``tmp/traces``), and return the comparison table and
    both outputs. The two runs are independent, so side by side the workers of one import torch
    while the other's wait (joins, RPC shutdown)."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        plain = pool.submit(_pytest, suite, args, tmp, "plain", env or {}, timeout)
        traced = pool.submit(_pytest, suite, args, tmp, "traced", env or {}, timeout)
        (code_plain, out_plain), (code_traced, out_traced) = plain.result(), traced.result()
    index = json.loads((tmp / "traces" / "index.json").read_text())
    result = table(outcomes(tmp / "plain.xml"), outcomes(tmp / "traced.xml"), index, (1.0, 1.0),
                   (code_plain, code_traced))
    return result, out_plain + out_traced
