"""The supported torch releases: ``pyproject.toml`` claims exactly ``limits``' range, and the
commands that run torch (``run``, ``trace``, ``fuzz``) refuse one outside it in one line with
exit code 2, before anything starts, while the pure commands run without torch at all. No torch
is imported here.

The out-of-range torch is the metadata pip writes for ``torch 2.3.1`` (a ``dist-info`` folder)
put first on ``sys.path``: what the check reads, as an install of that release leaves it.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest
import replay_fixtures as F
from conftest import ROOT
from typer.testing import CliRunner

from distviz import limits
from distviz.cli import app
from distviz.runner.supervisor.torch_range import (
    installed_torch,
    metadata_version,
    range_problem,
    release_of,
    supported_range,
    supported_requirement,
)

REFUSED_231 = ("distviz supports torch 2.4 to 2.15; found 2.3.1: pip install 'torch>=2.4,<2.16' "
               "(or set DISTVIZ_ANY_TORCH=1 to try 2.3.1 anyway)")


def test_pyproject_claims_the_range_the_check_enforces() -> None:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert [d for d in deps if d.startswith("torch")] == [supported_requirement()]
    assert supported_requirement() == "torch>=2.4,<2.16"
    assert supported_range() == "2.4 to 2.15"


@pytest.mark.parametrize("version", ["2.4.0", "2.4.1", "2.8.0+cpu", "2.13.0+cpu", "2.14.1",
                                     "2.15.0", "2.15.0+cu130", "2.15.0a0+git1234abc"])
def test_every_release_from_2_4_to_2_15_is_accepted(version: str) -> None:
    assert range_problem(version) is None


@pytest.mark.parametrize("version", ["2.3.1", "1.13.1", "2.16.0", "2.16.0.dev20260101", "3.0.0",
                                     "unknown"])
def test_a_release_outside_the_range_is_refused_naming_it(version: str) -> None:
    assert range_problem(version) == (
        f"distviz supports torch 2.4 to 2.15; found {version}: pip install 'torch>=2.4,<2.16' "
        f"(or set DISTVIZ_ANY_TORCH=1 to try {version} anyway)")


def test_no_torch_installed_is_refused_with_the_install_command() -> None:
    assert range_problem(None) == ("distviz supports torch 2.4 to 2.15; found no torch "
                                   "installed: pip install 'torch>=2.4,<2.16'")


def test_release_is_read_from_local_and_pre_release_versions() -> None:
    assert release_of("2.14.1") == (2, 14)
    assert release_of("2.13.0+cpu") == (2, 13)
    assert release_of("2.16.0a0+git1234") == (2, 16)
    assert release_of("nightly") is None


def test_the_torch_installed_here_is_in_the_range() -> None:
    found = installed_torch()
    assert found is not None and range_problem(found) is None
    assert limits.TORCH_OLDEST <= release_of(found) <= limits.TORCH_NEWEST  # type: ignore[operator]


@pytest.fixture()
def torch_231(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``torch 2.3.1`` as installed package metadata, found before the real torch's; and no
    torch module at all (an import of torch fails)."""
    info = tmp_path / "site" / "torch-2.3.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.3.1\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setitem(sys.modules, "torch", None)
    assert installed_torch() == "2.3.1"


def test_the_version_is_read_from_the_torch_package_the_import_would_load(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``torch`` package first on ``sys.path`` whose ``version.py`` says 2.3.1 (as every
    torch release writes it) is what the check reads, without importing it; the package
    metadata is the fallback."""
    package = tmp_path / "site" / "torch"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('not to be imported')\n")
    (package / "version.py").write_text("from typing import Optional\n\n"
                                        "__all__ = ['__version__']\n"
                                        "__version__ = '2.3.1+cpu'\ngit_version = 'abc'\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert installed_torch() == "2.3.1+cpu"
    assert "torch" not in sys.modules
    (package / "version.py").unlink()
    assert installed_torch() == metadata_version()


@pytest.mark.parametrize("args", [["run", "design_note"], ["fuzz", "--count", "1"],
                                  ["trace", "--", "true"]])
def test_commands_that_run_torch_refuse_an_old_one_in_one_line(
        torch_231: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(limits.TORCH_ANY_ENV, raising=False)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == limits.EXIT_BAD_INPUT, result.output
    assert result.output.splitlines() == [f"error: {REFUSED_231}"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]  # nothing was written


@pytest.mark.parametrize("args", [["replay"], ["graph"], ["export", "--format", "dot"]])
def test_pure_commands_run_without_torch(torch_231: None, tmp_path: Path,
                                         args: list[str]) -> None:
    path = tmp_path / "design_note.trace.json"
    F.design_note().save(path)
    result = CliRunner().invoke(app, [*args, str(path)])
    assert result.exit_code == 0, result.output
    assert "error" not in result.output and result.output.strip()
