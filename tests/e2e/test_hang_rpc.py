"""Hang diagnosis on traces of real RPC workers: the no-grad and overwritten-result
scenarios (the rest is tests/pure/replay/test_hang.py)."""

from __future__ import annotations

import pytest
from builders.hang import _check_no_grad, _check_overwritten, _hang
from conftest import run_cached


@pytest.mark.rpc
def test_no_grad_scenario_on_real_workers() -> None:
    result = run_cached("no_grad_rpc", hang_timeout=3.0)
    assert result.error is None, result.error
    _check_no_grad(_hang(result.trace))


@pytest.mark.rpc
def test_overwritten_result_scenario_on_real_workers() -> None:
    result = run_cached("overwritten_result", hang_timeout=3.0)
    assert result.error is None, result.error
    _check_overwritten(_hang(result.trace))
