"""What tests/pure/project/test_packaging.py and tests/e2e/test_packaging_build.py share."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import ROOT
from guards import HANG_GUARD_S


def _distviz(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "distviz", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=HANG_GUARD_S,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"})
