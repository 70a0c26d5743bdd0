"""Every shipped scenario: the replay agrees with PyTorch's real backward (outcome, the set of
nodes run and each worker's order) and the distributed gradients equal the single-process
reference."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SCENARIOS, run_cached

from distviz.replay.agreement import compare
from distviz.replay.fast import replay

pytestmark = pytest.mark.rpc

ALL = sorted(p.stem for p in SCENARIOS.glob("*.yaml"))
HANGS = {"unused_result", "no_grad_rpc"}
ERRORS = {"fail_backward"}


@pytest.mark.parametrize("name", ALL)
def test_replay_agrees_with_pytorch(name: str) -> None:
    options = {"hang_timeout": 3.0} if name in HANGS else {}
    result = run_cached(name, **options)
    assert result.error is None, result.error
    trace = result.trace
    rp = replay(trace)
    a = compare(trace, rp)
    expected = "hang" if name in HANGS else "error" if name in ERRORS else "completed"
    assert rp.outcome == expected
    assert trace.real["outcome"] == expected
    assert (a["outcome"], a["executed"], a["order"]) == (True, True, True), a["text"]
    assert a["exact"] is True
    if expected == "completed":
        assert a["gradients"] is True, trace.reference["comparison"]
        assert a["leaves"] is True
        assert a["text"].startswith("replay matches PyTorch on all")


def test_multi_output_unused_output_gets_zeros_in_both() -> None:
    trace = run_cached("multi_output").trace
    rows = {r["var"]: r for r in trace.reference["comparison"]}
    zero = [v for v, r in rows.items() if r["status"] == "zero_unused"]
    assert zero, rows
    rp = replay(trace)
    for v in zero:
        leaf = rows[v]["leaf"]
        assert rp.accumulated[leaf]["zero"] is True
        assert trace.real["gradients"][leaf]["zero"] is True


def test_retain_graph_passes_accumulate_twice() -> None:
    trace = run_cached("retain_graph").trace
    rp = replay(trace)
    assert len(trace.passes) == 2 and rp.passes_run == 2
    assert all(acc["count"] == 2 for acc in rp.accumulated.values())
    assert trace.real["passes_run"] == 2


def test_more_interop_threads_is_not_claimed_exact() -> None:
    result = run_cached("design_note", interop_threads=2)
    a = compare(result.trace, replay(result.trace))
    assert a["exact"] is False
    if a["order"]:
        assert "not guaranteed by nature" in a["text"]
    else:
        assert "not a replay bug" in a["text"]


def test_pipeline_scaled_down_agrees_even_when_messages_race() -> None:
    result = run_cached("pipeline", {"micro": "8", "depth": "2"})
    a = compare(result.trace, replay(result.trace))
    assert (a["outcome"], a["executed"], a["order"], a["gradients"]) == (True, True, True, True), \
        a["text"]
    assert Path(result.trace.scenario["path"]).name == "pipeline.yaml"
