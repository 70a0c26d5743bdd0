"""Every example of the documentation runs (README.md and every page under docs/), with Sybil.

- ```` ```console ```` blocks: each ``$ distviz ...`` line runs in-process against the real
  CLI, in a folder holding copies of ``tests/traces/`` under the names the pages use, and its
  output is compared with the lines under it, which must show some (``...`` alone on a line
  stands for any lines).
  Only commands that need no torch and no workers may appear there; a run on real workers is
  shown as a ```` ```text ```` transcript, whose command lines ``test_docs.py`` checks.
- ```` ```python ```` blocks: run with Sybil's Python parser, one namespace per page, in that
  folder (``>>>`` blocks are doctests).
- ```` ```yaml ```` blocks that are whole scenarios (a ``name:`` and a ``main:``, or an include of
  a scenario file) load.
- ```` ```py ```` blocks only include a file the tests run (``--8<-- "tests/..."``).

Pure and fast: no torch, no workers, no network.
"""

from __future__ import annotations

import functools
import re
import shlex
import shutil
from pathlib import Path

import pytest
from builders.doc_examples import (
    ENV,
    EXAMPLE_FILES,
    PAGES,
    TRACES,
    matches,
    mismatch,
    page_id,
    transcript,
)
from sybil import Document, Example, Sybil
from sybil.parsers.markdown import CodeBlockParser, PythonCodeBlockParser
from typer.testing import CliRunner

from distviz.cli import app
from distviz.scenario.loader import load_scenario, load_scenario_text

ROOT = Path(__file__).resolve().parents[3]

#: The commands a console block may run: they read a file and need no torch or workers.
FAST_COMMANDS = {"replay", "graph", "why", "export", "check", "scenarios"}

#: Exit codes that say the example itself is wrong: bad input, a bug in distviz.
BROKEN = {2, 70}


def run_console_line(command: str) -> tuple[int, list[str]]:
    """Run one ``distviz ...`` line in-process; its exit code and output lines (right-trimmed)."""
    argv = shlex.split(command)
    assert argv[:1] == ["distviz"], f"a console block runs only distviz: {command!r}"
    assert len(argv) > 1 and argv[1] in FAST_COMMANDS, (
        f"`{command}` needs torch or real workers: show it as a ```text transcript; console "
        f"blocks run only {sorted(FAST_COMMANDS)}")
    result = CliRunner().invoke(app, argv[1:], env=ENV, prog_name="distviz")
    lines = [line.rstrip() for line in result.output.rstrip("\n").splitlines()]
    return result.exit_code, lines


def evaluate_console(example: Example) -> str | None:
    for command, expected in transcript(example.parsed):
        code, actual = run_console_line(command)
        if code in BROKEN:
            return f"`{command}` exited {code}:\n" + "\n".join(actual)
        problem = mismatch(command, expected, actual)
        if problem:
            return problem
    return None


# -- yaml and py blocks --------------------------------------------------------------------------

_INCLUDE = re.compile(r'--8<-- "([^"]+)"')


def evaluate_yaml(example: Example) -> str | None:
    text = example.parsed
    include = _INCLUDE.fullmatch(text.strip())
    if include:                                  # a scenario file of the repository, shown whole
        load_scenario(ROOT / include.group(1))
    elif re.search(r"(?m)^name:", text) and re.search(r"(?m)^main:", text):
        scenario = load_scenario_text(text, f"{example.path}:{example.line}")
        shipped = _shipped_by_name().get(scenario.name)
        if shipped is not None and shipped.read_text(encoding="utf-8").strip() != text.strip():
            return f"the page's copy of {shipped.relative_to(ROOT)} differs from the file"
    return None


@functools.cache
def _shipped_by_name() -> dict[str, Path]:
    """The shipped scenarios by their ``name:`` (a page may show one whole)."""
    return {load_scenario(p).name: p for p in sorted((ROOT / "scenarios").glob("*.yaml"))}


def evaluate_include(example: Example) -> str | None:
    """A ```py block is one include of a file under tests/ that a test module names."""
    lines = [line for line in example.parsed.splitlines() if line.strip()]
    found = [_INCLUDE.search(line) for line in lines]
    if len(lines) != 1 or found[0] is None:
        return "a ```py block holds only an include (--8<-- \"tests/...\") of a file the tests run"
    path = found[0].group(1).split(":", 1)[0]
    if not path.startswith("tests/") or not (ROOT / path).is_file():
        return f"the include {path!r} is not a file under tests/"
    tests = (ROOT / "tests").rglob("test_*.py")
    if not any(Path(path).name in t.read_text(encoding="utf-8") for t in tests):
        return f"no test module runs {path}"
    return None


SYBIL = Sybil(parsers=[
    CodeBlockParser(language="console", evaluator=evaluate_console),
    PythonCodeBlockParser(),
    CodeBlockParser(language="yaml", evaluator=evaluate_yaml),
    CodeBlockParser(language="py", evaluator=evaluate_include),
])


def _examples(page: Path) -> tuple[Document, list[Example]]:
    document = SYBIL.parse(page)
    return document, list(document)


@pytest.fixture
def example_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, recorded in EXAMPLE_FILES.items():
        shutil.copyfile(TRACES / recorded, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_example_of_the_page_runs(page: Path, example_dir: Path) -> None:
    _, examples = _examples(page)
    for example in examples:
        example.evaluate()


def test_the_tutorial_runs_examples_of_each_kind() -> None:
    """The parsers find the examples (a parser that silently finds nothing tests nothing)."""
    kinds: dict[str, int] = {}
    for page in PAGES:
        for example in _examples(page)[1]:
            name = type(example.region.evaluator).__name__
            evaluator = getattr(example.region.evaluator, "__name__", name)
            kinds[evaluator] = kinds.get(evaluator, 0) + 1
    assert kinds.get("evaluate_console", 0) >= 8, kinds
    assert kinds.get("evaluate_yaml", 0) >= 1, kinds
    assert sum(v for k, v in kinds.items() if not k.startswith("evaluate_")) >= 2, kinds


def test_every_fenced_block_has_a_language_the_tests_know() -> None:
    """A block without a language (or one nothing checks) would be an example nothing runs."""
    known = {"console", "python", "yaml", "py", "text", "sh", "json"}
    bad = []
    for page in PAGES:
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            m = re.match(r"\s*```+\s*(\S*)", line)
            if m and m.group(1) and m.group(1) not in known:
                bad.append(f"{page_id(page)}:{n}: ```{m.group(1)}")
    assert not bad, bad


@pytest.mark.parametrize(("expected", "actual", "ok"), [
    (["a", "...", "d"], ["a", "b", "c", "d"], True),
    (["a", "...", "d"], ["a", "d"], True),
    (["a", "b"], ["a", "c"], False),
    (["a", "..."], ["a"], True),
    (["a"], ["a", "b"], False),
])
def test_ellipsis_matching(expected: list[str], actual: list[str], ok: bool) -> None:
    assert matches(expected, actual) is ok


def test_a_console_block_with_a_wrong_output_fails(example_dir: Path) -> None:
    code, actual = run_console_line("distviz graph design-note.trace.json")
    assert code == 0 and actual
    assert not matches([actual[0] + " (changed)", "..."], actual)
    with pytest.raises(AssertionError, match="needs torch or real workers"):
        run_console_line("distviz run design_note")
