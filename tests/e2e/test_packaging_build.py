"""Installable like any Python CLI, with the real build and real RPC workers: the sdist and
the wheel, a shipped scenario run by name (the rest is tests/pure/project/test_packaging.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from builders.packaging import _distviz
from conftest import ROOT, SCENARIOS
from guards import HANG_GUARD_S

from distviz.trace import loads


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """``python -m build`` on a copy of the checkout: ``(sdist, wheel)``; the wheel is built
    from the sdist, as pip would."""
    pytest.importorskip("build")
    work = tmp_path_factory.mktemp("build")
    src = work / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", ".venv", "venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache"))
    out = subprocess.run([sys.executable, "-m", "build", "--outdir", str(work / "dist"),
                          str(src)], capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    sdist = next((work / "dist").glob("distviz-*.tar.gz"))
    wheel = next((work / "dist").glob("distviz-*.whl"))
    return sdist, wheel


@pytest.mark.rpc
def test_run_by_name_from_another_folder_writes_the_trace_to_stdout(tmp_path: Path) -> None:
    out = _distviz("run", "design_note", "-o", "-", "--no-log", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    trace = loads(out.stdout)
    assert trace.scenario is not None and trace.scenario["name"] == "design-note"
    assert "trace written to -" in out.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.build
def test_wheel_carries_each_scenario_byte_for_byte(built: tuple[Path, Path]) -> None:
    with zipfile.ZipFile(built[1]) as whl:
        shipped = {Path(n).name: whl.read(n) for n in whl.namelist()
                   if n.startswith("distviz/scenarios/")}
        names = whl.namelist()
        entry = whl.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert shipped == {p.name: p.read_bytes() for p in SCENARIOS.glob("*.yaml")}
    assert "distviz/scenario/shipped.py" in names and "distviz/py.typed" in names
    assert "distviz/tracing/boot/sitecustomize.py" in names     # distviz trace's bootstrap
    assert "distviz = distviz.__main__:main" in entry
    assert not [n for n in names if n.startswith(("tests/", "scenarios/", "docs/"))]


@pytest.mark.build
def test_sdist_has_scenarios_docs_and_tests_once(built: tuple[Path, Path]) -> None:
    with tarfile.open(built[0]) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
        pkg_info = tar.extractfile(next(m for m in tar.getmembers()
                                        if m.name.endswith("/PKG-INFO")))
        assert pkg_info is not None
        meta = pkg_info.read().decode()
    wanted = {f"scenarios/{p.name}" for p in SCENARIOS.glob("*.yaml")}
    wanted |= {"README.md", "pyproject.toml", "docs/layout.md", "docs/trace-format.md",
               "docs/scenario-language.md", "docs/images/design-note-step.png",
               "tests/conftest.py", "tests/pure/project/test_docs.py", "bench/README.md"}
    assert wanted <= names, sorted(wanted - names)
    assert not [n for n in names if n.startswith("distviz/scenarios/")], "one copy only"
    assert "Requires-Dist: torch<2.16,>=2.4" in meta
    assert "Requires-Python: >=3.11" in meta
