"""``distviz trace`` changes nothing a traced program sees.

Each program of ``tests/programs/transparency.py`` runs twice, plainly and under ``distviz
trace``: what every ``dist_autograd.backward`` call returned or raised (PyTorch's own exception,
type and message), what ``get_gradients`` held afterwards, and the program's exit status must be
the same. PyTorch is the oracle: the plain run is what the program sees without distviz. Where
distviz cannot record a call, the summary says so.
"""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from builders.traced import PROGRAMS, ROOT, Traced, _environment, finish, trace_command

pytestmark = pytest.mark.rpc

PROGRAM = str(PROGRAMS / "transparency.py")


def _plain_and_traced(tmp: Path, mode: str, *options: str) -> tuple[str, str, Traced]:
    """The program's log without and with ``distviz trace``, and the traced run."""
    plain_dir, traced_dir = tmp / "plain", tmp / "traced"
    plain_dir.mkdir()
    traced_dir.mkdir()
    # the two runs are independent (own folder, log and rendezvous files): side by side
    with ThreadPoolExecutor(max_workers=2) as pool:
        plain_run = pool.submit(subprocess.run, [sys.executable, PROGRAM, mode,
                                                 str(plain_dir / "log")],
                                cwd=ROOT, env=_environment(plain_dir), capture_output=True,
                                text=True, timeout=400)
        traced_run = pool.submit(subprocess.run,
                                 trace_command(traced_dir, [PROGRAM, mode,
                                                            str(traced_dir / "log")], *options),
                                 cwd=ROOT, env=_environment(traced_dir), capture_output=True,
                                 text=True, timeout=600)
        plain, proc = plain_run.result(), traced_run.result()
    assert plain.returncode == 7, plain.stderr[-3000:]
    traced = finish(traced_dir, proc, proc.stdout, proc.stderr)
    assert traced.code == 7, proc.stdout + proc.stderr[-3000:]   # the program's own status
    return ((plain_dir / "log").read_text(encoding="utf-8"),
            (traced_dir / "log").read_text(encoding="utf-8"), traced)


def test_wrong_arguments_reach_pytorch_untouched(tmp_path: Path) -> None:
    # PyTorch's test_backward_invalid_args: its TypeError ("incompatible function arguments",
    # naming the arguments as given) and its RuntimeErrors, never distviz's own
    plain, traced, run = _plain_and_traced(tmp_path, "invalid-args")
    assert traced == plain
    assert "backward(ctx, None): raised TypeError: backward(): incompatible function " \
           "arguments." in traced
    # the good backward after them is the context's first: recorded, and it agrees
    assert [(c["context"], c["outcome"], c["agreement"]) for c in run.index["contexts"]] == [
        (1, "completed", "agrees")]
    assert ("worker0: a dist_autograd.backward call was not recorded: PyTorch rejected its "
            "arguments (TypeError: backward(): incompatible function arguments.") in run.stdout


def test_a_dummy_context_id_fails_as_in_pytorch(tmp_path: Path) -> None:
    plain, traced, run = _plain_and_traced(tmp_path, "dummy-context")
    assert traced == plain
    assert "Could not find autograd context with id" in traced
    assert "was called outside a dist_autograd context" in run.stdout
    # the call with the dummy id is no context of the program's: the real one is the first
    assert [(c["context"], c["outcome"], c["agreement"]) for c in run.index["contexts"]] == [
        (1, "completed", "agrees")]


def test_more_passes_than_distviz_records(tmp_path: Path) -> None:
    plain, traced, run = _plain_and_traced(tmp_path, "many-passes")
    assert traced == plain
    assert traced.count("returned None") == 105
    assert run.row("worker0", 1)["passes"] == 100
    assert "pass 101 was not recorded: distviz records at most 100 passes" in run.stdout


def test_passes_after_a_failed_one(tmp_path: Path) -> None:
    plain, traced, run = _plain_and_traced(tmp_path, "after-failed")
    assert traced == plain
    assert "pass 1: raised RuntimeError" in traced and "pass 3: returned None" in traced
    assert run.row("worker0", 1)["outcome"] == "error"
    assert "the passes after pass 1 were not recorded: pass 1 raised" in run.stdout


