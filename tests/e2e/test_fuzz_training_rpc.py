"""``distviz fuzz --training`` on real RPC workers: generated training programs agree with
PyTorch and the reference training, and the judge (the training path's own agreement) fails
when a final parameter differs from the reference."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from guards import HANG_GUARD_S

from distviz.fuzz.execute_training import judge_training_run
from distviz.fuzz.training_program import generate_training
from distviz.outcome import Stop, StopKind
from distviz.trace.contexts_file import load_recording

pytestmark = pytest.mark.rpc


def test_fuzz_of_one_training_program_agrees(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "distviz", "fuzz", "--count", "1", "--seed",
                           "0", "--training", "1", "--json", "-o", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=HANG_GUARD_S, check=False, cwd=tmp_path)
    report = json.loads(proc.stdout)
    assert proc.returncode == 0, (report["programs"], proc.stderr[-2000:])
    s = report["summary"]
    assert s["count"] == 1 and s["agree"] == 1 and s["training"] == 1
    assert s["gradients_equal_pct"] == 100.0 and s["order_agreement_pct"] == 100.0
    assert "final parameters equal the reference" in report["programs"][0]["text"]


def test_training_judge_fails_on_a_final_parameter_off_the_reference(tmp_path: Path) -> None:
    program = generate_training(0, 3)
    path = tmp_path / f"{program.name}.yaml"
    path.write_text(program.text, encoding="utf-8")
    out = tmp_path / "rec.json"
    proc = subprocess.run([sys.executable, "-m", "distviz", "run", str(path), "-o", str(out)],
                          capture_output=True, text=True, timeout=HANG_GUARD_S, check=False, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    recording = load_recording(out)
    good = judge_training_run(recording, None)
    assert good.agrees and good.predicted == good.real == "completed", good
    summary = recording.training
    assert summary is not None and summary.ok is True
    wrong = replace(summary.final[0], status="mismatch", max_abs_diff=1.0)
    recording.training = replace(summary, final=(wrong, *summary.final[1:]))
    bad = judge_training_run(recording, None)
    assert bad.disagreements == ("gradients",), bad
    assert "final parameters differ" in bad.text
    stopped = judge_training_run(load_recording(out), Stop(StopKind.PREDICTED_HANG,
                                                            "a hang was predicted in context 2"))
    assert stopped.real == "hang" and not stopped.outcome


def test_a_failing_training_program_is_run_again_and_shrunk_as_text() -> None:
    """A planted error (a shape mismatch on the trainer, first iteration) fails every run: the
    finding reproduces, and a few real runs shrink the text while it still fails."""
    from distviz.fuzz.runner import FuzzOptions, _training_finding
    from distviz.fuzz.shrink_text import lines_of
    from distviz.scenario import load_scenario_text

    program = generate_training(0, 0)
    planted = "              h = h + torch.ones(7, 7)"
    text = program.text.replace("              loss = ", planted + "\n              loss = ", 1)
    bad = replace(program, text=text)
    said: list[str] = []
    finding = _training_finding(bad, None, "planted", FuzzOptions(max_shrink_tries=4),
                                said.append)
    assert finding.reproduced and finding.error == "planted"
    assert 0 < finding.shrink_tries <= 4, said
    minimal = finding.minimal.split("\n", 1)[1]
    load_scenario_text(minimal, "minimal.yaml")
    assert planted.strip() in minimal and lines_of(minimal) <= lines_of(text)
    assert "iterations: 1" in minimal
    assert finding.minimal.startswith(f"# minimal program shrunk from {program.name} (")


@pytest.mark.parametrize(("index", "outcome"), [(5, "hang"), (38, "error")])
def test_planted_hangs_and_errors_are_predicted_and_what_pytorch_does(index: int,
                                                                      outcome: str) -> None:
    """Seed 0's programs 5 (an RPC result the loss never uses, in the last iteration) and 38
    (fail_backward there): the replay predicts it, the real backward confirms it."""
    from distviz.fuzz.execute_training import run_training_program
    from distviz.fuzz.runner import FuzzOptions

    program = generate_training(0, index)
    assert f"planted_{outcome}" in program.features
    verdict, error = run_training_program(program, FuzzOptions(hang_timeout=3.0))
    assert error is None, error
    assert verdict is not None and verdict.agrees, verdict
    assert verdict.predicted == verdict.real == outcome


def test_a_module_whose_custom_function_returns_none_agrees() -> None:
    """Seed 0's program 28: Net.forward on ps ends in custom_function("none", ...), whose
    backward returns None, so PyTorch stores no gradient for Net's parameters (on the worker of
    the Function) and the optimizer leaves them; the replay predicts it (the Function is the
    scenario language's, recorded by shape), and the leaves and zeros checks agree."""
    from distviz.fuzz.execute_training import run_training_program
    from distviz.fuzz.runner import FuzzOptions

    program = generate_training(0, 28)
    assert 'return custom_function("none", self.seq(x))' in program.text
    verdict, error = run_training_program(program, FuzzOptions(hang_timeout=3.0))
    assert error is None, error
    assert verdict is not None and verdict.agrees, verdict
    assert verdict.predicted == verdict.real == "completed" and verdict.gradients is True
    assert verdict.leaves is True and verdict.zeros is True, verdict
