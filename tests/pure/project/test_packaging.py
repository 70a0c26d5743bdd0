"""Installable like any Python CLI: shipped scenarios by name from any folder, one copy of each
scenario file, and the sdist and wheel that ``python -m build`` makes.

``.ci/run`` goes one step further: it installs the wheel into a fresh virtual environment
outside the checkout and runs a shipped scenario by name, exports an SVG and replays it.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from builders.packaging import _distviz
from conftest import ROOT, SCENARIOS
from typer.testing import CliRunner

from distviz.cli import app
from distviz.errors import ScenarioError
from distviz.scenario.shipped import resolve_scenario, scenario_dir, shipped_scenarios

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


# -- pyproject.toml ------------------------------------------------------------------------------

def test_every_package_is_listed_and_scenarios_map_onto_the_one_folder() -> None:
    tool = PYPROJECT["tool"]["setuptools"]
    on_disk = {".".join(p.parent.relative_to(ROOT).parts)
               for p in (ROOT / "distviz").rglob("__init__.py")}
    assert set(tool["packages"]) == on_disk | {"distviz.scenarios"}
    assert tool["package-dir"] == {"distviz.scenarios": "scenarios"}
    assert tool["package-data"]["distviz.scenarios"] == ["*.yaml"]
    assert not (ROOT / "distviz" / "scenarios").exists(), "one copy: scenarios/ only"


def test_torch_range_is_the_tested_one() -> None:
    """CI runs the suite on torch 2.13.0 and the agreement tests on 2.14.1; the range claims
    2.4 to 2.15, each end measured (docs/torch-versions.md)."""
    deps = PYPROJECT["project"]["dependencies"]
    assert [d for d in deps if d.startswith("torch")] == ["torch>=2.4,<2.16"]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert '"torch==2.13.0"' in ci
    assert "tests/torch_matrix.sh 2.14.1" in ci
    assert PYPROJECT["project"]["requires-python"] == ">=3.11"


# -- shipped scenarios by name -----------------------------------------------------------------

def test_checkout_reads_the_top_level_scenarios_folder() -> None:
    assert scenario_dir() == SCENARIOS
    assert list(shipped_scenarios()) == sorted(p.stem for p in SCENARIOS.glob("*.yaml"))
    assert "design_note" in shipped_scenarios()


@pytest.mark.parametrize("arg", ["design_note", "design_note.yaml", "design-note"])
def test_a_shipped_name_resolves_from_any_folder(arg: str, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert resolve_scenario(arg) == SCENARIOS / "design_note.yaml"


def test_an_existing_path_wins_over_a_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "design_note.yaml").write_text("name: mine\n")
    assert resolve_scenario("design_note.yaml") == Path("design_note.yaml")
    assert resolve_scenario("design_note") == SCENARIOS / "design_note.yaml"


def test_unknown_name_lists_close_matches() -> None:
    with pytest.raises(ScenarioError) as info:
        resolve_scenario("desing_note")
    assert info.value.exit_code == 2
    assert info.value.one_line() == (
        "desing_note: no scenario file or shipped scenario of that name (close matches: "
        "design_note); `distviz scenarios` lists the shipped ones")


def test_missing_path_to_a_shipped_file_says_how_to_run_it(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ScenarioError, match="from anywhere: distviz run pipeline$"):
        resolve_scenario("scenarios/pipeline.yaml")


def test_scenarios_lists_names_that_run_from_another_folder(tmp_path: Path) -> None:
    out = _distviz("scenarios", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    names = [ln.split()[0] for ln in out.stdout.splitlines()[1:-1] if ln[:1].strip()]
    assert names == list(shipped_scenarios())
    assert "scenarios/" not in "".join(names)
    for name in names:
        check = _distviz("check", name, cwd=tmp_path)
        assert check.returncode == 0, check.stderr


def test_check_unknown_name_is_one_line_exit_2(tmp_path: Path) -> None:
    out = _distviz("check", "pipline", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.splitlines() == [
        "error: pipline: no scenario file or shipped scenario of that name (close matches: "
        "pipeline); `distviz scenarios` lists the shipped ones"]


def test_run_unknown_name_starts_nothing() -> None:
    result = CliRunner().invoke(app, ["run", "desing_note"])
    assert result.exit_code == 2 and "close matches: design_note" in result.output


# -- the sdist and the wheel ---------------------------------------------------------------------