def test_an_async_execution_function(tmp_path: Path) -> None:
    plain, traced, run = _plain_and_traced(tmp_path, "async")
    assert traced == plain
    assert "backward(ctx, [loss]): returned None" in traced
    assert run.index["contexts"], run.stdout


def test_torchscript_runs_as_without_distviz(tmp_path: Path) -> None:
    """A scripted ``dist_autograd.backward`` and ``get_gradients``, RPCs from scripted code and
    a ``torch.jit.trace`` of a function that calls backward: TorchScript compiles distviz's
    wrappers to PyTorch's own ops. The scripted backward is PyTorch's C++ op, which distviz
    cannot record: the summary counts it, and so a backward under ``torch.jit.trace``."""
    plain, traced, run = _plain_and_traced(tmp_path, "script", "--contexts", "all")
    assert traced == plain
    assert "compiled: True True True" in traced
    assert "script_backward(ctx, loss): returned None" in traced
    assert "after the scripted backward: get_gradients 2 tensors" in traced
    assert "torch.jit.trace(step): returned 'ScriptFunction'" in traced
    assert "worker0: 1 backward call from TorchScript, not recorded" in run.stdout
    assert "a dist_autograd.backward call inside torch.jit.trace was not recorded" in run.stdout
    # the context of the scripted RPCs is recorded (the first two went to TorchScript's op and
    # to torch.jit.trace)
    assert [(c["context"], c["outcome"], c["agreement"]) for c in run.index["contexts"]] == [
        (1, "completed", "agrees")]


def _last_error_line(stderr: str) -> str:
    """The last ``Name: message`` line of a Python traceback in ``stderr``."""
    return next(line for line in reversed(stderr.splitlines())
                if line and not line.startswith((" ", "[W", "W1", "distviz")) and ": " in line)


def test_a_worker_killed_mid_backward_ends_the_program_as_without_distviz(
        tmp_path: Path) -> None:
    # worker1 is SIGKILLed inside its second backward: the program fails exactly as it does
    # without distviz (mp.spawn's ProcessExitedException, status 1)
    program = str(PROGRAMS / "faults.py")
    plain_dir, traced_dir = tmp_path / "plain", tmp_path / "traced"
    plain_dir.mkdir()
    traced_dir.mkdir()
    plain = subprocess.run([sys.executable, program, "crash"], cwd=ROOT,
                           env=_environment(plain_dir), capture_output=True, text=True,
                           timeout=400)
    proc = subprocess.run(trace_command(traced_dir, [program, "crash"]), cwd=ROOT,
                          env=_environment(traced_dir), capture_output=True, text=True,
                          timeout=600)
    traced = finish(traced_dir, proc, proc.stdout, proc.stderr)
    assert traced.code == plain.returncode == 1, proc.stderr[-3000:]
    assert _last_error_line(proc.stderr) == _last_error_line(plain.stderr) == (
        "torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with signal "
        "SIGKILL")
    assert traced.row("worker0", 1)["agreement"] == "agrees"   # the one context recorded


def test_an_rpc_backend_of_the_programs_own_that_starts_no_agent(tmp_path: Path) -> None:
    """PyTorch's ``test_register_rpc_backend_and_set_and_start_rpc_backend``: ``init_rpc``
    with a registered stub backend whose start is mocked returns, though no agent runs. Traced,
    it returns too (distviz's wrapper used to ask the absent agent for the worker's name and
    raised PyTorch's "RPC has not been initialized")."""
    program = str(PROGRAMS / "stub_backend.py")
    plain = subprocess.run([sys.executable, program, str(tmp_path / "rdv-plain")], cwd=ROOT,
                           env=_environment(tmp_path), capture_output=True, text=True,
                           timeout=400)
    proc = subprocess.run(trace_command(tmp_path / "traced", [program, str(tmp_path / "rdv")]),
                          cwd=ROOT, env=_environment(tmp_path), capture_output=True, text=True,
                          timeout=400)
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    program_lines = [line for line in proc.stdout.splitlines()
                     if line.startswith(("init_rpc", "get_worker_info"))]
    assert program_lines == plain.stdout.splitlines() == [
        "init_rpc returned None",
        "get_worker_info raised RuntimeError: RPC has not been initialized. Call "
        "torch.distributed.rpc.init_rpc first."]
