"""Undefined gradients against PyTorch (real RPC workers): the replay's predictions of which
leaves get a gradient, an all-zero one or none (``distviz.replay.undefined``) equal what
``get_gradients`` really held, and the verdict compares them instead of saying "not
compared"."""

from __future__ import annotations

from pathlib import Path

import pytest

from distviz.fuzz import runner as fuzz_runner
from distviz.replay.result import replay
from distviz.runner.supervisor.run import RunOptions, run_scenario
from distviz.scenario import load_scenario

pytestmark = pytest.mark.rpc

HERE = Path(__file__).parents[1]
EXPECTED = {
    # leaf -> all zeros (True), values (False); a leaf not named gets no gradient
    "none_local_and_across": {"b": True, "c": True, "d": False, "w": False},
    "rpc_result_root": {"x": True},
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_undefined_gradients_are_predicted_as_pytorch_gives_them(name: str) -> None:
    scenario = load_scenario(HERE / "undefined_scenarios" / f"{name}.yaml")
    result = run_scenario(scenario, RunOptions(hang_timeout=5.0, keep_server=True))
    t = result.trace
    assert result.error is None and t is not None and t.real is not None, result.error
    var = {n.id: n.var for n in t.nodes}
    real = {var[nid]: bool(g.get("zero")) for nid, g in t.real.gradients.items()}
    assert real == EXPECTED[name]               # what PyTorch did
    rp = replay(t)
    predicted = {a.var: a.zero for a in rp.accumulated.values()}
    assert predicted == real                    # what the replay predicts from the graph
    judged = fuzz_runner.judge_trace(t, rp)
    assert judged.agrees and judged.zeros is True and judged.leaves is True, judged.text
    assert "not compared" not in judged.text
