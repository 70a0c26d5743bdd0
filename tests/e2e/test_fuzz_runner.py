"""``distviz fuzz`` on real RPC workers: a small fixed-seed run agrees with PyTorch, and a planted
disagreement (a wrong rule in a test double of the judge, never in the product) is shrunk to
a minimal scenario that the product itself then runs and agrees on."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import ROOT
from guards import HANG_GUARD_S
from typer.testing import CliRunner

from distviz.cli import app
from distviz.fuzz import runner as fuzz_runner
from distviz.fuzz.generate import generate
from distviz.fuzz.program_tree import CUSTOM, Op, blocks, calls, features, size
from distviz.replay.result import Replay
from distviz.scenario import load_scenario
from distviz.scenario.lang import CUSTOM_FUNCTIONS
from distviz.trace import Trace

pytestmark = pytest.mark.rpc

FUZZ_FOUND = ROOT / "tests" / "fuzz_scenarios"
PRODUCT_VERDICT = fuzz_runner.judge_trace


def test_fixed_seed_fuzz_of_20_programs_agrees_with_pytorch(tmp_path: Path) -> None:
    """Twenty programs of seed 2024, custom autograd Functions of every shape among them (in
    main and in called functions): each agrees with PyTorch."""
    shapes = {(s.shape, caller is None) for index in range(20)
              for _p, b, caller in blocks(generate(2024, index)) for s in b.stmts
              if isinstance(s, Op) and s.fn == CUSTOM}
    assert {shape for shape, _ in shapes} == set(CUSTOM_FUNCTIONS)
    assert {in_main for _, in_main in shapes} == {True, False}
    proc = subprocess.run([sys.executable, "-m", "distviz", "fuzz", "--count", "20", "--seed",
                           "2024", "--json", "-o", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=HANG_GUARD_S, check=False, cwd=tmp_path)
    report = json.loads(proc.stdout)
    s = report["summary"]
    bad = [p for p in report["programs"] if not p["agrees"]]
    assert proc.returncode == 0, (bad, proc.stderr[-2000:])
    assert s["count"] == 20 and s["agree"] == 20 and not report["saved"]
    for key in ("outcome_agreement_pct", "order_agreement_pct", "executed_pct",
                "gradients_equal_pct"):
        assert s[key] == 100.0, key
    # the run must exercise both outcomes it predicts most
    assert s["real"].get("completed", 0) >= 5 and s["real"].get("hang", 0) >= 2, s["real"]
    assert s["gradients_compared"] == s["real"]["completed"]
    assert not (tmp_path / "out").exists()


def _remote_mul(program: fuzz_runner.FuzzProgram) -> bool:
    return any(isinstance(s, Op) and s.fn == "mul" for _p, b, caller in blocks(program)
               if caller is not None for s in b.stmts) or \
        any(c.builtin == "mul" for c in calls(program))


def _planted(trace: Trace, rp: Replay) -> fuzz_runner.Judged:
    """The product's verdict, except for a deliberately wrong rule: any MulBackward0 off the
    initiator "disagrees" on the order."""
    v = PRODUCT_VERDICT(trace, rp)
    if any(n.name == "MulBackward0" and n.worker != trace.initiator for n in trace.nodes):
        return replace(v, order=False, text="planted: MulBackward0 off the initiator")
    return v


def test_planted_disagreement_is_shrunk_saved_and_reproducible(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seed = next(s for s in range(1000) if _remote_mul(generate(s, 0))
                and 50 <= size(generate(s, 0)) <= 120
                and not {"unused_value", "no_grad", "fail_backward"} & features(generate(s, 0)))
    monkeypatch.setattr(fuzz_runner, "judge_trace", _planted)
    out = tmp_path / "found"
    result = CliRunner().invoke(app, ["fuzz", "--count", "1", "--seed", str(seed), "-o", str(out),
                                      "--hang-timeout", "1", "--max-shrink-tries", "60"])
    assert result.exit_code == 8, result.output
    name = f"fuzz-{seed}-0"
    minimal = out / f"{name}.yaml"
    assert f"{name} disagrees on order" in result.output
    assert f"reproduce: distviz run {minimal} --confirm-hang --hang-timeout 1" in result.output
    scenario = load_scenario(minimal)
    original = load_scenario(out / f"{name}.original.yaml")
    text = scenario.raw_text
    assert len(scenario.workers) == 2
    assert text.count("rpc.") == 1 and "mul(" in text, text
    assert len(text) < len(original.raw_text)
    assert "disagrees on: order" in scenario.description
    trace = json.loads((out / f"{name}.trace.json").read_text(encoding="utf-8"))
    assert any(n["name"] == "MulBackward0" and n["worker"] != trace["initiator"]
               for n in trace["nodes"])
    # the product's own judge agrees with PyTorch on the minimal program: the rule was planted
    monkeypatch.undo()
    proc = subprocess.run([sys.executable, "-m", "distviz", "run", str(minimal), "--no-log",
                           "-o", str(tmp_path / "again.trace.json")],
                          capture_output=True, text=True, timeout=HANG_GUARD_S, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


EXPECTED = {"no_grad_builtin_result": "completed", "leaf_made_by_callback": "completed",
            "none_backward_to_self": "completed"}


@pytest.mark.parametrize("name", sorted(p.stem for p in FUZZ_FOUND.glob("*.yaml")))
def test_programs_found_by_fuzzing_agree(name: str, tmp_path: Path) -> None:
    from distviz.replay.result import replay
    from distviz.runner.supervisor.run import RunOptions, run_scenario

    scenario = load_scenario(FUZZ_FOUND / f"{name}.yaml")
    result = run_scenario(scenario, RunOptions(confirm_hang=True, hang_timeout=2.0,
                                               keep_server=True))
    assert result.error is None and result.trace is not None, result.error
    v = fuzz_runner.judge_trace(result.trace, replay(result.trace))
    assert v.agrees, v.text
    assert (v.predicted, v.real) == (EXPECTED[name], EXPECTED[name])
    if EXPECTED[name] == "completed":
        assert v.gradients is True, result.trace.reference
