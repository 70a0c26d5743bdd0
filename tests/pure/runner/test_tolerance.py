"""The one tolerance rule (``distviz.trace.iteration.within_tolerance``): a distributed value
against the single-process reference's, NaN included, the same on lists (training values) and
on tensors (``runner/gradients.py``)."""

from __future__ import annotations

import math

import pytest

from distviz.trace.iteration import compare_values, difference, within_tolerance

NAN, INF = math.nan, math.inf

CASES = [  # (got, want, equal)
    ([1.0, 2.0], [1.0, 2.0], True),
    ([1.0, 2.00001], [1.0, 2.0], True),            # within 1e-6 + 1e-4 * 2
    ([1.0, 2.1], [1.0, 2.0], False),
    ([NAN, 2.0], [NAN, 2.0], True),                # NaN where the reference has NaN
    ([NAN, 2.0], [1.0, 2.0], False),               # NaN vs a number
    ([1.0, 2.0], [NAN, 2.0], False),               # a number vs NaN
    ([2.0, NAN], [1.0, 2.0], False),               # NaN last: max() must not hide it
    ([INF, 1.0], [INF, 1.0], True),                # equal infinities
    ([INF, 1.0], [1.0, 1.0], False),
]


@pytest.mark.parametrize(("got", "want", "equal"), CASES)
def test_one_rule_for_a_value_against_the_reference(got: list[float], want: list[float],
                                                    equal: bool) -> None:
    ok, tol = within_tolerance(difference(got, want), "float32")
    assert ok is equal
    assert tol == pytest.approx(1e-6 + 1e-4 * 2.0) or tol == pytest.approx(1e-6 + 1e-4)
    check = compare_values("w", "ps", got, want, "float32")
    assert check.status == ("match" if equal else "mismatch")
    assert not math.isnan(check.max_abs_diff or 0.0)


@pytest.mark.parametrize(("got", "want", "equal"), CASES)
def test_tensors_follow_the_same_rule(got: list[float], want: list[float], equal: bool) -> None:
    torch = pytest.importorskip("torch")
    from distviz.runner.gradients import difference as tensor_difference

    d = tensor_difference(torch.tensor(got, dtype=torch.float64),
                          torch.tensor(want, dtype=torch.float64))
    assert d == difference(got, want)
    assert within_tolerance(d, "float32")[0] is equal


def test_the_reference_comparison_of_a_nan_gradient() -> None:
    torch = pytest.importorskip("torch")
    import replay_fixtures as F

    from distviz.runner.gradients import compare

    t = F.design_note()
    leaves = [n for n in t.nodes if n.kind == "accumulate_grad" and n.var]
    nan = torch.tensor([[NAN, 1.0], [1.0, 1.0]])
    ref = {"outcome": "completed", "error": None, "grads": {n.var: nan for n in leaves}}
    same = compare(ref, {n.id: nan.clone() for n in leaves}, t, {"outcome": "completed"})
    assert same["ok"] is True and {r["status"] for r in same["comparison"]} == {"match"}
    other = compare(ref, {n.id: torch.ones(2, 2) for n in leaves}, t, {"outcome": "completed"})
    assert other["ok"] is False and {r["status"] for r in other["comparison"]} == {"mismatch"}
