"""Misused commands: a trace given where a scenario is expected and the reverse, step ranges
outside the replay, export flags that the format would ignore. Each is one line on stderr
naming what was given and what to do, exit code 2, and no output file."""

from __future__ import annotations

from pathlib import Path

import pytest
import replay_fixtures as F
from conftest import SCENARIOS
from typer.testing import CliRunner

from distviz.cli import app
from distviz.replay import replay


def _trace(tmp_path: Path) -> Path:
    path = tmp_path / "design_note.json"
    F.design_note().save(path)
    return path


def _error_line(args: list[str]) -> str:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert "Traceback" not in result.output
    return lines[0]


@pytest.mark.parametrize("command", ["run", "check"])
def test_a_trace_given_to_run_or_check_says_to_replay_it(tmp_path: Path, command: str) -> None:
    path = _trace(tmp_path)
    line = _error_line([command, str(path)])
    assert line == (f"error: {path}: this is a trace, not a scenario: replay it with "
                    f"`distviz replay {path}`")


@pytest.mark.parametrize("command", ["replay", "graph", "export"])
def test_a_scenario_given_to_replay_says_to_run_it(command: str) -> None:
    path = SCENARIOS / "design_note.yaml"
    line = _error_line([command, str(path)])
    assert line == (f"error: {path}: this is a scenario, not a trace: run it with "
                    f"`distviz run {path}` (that writes the trace)")


def test_replay_from_past_the_last_step_names_the_number_of_steps(tmp_path: Path) -> None:
    path = _trace(tmp_path)
    n = len(replay(F.design_note()).events)
    line = _error_line(["replay", str(path), "--from", "30"])
    assert line == (f"error: --from 30: the replay has {n} steps, numbered 0 to {n - 1}; "
                    f"give --from {n - 1} or less")


@pytest.mark.parametrize(("args", "expected"), [
    (["--from", "5", "--to", "3"], "error: --from 5 is after --to 3; give --to 5 or more"),
    (["--to", "-1"], "error: --to -1: steps are numbered from 0"),
    (["--from", "-2"], "error: --from -2: steps are numbered from 0"),
])
def test_replay_step_range_that_selects_nothing_is_refused(tmp_path: Path, args: list[str],
                                                           expected: str) -> None:
    assert _error_line(["replay", str(_trace(tmp_path)), *args]) == expected


def test_replay_to_past_the_last_step_shows_to_the_end(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["replay", str(_trace(tmp_path)), "--from", "25", "--to",
                                      "99"])
    assert result.exit_code == 0, result.output
    assert "(showing steps 25..27)" in result.output.splitlines()[0]


def test_run_refuses_a_backwards_step_range_before_starting_workers() -> None:
    line = _error_line(["run", str(SCENARIOS / "design_note.yaml"), "--from", "9", "--to",
                        "2"])
    assert line == "error: --from 9 is after --to 2; give --to 9 or more"


@pytest.mark.parametrize(("args", "expected"), [
    (["-f", "perfetto", "--step", "3"],
     "--step cannot be used with --format perfetto; it draws one step as svg, png or dot"),
    (["-f", "html", "--step", "3"],
     "--step cannot be used with --format html; it draws one step as svg, png or dot"),
    (["-f", "perfetto", "--full"],
     "--full cannot be used with --format perfetto; it applies to pictures and the HTML "
     "viewer"),
    (["-f", "dot", "--frames", "FRAMES", "--step", "2"],
     "--step cannot be used with --frames: --frames writes every step"),
    (["-f", "dot", "--frames", "FRAMES", "-o", "OUT"],
     "--output cannot be used with --frames: the frames are written into the --frames "
     "folder"),
    (["-f", "html", "--frames", "FRAMES"],
     "--frames cannot be used with --format html; use svg, png or dot"),
])
def test_export_flags_the_format_would_ignore_are_refused(tmp_path: Path, args: list[str],
                                                          expected: str) -> None:
    out = tmp_path / "out.file"
    frames = tmp_path / "frames"
    args = [str(frames) if a == "FRAMES" else str(out) if a == "OUT" else a for a in args]
    if "-o" not in args and "--frames" not in args:
        args += ["-o", str(out)]
    assert _error_line(["export", str(_trace(tmp_path)), *args]) == f"error: {expected}"
    assert not out.exists() and not frames.exists()
