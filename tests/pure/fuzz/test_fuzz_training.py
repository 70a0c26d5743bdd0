"""The fuzz generator's training programs: seeded, valid and varied (pure: no torch, no
workers), and the judge folds the training path's agreement into one verdict."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from typer.testing import CliRunner

from distviz.cli import app
from distviz.fuzz.training_program import (
    TRAINING_FEATURES,
    generate_training,
    is_training,
)
from distviz.scenario import load_scenario_text


def test_same_seed_and_index_give_the_same_training_program() -> None:
    for index in range(10):
        assert generate_training(3, index) == generate_training(3, index)
    texts = {generate_training(seed, i).text.split("\n", 3)[3]
             for seed in range(2) for i in range(20)}
    assert len(texts) == 40


def test_training_programs_load_and_are_in_the_training_form() -> None:
    for index in range(40):
        program = generate_training(7, index)
        sc = load_scenario_text(program.text, f"{program.name}.yaml")
        assert sc.training, program.name
        assert "ps" in sc.workers and "trainer1" in sc.workers
        assert 2 <= program.iterations <= 3 and 1 <= program.layers <= 3
        for needed in ("class Net(nn.Module)", "rpc.remote(\"ps\"", "dist_autograd.context()",
                       "dist_autograd.backward(context_id, [loss])", "DistributedOptimizer",
                       "opt.step(context_id)"):
            assert needed in program.text, (program.name, needed)


def test_every_training_feature_comes_up() -> None:
    seen = Counter(f for i in range(60) for f in generate_training(0, i).features)
    assert all(seen[f] >= 3 for f in TRAINING_FEATURES), seen


def test_the_training_fraction_picks_programs_by_seed_and_index() -> None:
    assert not any(is_training(0, i, 0.0) for i in range(50))
    assert all(is_training(0, i, 1.0) for i in range(50))
    some = [is_training(4, i, 0.3) for i in range(200)]
    assert 30 <= sum(some) <= 90
    assert some == [is_training(4, i, 0.3) for i in range(200)]


def test_distviz_check_accepts_generated_training_files(tmp_path: Path) -> None:
    runner = CliRunner()
    for index in range(4):
        program = generate_training(1, index)
        path = tmp_path / f"{program.name}.yaml"
        path.write_text(program.text, encoding="utf-8")
        result = runner.invoke(app, ["check", str(path)])
        assert result.exit_code == 0, result.output


def test_a_training_fraction_outside_0_to_1_is_a_usage_error() -> None:
    result = CliRunner().invoke(app, ["fuzz", "--training", "1.5"])
    assert result.exit_code == 2
    assert "--training 1.5" in result.output
