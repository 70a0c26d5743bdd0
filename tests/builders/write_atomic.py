"""What tests/pure/cli/test_write_atomic.py and tests/e2e/test_write_atomic_rpc.py share."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from conftest import ROOT
from guards import HANG_GUARD_S

_SCRATCH_DEV = """
set -e
mount -t tmpfs tmpfs /dev
mknod -m 666 /dev/null c 1 3
mknod -m 666 /dev/zero c 1 5
mknod -m 666 /dev/random c 1 8
mknod -m 666 /dev/urandom c 1 9
mkdir -m 1777 /dev/shm
ln -s /proc/self/fd /dev/fd
"""


def _in_private_dev(script: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` (sh) in a private mount namespace whose /dev is a scratch tmpfs."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare for a private mount namespace")
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"],
                           capture_output=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip(f"no private mount namespace here: {probe.stderr.decode().strip()}")
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                           _SCRATCH_DEV + script], capture_output=True, text=True, cwd=ROOT,
                          timeout=HANG_GUARD_S, env={**os.environ, "PYTHONPATH": str(ROOT)})
