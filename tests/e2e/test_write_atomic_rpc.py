"""Writing output files: a real ``distviz run`` with every output to /dev/null (the rest is
tests/pure/cli/test_write_atomic.py)."""

from __future__ import annotations

import shutil
import sys

import pytest
from builders.write_atomic import _in_private_dev


@pytest.mark.rpc
def test_run_with_every_output_to_dev_null_keeps_dev_null() -> None:
    outputs = "-o /dev/null --dot /dev/null --html /dev/null --perfetto /dev/null"
    if shutil.which("dot"):
        outputs += " --svg /dev/null --png /dev/null"
    out = _in_private_dev(f"{sys.executable} -m distviz run scenarios/design_note.yaml "
                          f"--no-log {outputs}\nstat -c '%F %t:%T' /dev/null\n")
    assert out.returncode == 0, out.stderr + out.stdout
    assert "trace written to /dev/null" in out.stdout
    assert out.stdout.splitlines()[-1] == "character special file 1:3"
