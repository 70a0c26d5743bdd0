"""The training table's loss cells: a context with many backward passes stays one short cell."""

from __future__ import annotations

from distviz.render.iterations import losses_text


def test_few_losses_are_listed() -> None:
    assert losses_text([]) == "-"
    assert losses_text([1.5, 2.25], 5) == "1.5, 2.25"


def test_many_equal_losses_are_counted() -> None:
    assert losses_text([8.15281] * 20, 5) == "8.1528 ×20"


def test_many_different_losses_show_the_first_two_and_the_last() -> None:
    assert losses_text([3.0, 2.5, 2.0, 1.5, 1.25], 5) == "3, 2.5 … 1.25 (5 passes)"
