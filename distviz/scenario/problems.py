"""Collecting several problems of one scenario file, so that ``distviz check`` reports them all.

Each part of the loader and the checker still raises ``ScenarioError`` at its first problem;
``Problems.attempt`` runs one part, keeps its error and gives a stand-in value, so the next
part is checked too. Parts whose failure would make later problems meaningless (the YAML, the
workers, a program that does not parse) end the collection with ``raise_found``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from distviz.errors import ScenarioError, ScenarioProblems

__all__ = ["Problems"]

T = TypeVar("T")


class Problems:
    """The problems found so far in one file."""

    def __init__(self) -> None:
        self.found: list[ScenarioError] = []

    def add(self, err: ScenarioError) -> None:
        """Keep ``err`` (each problem of a ``ScenarioProblems``)."""
        self.found.extend(err.problems if isinstance(err, ScenarioProblems) else [err])

    def attempt(self, part: Callable[[], T], stand_in: T) -> T:
        """Return ``part()``; on ``ScenarioError`` keep the error and return ``stand_in``."""
        try:
            return part()
        except ScenarioError as err:
            self.add(err)
            return stand_in

    def raise_found(self) -> None:
        """Raise the one problem found, or ``ScenarioProblems`` with all of them; return when
        there is none."""
        if len(self.found) == 1:
            raise self.found[0]
        if self.found:
            raise ScenarioProblems(self.found)
