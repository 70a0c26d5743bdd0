"""What the fuzz counts of the one verdict (``distviz.fuzz.judged``): every check the verdict
makes, so a broken FAST-mode rule is a finding, not an agreement. Pure: hand-built traces."""

from __future__ import annotations

import replay_fixtures as F
from builders.verdicts import _real

from distviz.fuzz import runner as fuzz_runner
from distviz.fuzz.execute_training import judge_training_run
from distviz.replay import replay
from distviz.trace import Trace
from distviz.trace.contexts_file import Recording


def _illegal_order() -> Trace:
    """design_note with 2 inter-op threads, worker0's observed order swapped so that a
    RecvRpcBackward runs before a ready AccumulateGrad: no FAST-mode schedule has it."""
    t = F.design_note()
    t.real = _real(t, interop=2)
    events = t.real["events"]
    nodes = [e["node"] for e in events]
    acc = nodes.index("worker0/AccumulateGrad(t4)")
    recv = nodes.index("worker0/RecvRpcBackward#0")
    events[acc]["node"], events[recv]["node"] = events[recv]["node"], events[acc]["node"]
    return t


def test_the_fuzz_counts_a_broken_fast_mode_rule_as_a_disagreement() -> None:
    t = _illegal_order()
    judged = fuzz_runner.judge_trace(t, replay(t))
    assert not judged.agrees
    assert "legality" in judged.disagreements


def test_the_training_fuzz_counts_a_broken_fast_mode_rule_as_a_disagreement() -> None:
    t = _illegal_order()
    recording = Recording(contexts=[t], iterations=[None], workers=list(t.workers))
    judged = judge_training_run(recording, None)
    assert not judged.agrees
    assert "legality" in judged.disagreements


def test_a_legal_order_with_several_threads_agrees_in_the_fuzz() -> None:
    t = F.design_note()
    t.real = _real(t, interop=2)
    judged = fuzz_runner.judge_trace(t, replay(t))
    assert judged.agrees and judged.legality is True
