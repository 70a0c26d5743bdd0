"""A stopped training's exit status comes from what stopped it, never from its words: a
backward that raises exits 7 and a predicted hang 6, whatever the workers are named (a name
that contains "hang" or "error" is in the stop's words)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from guards import HANG_GUARD_S

from distviz.limits import EXIT_BACKWARD_ERROR, EXIT_HANG

pytestmark = pytest.mark.rpc

_RAISES = """\
name: training-raises
workers:
  {trainer}:
    main: |
      for i in range(2):
          with dist_autograd.context() as context_id:
              x = torch.rand((2, 2), requires_grad=True)
              y = rpc.rpc_sync("{other}", double_with_fault, args=(x,))
              dist_autograd.backward(context_id, [y.sum()])
  {other}: {{}}
code: |
  def double_with_fault(t):
      return fail_backward(torch.mul(t, 2.0), "injected failure")
"""

_HANGS = """\
name: training-hangs
workers:
  {trainer}:
    main: |
      for i in range(2):
          with dist_autograd.context() as context_id:
              x = torch.rand((2, 2), requires_grad=True)
              y = rpc.rpc_sync("{other}", double, args=(x,))
              unused = rpc.rpc_sync("{other}", double, args=(x,))
              dist_autograd.backward(context_id, [y.sum()])
  {other}: {{}}
code: |
  def double(x):
      return x * 2
"""


@pytest.mark.parametrize(("text", "trainer", "other", "code"), [
    (_RAISES, "exchange", "ps", EXIT_BACKWARD_ERROR),   # "exchange" holds "hang"
    (_RAISES, "worker1", "ps", EXIT_BACKWARD_ERROR),
    (_HANGS, "errors", "ps", EXIT_HANG),                # "errors" holds "error"
])
def test_a_stopped_trainings_exit_status_is_what_stopped_it(
        tmp_path: Path, text: str, trainer: str, other: str, code: int) -> None:
    path = tmp_path / "scenario.yaml"
    path.write_text(text.format(trainer=trainer, other=other))
    proc = subprocess.run([sys.executable, "-m", "distviz", "run", str(path), "-o",
                           str(tmp_path / "out.json")], capture_output=True, text=True,
                          timeout=HANG_GUARD_S, check=False, cwd=tmp_path)
    assert f"training stopped: context 1 of {trainer}: " in proc.stdout, proc.stdout[-2000:]
    assert proc.returncode == code, proc.stdout[-2000:] + proc.stderr[-2000:]
