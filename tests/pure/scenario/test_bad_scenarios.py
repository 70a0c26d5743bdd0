"""The bad-scenario corpus: every file in tests/bad_scenarios/ fails ``load_scenario`` with the
one-line error written on its first line (``# expect: <exact text after the directory>``).

A ``# set: k=v`` line passes ``--set`` overrides. Files in ``runtime/`` pass the checker and fail
only when run (``# expect-run:``); here they are only checked to load.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from guards import HANG_GUARD_S

from distviz.errors import ScenarioError
from distviz.scenario import load_scenario

HERE = Path(__file__).parents[2] / "bad_scenarios"
BAD = sorted(HERE.glob("*.yaml"))
RUNTIME = sorted((HERE / "runtime").glob("*.yaml"))


def header(path: Path) -> tuple[str, dict[str, str]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines and lines[0].startswith("# expect: "), f"{path.name}: no '# expect:' line"
    expected = lines[0][len("# expect: "):]
    sets = dict(line[len("# set: "):].split("=", 1) for line in lines
                if line.startswith("# set: "))
    return expected, sets


def test_corpus_is_large_enough() -> None:
    assert len(BAD) >= 45


@pytest.mark.parametrize("path", BAD, ids=[p.stem for p in BAD])
def test_bad_scenario_gives_its_one_line_error(path: Path) -> None:
    expected, sets = header(path)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path, sets)
    message = str(info.value)
    assert "\n" not in message
    assert expected in message
    assert info.value.exit_code == 2
    if not sets:  # --set errors name the option, not the file
        assert message.startswith(str(path) + ":")


@pytest.mark.parametrize("path", RUNTIME, ids=[p.stem for p in RUNTIME])
def test_runtime_bad_scenario_passes_the_checker(path: Path) -> None:
    first = path.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("# expect-run: ")
    load_scenario(path)


CLI_SAMPLES = ["bad_import", "yaml_unclosed_bracket", "unknown_worker", "torch_load", "empty"]


@pytest.mark.skipif(importlib.util.find_spec("distviz.__main__") is None,
                    reason="the CLI (python -m distviz) is not there yet")
@pytest.mark.parametrize("name", CLI_SAMPLES)
def test_cli_check_exits_2_with_one_line_and_no_traceback(name: str) -> None:
    path = HERE / f"{name}.yaml"
    expected, _ = header(path)
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "400"}
    done = subprocess.run([sys.executable, "-m", "distviz", "check", str(path)],
                          capture_output=True, text=True, timeout=HANG_GUARD_S, env=env)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr + done.stdout
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert expected in lines[0]
