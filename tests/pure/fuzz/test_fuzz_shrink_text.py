"""Training programs shrunk as text: fewer iterations, then delta debugging over lines, keeping
only texts that load as scenarios and still show the problem (here a stand-in for a run)."""

from __future__ import annotations

from distviz.fuzz.shrink_text import lines_of, scenario_loads, shrink_text
from distviz.fuzz.training_program import generate_training

loads = scenario_loads


def _program_with(*markers: str) -> str:
    for index in range(60):
        text = generate_training(0, index).text
        if all(m in text for m in markers):
            return text
    raise AssertionError(f"no generated program has {markers!r}")


def test_a_problem_tied_to_one_line_shrinks_to_a_loading_program_that_keeps_it() -> None:
    text = _program_with("extra = rpc.remote(")
    runs: list[str] = []

    def still_fails(candidate: str) -> bool:
        runs.append(candidate)
        return "extra = rpc.remote(" in candidate

    res = shrink_text(text, still_fails, loads, max_tries=500)
    assert loads(res.text) and "extra = rpc.remote(" in res.text
    assert lines_of(res.text) < 0.7 * lines_of(text), res.text
    assert "iterations: 1" in res.text
    assert res.text.startswith(text.split("\n", 1)[0])      # the name line stays
    assert res.tries == len(runs) and all(loads(c) for c in runs)
    assert 0 < res.steps <= res.tries


def test_two_lines_that_must_stay_together_both_stay() -> None:
    text = _program_with("h = head(h)", "dist_autograd.get_gradients")

    def still_fails(candidate: str) -> bool:
        return "h = head(h)" in candidate and "dist_autograd.get_gradients" in candidate

    res = shrink_text(text, still_fails, loads, max_tries=500)
    assert still_fails(res.text) and loads(res.text)
    assert lines_of(res.text) < lines_of(text)


def test_nothing_fails_nothing_changes_and_the_budget_is_kept() -> None:
    text = generate_training(0, 1).text
    res = shrink_text(text, lambda _c: False, loads, max_tries=7)
    assert res.text == text and res.steps == 0 and res.tries == 7
