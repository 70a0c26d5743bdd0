"""What the recorder writes for ``distviz why`` on real RPC workers: the named tensors it saw
outside the graph (``absent_leaves``), and the answers over a freshly recorded trace equal
those over the committed one (``tests/traces/why_broken.json``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_cached

from distviz.analyses.why import why
from distviz.trace import load

pytestmark = pytest.mark.rpc

SCENARIO = str(Path(__file__).parents[1] / "why_scenarios" / "why_broken.yaml")


def test_the_recorder_lists_named_tensors_outside_the_graph_with_their_reason() -> None:
    res = run_cached(SCENARIO)
    assert res.recording is not None
    trace = res.recording.single_trace
    assert trace is not None
    absent = {(a.var, a.worker, a.why) for a in trace.absent_leaves}
    # n: torch.rand without requires_grad; gg: computed under no_grad; d: used as d.detach();
    # g: used only under no_grad. The leaves of the graph (t1, w, aux) are not listed.
    assert absent == {("n", "worker0", "requires_grad_false"),
                      ("gg", "worker0", "requires_grad_false"),
                      ("d", "worker0", "not_reached"), ("g", "worker0", "not_reached")}
    committed = load(Path(__file__).parents[1] / "traces" / "why_broken.json")
    for name in ("t1", "w", "n", "d", "g", "aux"):
        assert why(trace, name).kind == why(committed, name).kind, name
