"""The fuzz generator: seeded, valid and varied (pure: no torch, no workers)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from distviz.cli import app
from distviz.fuzz.generate import generate
from distviz.fuzz.program_tree import (
    CONST,
    CUSTOM,
    FEATURES,
    LEAF,
    REMOTE_LEAF,
    FuzzProgram,
    Op,
    RpcStmt,
    blocks,
    calls,
    features,
    problems,
    to_yaml,
)
from distviz.scenario import load_scenario, load_scenario_text

SEEDS = range(200)


def test_same_seed_and_index_give_the_same_program() -> None:
    for index in range(20):
        assert generate(5, index) == generate(5, index)
        assert to_yaml(generate(5, index)) == to_yaml(generate(5, index))


def test_programs_differ_across_indices_and_seeds() -> None:
    texts = {to_yaml(generate(seed, index)).split("\n", 2)[2]
             for seed in range(3) for index in range(30)}
    assert len(texts) == 90


def test_every_generated_program_is_a_valid_scenario() -> None:
    for index in SEEDS:
        program = generate(11, index)
        assert problems(program) == [], (index, problems(program))
        scenario = load_scenario_text(to_yaml(program), f"{program.name}.yaml")
        assert scenario.name == program.name
        assert scenario.workers == list(program.workers)
        assert len(scenario.passes) == len(program.passes)


def test_distviz_check_accepts_generated_files(tmp_path: Path) -> None:
    runner = CliRunner()
    for index in range(5):
        program = generate(3, index)
        path = tmp_path / f"{program.name}.yaml"
        path.write_text(to_yaml(program), encoding="utf-8")
        result = runner.invoke(app, ["check", str(path)])
        assert result.exit_code == 0, result.output
        assert load_scenario(path).raw_text == to_yaml(program)


def test_every_feature_is_common_across_seeds() -> None:
    counts = Counter(f for index in SEEDS for f in features(generate(0, index)))
    rare = {f: counts[f] for f in FEATURES if counts[f] < 5}
    assert not rare, rare
    # fail_backward is occasional, not in most programs
    assert counts["fail_backward"] < len(SEEDS) // 4


def test_worker_count_stays_in_the_requested_range() -> None:
    for index in range(40):
        assert 2 <= len(generate(1, index).workers) <= 6
        assert len(generate(1, index, 3, 3).workers) == 3
    with pytest.raises(ValueError, match="workers 4-3"):
        generate(1, 0, 4, 3)


def test_calls_go_to_declared_workers_and_bodies_run_there() -> None:
    for index in SEEDS:
        program = generate(2, index)
        for path, block, caller in blocks(program):
            for s in block.stmts:
                if isinstance(s, RpcStmt):
                    assert s.to in program.workers
                    if s.body is not None:
                        assert s.body.worker == s.to
            assert (caller is None) == (path == ())


def test_deferred_waits_come_before_the_first_use() -> None:
    program = next(p for p in (generate(4, i) for i in SEEDS)
                   if any(c.deferred and c.style == "async" for c in calls(p)))
    call = next(c for c in calls(program) if c.deferred and c.style == "async")
    lines = to_yaml(program).splitlines()
    start = next(k for k, ln in enumerate(lines) if f"fut{call.ident} = rpc.rpc_async(" in ln)
    wait = next(k for k, ln in enumerate(lines) if f"fut{call.ident}.wait()" in ln)
    assert start < wait
    for name in call.outs:
        uses = [k for k, ln in enumerate(lines) if re.search(rf"\b{name}\b", ln) and k != wait]
        assert all(k > wait for k in uses), (name, uses, wait)


def test_nothing_that_runs_at_the_same_time_depends_on_thread_timing() -> None:
    """Functions never draw random numbers, and programs with deferred waits make no leaves
    in functions (their names would follow the threads' order)."""
    concurrent = 0
    for index in SEEDS:
        program = generate(6, index)
        bodies = [b for _p, b, caller in blocks(program) if caller is not None]
        made = {s.fn for b in bodies for s in b.stmts if isinstance(s, Op)}
        assert not made & {LEAF, CONST}, index
        if any(c.deferred for c in calls(program)):
            concurrent += 1
            assert REMOTE_LEAF not in made, index
    assert concurrent >= len(SEEDS) // 5


@pytest.mark.parametrize(("args", "message"), [
    (["--workers", "1-3"], "--workers 1-3: expected 2 <= MIN <= MAX <= 32"),
    (["--workers", "x"], "--workers x: expected a count or a range, e.g. 2-6"),
    (["--count", "0"], "--count 0: expected a positive number"),
])
def test_fuzz_command_refuses_bad_options_before_running_anything(args: list[str],
                                                                  message: str) -> None:
    result = CliRunner().invoke(app, ["fuzz", *args])
    assert result.exit_code == 2
    assert result.output.strip() == f"error: {message}"


def _partly_used(program: FuzzProgram) -> int:
    """Fetches in ``main`` of which some outputs are used and some are not."""
    used = {a for x in program.losses for a in x.args}
    used |= {a for _p, b, _c in blocks(program) for s in b.stmts for a in s.args}
    return sum(1 for s in program.main.stmts if isinstance(s, RpcStmt) for names in s.fetches
               if {n in used for n in names} == {True, False})


def test_undefined_gradients_and_partly_used_results_are_common() -> None:
    """Custom Functions whose backward gives an undefined gradient or zeros (none, zeros) are
    drawn most, and RPC results of several outputs used in part come up often: the shapes
    whose gradients PyTorch passes on as undefined or zeros (docs/scenario-language.md)."""
    programs = [generate(0, index) for index in SEEDS]
    shapes = Counter(s.shape for p in programs for _p, b, _c in blocks(p) for s in b.stmts
                     if isinstance(s, Op) and s.fn == CUSTOM)
    assert shapes.most_common(2)[0][0] == "none" and shapes["zeros"] > shapes["square"], shapes
    assert sum(_partly_used(p) for p in programs) >= 20
