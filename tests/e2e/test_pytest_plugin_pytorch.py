"""A few of PyTorch's own RPC and distributed autograd tests, from the torch wheel, under
distviz's pytest plugin (the whole classes run in ``bench/bench_pytorch_tests.py``).

``test_backward_unused_send_function`` expects FAST mode's hang (its backward is still running
after 10 s), and ``test_backward_unused_tensors`` records three contexts per worker (one tensor's
gradient all zeros). From the RPC classes (``suite_rpc.py``): two JIT dist autograd tests (a
scripted ``dist_autograd.backward``, ``get_gradients`` from scripted code) and
``test_user_rref_backward`` (``rref.backward(context_id)`` from a worker that does not own the
RRef, twice with ``retain_graph``, then refused: each worker's first context is recorded on
the RRef's owner). Each gives the same result plain and traced with default options, no context
differs, and every context is named by its test. All five run in one pytest process plain and
one traced, side by side, their workers forked (``bench/pytorch_tests/generated.py``; the
benchmark spawns them as PyTorch's CI does). Each of PyTorch's tests starts four workers of its
own (about 19 s apiece on two cores when spawned), so the handful is kept to the tests that
each show something the others do not; ``test_backward_invalid_args``,
``test_jit_fork_within_context`` and the rest of the classes are in the benchmark's table, P1. DDP under dist autograd (``DdpComparisonTest``) is in
the benchmark's table, not here: its teardown can deadlock inside PyTorch, plain as well as
traced (bench/README.md, P1).
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest
from builders.plain_and_traced import PYTORCH_SUITE, compare_plain_and_traced

pytestmark = [
    pytest.mark.rpc,
    pytest.mark.skipif(importlib.util.find_spec("expecttest") is None,
                       reason="PyTorch's test classes need expecttest (the test extra)"),
]

CLASS = "suite_dist_autograd.py::TensorPipeDistAutogradTest"
DIST_AUTOGRAD_TESTS = [f"{CLASS}::{t}" for t in (
    "test_backward_unused_send_function", "test_backward_unused_tensors")]
RPC_TESTS = [f"suite_rpc.py::TensorPipeJitDistAutogradTest::{t}" for t in (
    "test_dist_backward", "test_get_gradients")] + [
    "suite_rpc.py::TensorPipeRpcTest::test_user_rref_backward"]
TESTS = DIST_AUTOGRAD_TESTS + RPC_TESTS


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    return compare_plain_and_traced(PYTORCH_SUITE, TESTS, tmp_path_factory.mktemp("pytorch"),
                                    env={"PYTORCH_TESTS_START": "fork"})


def test_pytorchs_tests_give_the_same_results_traced(compared: tuple[dict[str, Any], str]
                                                     ) -> None:
    result, out = compared
    assert result["tests"] == len(TESTS) and result["passed_plain"] == len(TESTS), out
    assert result["results_changed"] == 0, (result["changed"], out)
    assert result["exit_plain"] == result["exit_traced"] == 0, out


def test_every_context_is_named_by_its_test_and_the_expected_hang_reported(
        compared: tuple[dict[str, Any], str]) -> None:
    result, out = compared
    assert result["contexts"] > 0 and result["contexts_without_test"] == 0, out
    assert result["hang_predicted"] + result["hang_predicted_and_seen"] == 4, out  # 1 per worker
    assert f"{CLASS}::test_backward_unused_send_function: 4 contexts: 4 hang predicted" in out
    assert f"{CLASS}::test_backward_unused_tensors: 4 contexts:" in out


def test_pytorchs_rref_backward_test_is_recorded_on_each_owner_and_agrees(
        compared: tuple[dict[str, Any], str]) -> None:
    result, out = compared
    assert f"{RPC_TESTS[2]}: 4 contexts: 4 agree" in out, out


def test_no_context_of_pytorchs_tests_differs(compared: tuple[dict[str, Any], str]) -> None:
    """``test_backward_unused_tensors`` leaves one tensor with an all-zero gradient, which the
    replay and ``get_gradients`` must agree on."""
    result, out = compared
    assert result["differs"] == 0, (result["differs_tests"], out)


def test_pytorchs_torchscript_tests_keep_their_results_and_the_scripted_backward_is_counted(
        compared: tuple[dict[str, Any], str]) -> None:
    """TorchScript compiles distviz's ``dist_autograd.backward`` to PyTorch's op (before, the
    scripted test failed traced: TorchScript tried to compile the wrapper's source); the
    scripted backward is counted, not recorded."""
    result, out = compared
    assert not [t for t in result["changed"] if t.startswith("suite_rpc")], out
    lines = [ln for ln in out.splitlines() if ln.startswith(f"{RPC_TESTS[1]}: ")]
    assert lines and not lines[0].startswith(f"{RPC_TESTS[1]}: 0 contexts"), out  # recorded
    test = RPC_TESTS[0]
    assert f"{test}: 0 contexts: nothing recorded\n  note: worker0: 1 backward call from " \
           "TorchScript, not recorded" in out, out
