"""The examples of the documentation (README.md and docs/) as the tests read them: the pages, the
recorded traces the examples name, and console transcripts with their expected output.

``...`` alone on a line of expected output stands for any lines (none included)."""

from __future__ import annotations

import difflib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
TRACES = ROOT / "tests" / "traces"
#: README.md and every page of the site.
PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]

#: The trace files the pages name, each a copy of a trace recorded from a real run.
EXAMPLE_FILES = {
    "design-note.trace.json": "design_note.json",
    "unused.json": "unused_result.json",
    "no_grad.json": "no_grad_rpc.json",
    "pipeline.trace.json": "pipeline.json",
    "why-broken.trace.json": "why_broken.json",
}

#: The terminal the examples are shown for (as docs/hooks/reference.py renders ``--help``).
ENV = {"NO_COLOR": "1", "COLUMNS": "100", "TERM": "dumb"}


def page_id(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def transcript(source: str) -> list[tuple[str, list[str]]]:
    """``(command line, expected output lines)`` for each ``$ `` line of a transcript."""
    runs: list[tuple[str, list[str]]] = []
    for line in source.splitlines():
        if line.startswith("$ "):
            runs.append((line[2:].strip(), []))
        elif runs:
            runs[-1][1].append(line.rstrip())
        elif line.strip():
            raise AssertionError(f"transcript text before its first `$ ` line: {line!r}")
    assert runs, "a transcript without a `$ ` command line"
    for _, expected in runs:
        while expected and not expected[-1]:
            expected.pop()
    return runs


def matches(expected: list[str], actual: list[str]) -> bool:
    """Whether ``actual`` is ``expected``, where ``...`` alone on a line stands for any lines."""
    pattern = "".join(r"(?:[^\n]*\n)*?" if line.strip() == "..." else re.escape(line) + r"\n"
                      for line in expected)
    return re.fullmatch(pattern, "".join(line + "\n" for line in actual)) is not None


def mismatch(command: str, expected: list[str], actual: list[str]) -> str | None:
    """``None`` when the output matches; else what differs, as a unified diff."""
    if not [line for line in expected if line.strip() != "..."]:
        return f"`{command}` shows no output: show what it prints"
    if matches(expected, actual):
        return None
    diff = difflib.unified_diff(expected, actual, "the page", "the command", lineterm="")
    return f"`{command}` printed something else:\n" + "\n".join(diff)


def text_transcripts(command_prefix: str) -> list[tuple[Path, int, str]]:
    """Every ```text block of the pages whose first line is ``$ <command_prefix>...``:
    ``(page, line, block text)``."""
    found = []
    for page in PAGES:
        lines = page.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if line.strip() == "```text" and i + 1 < len(lines) \
                    and lines[i + 1].startswith(f"$ {command_prefix}"):
                end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
                found.append((page, i + 1, "\n".join(lines[i + 1:end])))
    return found
