"""Shrink a scenario's text line by line while it still shows a problem (pure).

Generated training programs are written as text (``distviz.fuzz.training_program``), not as the
``FuzzProgram`` structure ``distviz.fuzz.shrink`` rewrites, so they are shrunk as text:

1. fewer iterations: ``iterations: 3`` becomes ``1``, then ``2`` (each loop of a training
   program is a context, a backward and an optimizer step);
2. delta debugging over the lines after the header (``name:`` and ``description:`` stay):
   chunks of half the lines, then a quarter, ... down to single lines are dropped, each drop
   kept when the text still loads as a scenario (``loads``, no worker started) and still shows
   the problem (``still_fails``: a real run in ``distviz fuzz``).

Only texts that load count as tries: a dropped ``for`` line or half of a class is refused by
the checker in milliseconds. It ends when no single line can go, or after ``max_tries`` runs.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["TextShrinkResult", "lines_of", "scenario_loads", "shrink_text"]

_ITERATIONS = re.compile(r"^(\s+iterations:\s*)(\d+)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class TextShrinkResult:
    """The smallest failing text found, how many runs were tried and how many made it
    smaller."""

    text: str
    tries: int
    steps: int


def scenario_loads(text: str) -> bool:
    """Whether ``text`` loads as a scenario: the checker alone, no worker starts (the
    ``loads`` that ``distviz fuzz`` passes to ``shrink_text``)."""
    from distviz.errors import DistvizError
    from distviz.scenario import load_scenario_text
    try:
        load_scenario_text(text, "candidate.yaml")
    except DistvizError:
        return False
    return True


def lines_of(text: str) -> int:
    """A text's size for the report: its non-blank lines."""
    return sum(1 for line in text.splitlines() if line.strip())


def _header_end(lines: list[str]) -> int:
    """The first line that may be dropped: after the leading ``#`` notes, ``name:`` and
    ``description:`` (with its indented continuation)."""
    k = 0
    in_description = False
    while k < len(lines):
        line = lines[k]
        if line.startswith(("#", "name:")):
            in_description = False
        elif line.startswith("description:"):
            in_description = True
        elif not (in_description and line.startswith(" ")):
            break
        k += 1
    return k


class _Search:
    """The current text and the bookkeeping of one shrink."""

    def __init__(self, text: str, still_fails: Callable[[str], bool],
                 loads: Callable[[str], bool], max_tries: int,
                 on_try: Callable[[str, bool], None] | None) -> None:
        self.text, self.tries, self.steps = text, 0, 0
        self._fails, self._loads, self._max, self._on_try = still_fails, loads, max_tries, on_try

    def spent(self) -> bool:
        return self.tries >= self._max

    def attempt(self, candidate: str) -> bool:
        """Run ``candidate`` if it loads and tries are left; keep it when it still fails."""
        if candidate == self.text or self.spent() or not self._loads(candidate):
            return False
        self.tries += 1
        failed = self._fails(candidate)
        if self._on_try is not None:
            self._on_try(candidate, failed)
        if failed:
            self.text, self.steps = candidate, self.steps + 1
        return failed


def _fewer_iterations(search: _Search) -> None:
    m = _ITERATIONS.search(search.text)
    if m is None:
        return
    for n in range(1, int(m.group(2))):
        cand = search.text[:m.start(2)] + str(n) + search.text[m.end(2):]
        if search.attempt(cand):
            return


def _drop_lines(search: _Search) -> None:
    lines = search.text.split("\n")
    start = _header_end(lines)
    chunk = max(1, (len(lines) - start) // 2)
    while chunk >= 1 and not search.spent():
        i = start
        dropped = False
        while i < len(lines) and not search.spent():
            cand = lines[:i] + lines[i + chunk:]
            if search.attempt("\n".join(cand)):
                lines = cand
                dropped = True
            else:
                i += chunk
        if not dropped:
            chunk //= 2


def shrink_text(text: str, still_fails: Callable[[str], bool], loads: Callable[[str], bool],
                max_tries: int, on_try: Callable[[str, bool], None] | None = None
                ) -> TextShrinkResult:
    """The smallest text found that ``loads`` and ``still_fails``; see the module docstring.
    ``on_try(candidate, failed)`` is called after each run."""
    search = _Search(text, still_fails, loads, max_tries, on_try)
    _fewer_iterations(search)
    _drop_lines(search)
    return TextShrinkResult(search.text, search.tries, search.steps)
