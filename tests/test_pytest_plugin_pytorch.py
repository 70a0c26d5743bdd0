"""A few of PyTorch's own RPC and distributed autograd tests, from the torch wheel, under
distviz's pytest plugin (the whole classes run in ``bench/bench_pytorch_tests.py``).

``test_backward_unused_send_function`` expects FAST mode's hang (its backward is still running
after 10 s), ``test_backward_invalid_args`` expects PyTorch's errors for bad arguments, and
``test_backward_unused_tensors`` records three contexts per worker. Each gives the same result
plain and traced with default options, no context differs, and every context is named by its
test.

From every RPC class (``suite_rpc.py``): the JIT dist autograd tests (a scripted
``dist_autograd.backward`` and ``get_gradients``, RPCs from scripted code), three JIT RPC tests
and DDP with uneven inputs under dist autograd, the same way.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from bench_pytorch_tests import SUITE, outcomes, table  # noqa: E402

pytestmark = [
    pytest.mark.rpc,
    pytest.mark.skipif(importlib.util.find_spec("expecttest") is None,
                       reason="PyTorch's test classes need expecttest (the test extra)"),
]

ROOT = Path(__file__).resolve().parent.parent
SELECT = ("test_backward_invalid_args or test_backward_unused_send_function or "
          "test_backward_unused_tensors")
CLASS = "suite_dist_autograd.py::TensorPipeDistAutogradTest"


RPC_TESTS = [f"suite_rpc.py::TensorPipe{t}" for t in (
    "JitDistAutogradTest::test_dist_backward", "JitDistAutogradTest::test_get_gradients",
    "JitDistAutogradTest::test_jit_fork_within_context",
    "JitRpcTest::test_rref_as_arg_and_return",
    "DdpComparisonTest::test_ddp_comparison_uneven_inputs")]


def _pytest(tmp: Path, how: str, targets: list[str] | None = None) -> tuple[int, str]:
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
            *(targets or ["suite_dist_autograd.py", "-k", SELECT]),
            f"--junitxml={tmp / (how + '.xml')}"]
    if how == "traced":
        argv.append(f"--distviz={tmp / 'traces'}")
    path = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = dict(os.environ, TP_SOCKET_IFNAME="lo", GLOO_SOCKET_IFNAME="lo", NO_COLOR="1",
               PYTHONPATH=os.pathsep.join(path))
    proc = subprocess.run(argv, cwd=SUITE, env=env, capture_output=True, text=True, timeout=900)
    return proc.returncode, proc.stdout + proc.stderr


def _compare(tmp: Path, targets: list[str] | None = None) -> tuple[dict[str, Any], str]:
    # the two runs are independent (own junit files, own rendezvous files): side by side, the
    # workers of one import torch while the other's wait (PyTorch's 10 s join, RPC shutdown)
    with ThreadPoolExecutor(max_workers=2) as pool:
        plain = pool.submit(_pytest, tmp, "plain", targets)
        traced = pool.submit(_pytest, tmp, "traced", targets)
        (code_plain, out_plain), (code_traced, out_traced) = plain.result(), traced.result()
    index = json.loads((tmp / "traces" / "index.json").read_text())
    result = table(outcomes(tmp / "plain.xml"), outcomes(tmp / "traced.xml"), index, (1.0, 1.0),
                   (code_plain, code_traced))
    return result, out_plain + out_traced


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    return _compare(tmp_path_factory.mktemp("pytorch"))


@pytest.fixture(scope="module")
def rpc_compared(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    return _compare(tmp_path_factory.mktemp("pytorch-rpc"), RPC_TESTS)


def test_pytorchs_tests_give_the_same_results_traced(compared: tuple[dict[str, Any], str]
                                                     ) -> None:
    result, out = compared
    assert result["tests"] == 3 and result["passed_plain"] == 3, out
    assert result["results_changed"] == 0, (result["changed"], out)
    assert result["exit_plain"] == result["exit_traced"] == 0, out


def test_every_context_is_named_by_its_test_and_the_expected_hang_reported(
        compared: tuple[dict[str, Any], str]) -> None:
    result, out = compared
    assert result["contexts"] > 0 and result["contexts_without_test"] == 0, out
    assert result["hang_predicted"] + result["hang_predicted_and_seen"] == 4, out  # 1 per worker
    assert f"{CLASS}::test_backward_unused_send_function: 4 contexts: 4 hang predicted" in out
    assert f"{CLASS}::test_backward_unused_tensors: 4 contexts:" in out


def test_no_context_of_pytorchs_tests_differs(compared: tuple[dict[str, Any], str]) -> None:
    """``test_backward_unused_tensors`` leaves one tensor with an all-zero gradient, which the
    replay and ``get_gradients`` must agree on."""
    result, out = compared
    assert result["differs"] == 0, (result["differs_tests"], out)


def test_pytorchs_torchscript_and_ddp_tests_give_the_same_results_traced(
        rpc_compared: tuple[dict[str, Any], str]) -> None:
    """TorchScript compiles distviz's ``dist_autograd.backward`` to PyTorch's op (before, the
    scripted test failed traced: TorchScript tried to compile the wrapper's source); the
    scripted backward is counted, not recorded."""
    result, out = rpc_compared
    assert result["tests"] == len(RPC_TESTS) and result["passed_plain"] == len(RPC_TESTS), out
    assert result["results_changed"] == 0, (result["changed"], out)
    assert result["exit_plain"] == result["exit_traced"] == 0, out
    assert result["differs"] == 0, (result["differs_tests"], out)
    assert result["contexts"] > 0 and result["contexts_without_test"] == 0, out
    test = "suite_rpc.py::TensorPipeJitDistAutogradTest::test_dist_backward"
    assert f"{test}: 0 contexts: nothing recorded\n  note: worker0: 1 backward call from " \
           "TorchScript, not recorded" in out, out
