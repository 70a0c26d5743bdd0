"""The shrinker on planted problems: a predicate that says "still fails" whenever a program has
some feature stands in for a real disagreement (pure: no torch, no workers)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from distviz.fuzz.generate import generate
from distviz.fuzz.program_tree import FuzzProgram, RpcStmt, calls, features, problems, size, to_yaml
from distviz.fuzz.shrink import candidates, shrink, tidy
from distviz.scenario import load_scenario_text


def _with(feature: str, seed: int = 1) -> list[FuzzProgram]:
    return [p for p in (generate(seed, i) for i in range(120)) if feature in features(p)][:4]


def _has(feature: str) -> Callable[[FuzzProgram], bool]:
    return lambda p: feature in features(p)


@pytest.mark.parametrize("feature", ["to_here_twice", "callback", "no_grad", "builtin",
                                     "shared_param", "retain_graph", "fail_backward"])
def test_shrunk_program_keeps_the_problem_and_is_locally_minimal(feature: str) -> None:
    for program in _with(feature):
        result = shrink(program, _has(feature), max_tries=10_000)
        small = result.program
        assert feature in features(small)
        assert size(small) < size(program) and result.steps > 0
        assert problems(small) == []
        load_scenario_text(to_yaml(small), "shrunk.yaml")
        for cand in map(tidy, candidates(small)):
            if size(cand) < size(small) and not problems(cand):
                assert feature not in features(cand)


def test_a_planted_remote_fetched_twice_shrinks_to_one_call_on_two_workers() -> None:
    program = _with("to_here_twice")[0]
    small = shrink(program, _has("to_here_twice"), max_tries=10_000).program
    (call,) = list(calls(small))
    assert call.style == "remote" and len(call.fetches) == 2
    assert len(small.workers) == 2 and len(small.passes) == 1
    assert len(small.main.stmts) <= 2       # the leaf it sends, and the call


def test_shrinking_stops_after_max_tries() -> None:
    program = _with("callback")[0]
    seen: list[bool] = []
    result = shrink(program, lambda p: False, max_tries=7,
                    on_try=lambda _p, failed: seen.append(failed))
    assert result.tries == 7 == len(seen) and result.program == program and result.steps == 0


def test_every_candidate_after_tidy_is_a_valid_scenario_when_problems_is_empty() -> None:
    program = _with("nested")[0] if _with("nested") else generate(1, 0)
    for cand in map(tidy, candidates(program)):
        if not problems(cand):
            load_scenario_text(to_yaml(cand), "candidate.yaml")


def test_tidy_drops_workers_parameters_and_losses_nobody_uses() -> None:
    program = next(p for p in (generate(3, i) for i in range(200))
                   if p.ps is not None and len(p.workers) > 3 and len(p.losses) > 1)
    main = replace(program.main, stmts=tuple(s for s in program.main.stmts
                                             if not isinstance(s, RpcStmt)))
    lonely = tidy(replace(program, main=main))
    assert lonely.workers == (program.workers[0],)
    assert lonely.ps is None and lonely.ps_params == ()
    roots = {r for p in program.passes for r in p.roots}
    assert {x.out for x in tidy(program).losses} == roots & {x.out for x in program.losses}
