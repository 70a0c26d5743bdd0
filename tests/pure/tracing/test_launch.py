"""``distviz trace``'s early start (``distviz.tracing.launcher.launch``): the program's interpreter starts
while the command line is read, and runs nothing of the program until the command line is
checked.

Real processes, no torch: each test starts a Python program that would leave a mark (a file)
at its first line, and reads whether and when it did.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import pid_alive, wait_until
from guards import HANG_GUARD_S

from distviz.tracing.config import TraceConfig
from distviz.tracing.launcher import launch
from distviz.tracing.launcher.launch import gateable

ROOT = Path(__file__).resolve().parents[3]
PY = sys.executable


@pytest.fixture(autouse=True)
def _no_program_left_at_its_gate() -> Iterator[None]:
    yield
    launch.abort_early()


def _marking(mark: Path) -> str:
    """A program that writes its environment (the variables distviz sets) to ``mark``."""
    return ("import json, os, sys; "
            f"open({str(mark)!r}, 'w').write(json.dumps(dict(os.environ)))")


def _processes_naming(token: str) -> list[int]:
    """Live processes whose command line holds ``token`` (the tests' own excepted)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if token.encode() in cmdline and pid_alive(int(entry.name)):
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize(("command", "gated"), [
    (["/usr/bin/python3", "train.py"], True),
    (["/v/bin/python", "-c", "pass"], True),
    (["/v/bin/python3.11", "-u", "-X", "importtime", "-W", "error", "-m", "pkg"], True),
    (["/v/bin/python3", "-uB", "-Xdev", "-Wd", "train.py", "-I"], True),   # -I is the program's
    (["/v/bin/python3", "-uc", "pass"], True),
    (["/v/bin/python3", "-"], True),
    (["/v/bin/python3"], True),                      # the interactive interpreter
    (["/v/bin/python3", "-I", "train.py"], False),   # isolated: no PYTHONPATH, no bootstrap
    (["/v/bin/python3", "-E", "train.py"], False),
    (["/v/bin/python3", "-S", "train.py"], False),   # no site: no sitecustomize
    (["/v/bin/python3", "-uS", "-c", "pass"], False),
    (["/v/bin/python3", "--version"], False),
    (["/usr/bin/env", "python3", "train.py"], False),
    (["/usr/bin/torchrun", "train.py"], False),
    (["/bin/bash", "-c", "python train.py"], False),
    (["/v/bin/pythonista", "x.py"], False),
])
def test_only_an_interpreter_that_runs_the_bootstrap_is_started_early(
        command: list[str], gated: bool) -> None:
    assert gateable(command) is gated


def _gated(tmp_path: Path, program: str) -> launch.Gated:
    launch.start_early(["-o", str(tmp_path / "out"), "--", PY, "-c", program])
    gated = launch.take_early([PY, "-c", program])
    assert gated is not None
    return gated


def test_the_program_waits_at_the_gate_and_runs_unchanged_once_released(
        tmp_path: Path) -> None:
    mark = tmp_path / "mark.json"
    gated = _gated(tmp_path, _marking(mark))
    time.sleep(1.0)     # far longer than its interpreter's start-up
    assert gated.proc.poll() is None and not mark.exists()
    settings = TraceConfig(out_dir=str(tmp_path / "out"), contexts="none").to_env()
    proc = gated.release(settings)
    assert proc.wait(HANG_GUARD_S) == 0
    env = json.loads(mark.read_text())
    assert env["DISTVIZ_TRACE"] == settings and launch.GATE_ENV not in env
    # the same environment as a command started once the command line was checked
    usual = launch.environment(settings)
    assert {k: v for k, v in env.items() if k != "_"} == {
        k: v for k, v in usual.items() if k != "_"}


def test_an_aborted_program_runs_nothing_and_is_not_left_behind(tmp_path: Path) -> None:
    mark = tmp_path / "mark.json"
    gated = _gated(tmp_path, _marking(mark))
    gated.abort()
    assert gated.proc.returncode == 0 and not pid_alive(gated.proc.pid)
    assert not mark.exists()


def test_a_command_line_that_changed_aborts_the_early_start(tmp_path: Path) -> None:
    mark = tmp_path / "mark.json"
    launch.start_early(["--", PY, "-c", _marking(mark)])
    assert launch.take_early([PY, "-c", "pass"]) is None     # not the program started early
    assert launch.take_early([PY, "-c", _marking(mark)]) is None
    assert not mark.exists()


@pytest.mark.parametrize("how", ["bad option", "help", "keyboard interrupt", "killed"])
def test_a_command_line_refused_or_cut_short_never_runs_the_program(
        tmp_path: Path, how: str) -> None:
    """``distviz trace``'s own process, started the way the console script starts it."""
    mark = tmp_path / "mark.json"
    token = f"distviz-early-{os.getpid()}-{how.replace(' ', '-')}"
    program = f"{_marking(mark)}  # {token}"
    argv = ["distviz", "trace", "-o", str(tmp_path / "out"), "--", PY, "-c", program]
    if how == "bad option":
        argv[2:2] = ["--contexts", "bogus"]
    elif how == "help":
        argv[2:2] = ["--help"]
    cut = {"keyboard interrupt": "raise KeyboardInterrupt",
           "killed": "os.kill(os.getpid(), signal.SIGKILL)"}.get(how)
    code = ("import os, signal, sys\n"
            f"sys.argv = {argv!r}\n"
            "import distviz.cli\n")
    if cut:    # the CLI is cut short after the program started early, before it let it run
        code += f"def cut(): {cut}\ndistviz.cli.main = cut\n"
    code += "from distviz.__main__ import main\nmain()\n"
    proc = subprocess.run([PY, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=HANG_GUARD_S)
    expected = {"bad option": 2, "help": 0, "keyboard interrupt": -signal.SIGINT,
                "killed": -signal.SIGKILL}[how]
    assert proc.returncode == expected, proc.stderr
    if how == "bad option":
        assert proc.stderr.strip().splitlines() == [
            "error: --contexts bogus: expected all, first, none, a list of context numbers "
            "such as 1,3 (from 1, per trainer) or every:K"]
    wait_until(lambda: not _processes_naming(token), "the program started early ended")
    assert not mark.exists()


def test_the_console_script_starts_the_program_before_typer_and_lets_it_run(
        tmp_path: Path) -> None:
    mark = tmp_path / "mark.json"
    code = ("import os, sys\n"
            "import distviz.tracing.launcher.launch as launch\n"
            "seen = []\n"
            "start, release, end = launch.start_early, launch.Gated.release, os._exit\n"
            "def spy_start(args):\n"
            "    seen.append(('start', 'typer' in sys.modules)); start(args)\n"
            "def spy_release(self, settings):\n"
            "    seen.append(('release', 'typer' in sys.modules)); return release(self, settings)\n"
            "def report(code):\n"
            "    print('SEEN', seen, flush=True); end(code)\n"
            "launch.start_early, launch.Gated.release, os._exit = spy_start, spy_release, report\n"
            f"sys.argv = ['distviz', 'trace', '-o', {str(tmp_path / 'out')!r}, '--contexts', "
            f"'none', '--', {PY!r}, '-c', {_marking(mark)!r}]\n"
            "from distviz.__main__ import main\n"
            "main()\n")
    proc = subprocess.run([PY, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == (
        "SEEN [('start', False), ('release', True)]"), proc.stdout
    env = json.loads(mark.read_text())
    assert json.loads(env["DISTVIZ_TRACE"])["contexts"] == "none"
    assert launch.GATE_ENV not in env


def test_the_bootstrap_and_the_settings_spell_the_variables_as_launch_does() -> None:
    from distviz.tracing import config

    boot = (Path(launch.BOOT) / "sitecustomize.py").read_text(encoding="utf-8")
    assert f'_GATE = "{launch.GATE_ENV}"' in boot
    assert f'os.environ["{launch.SETTINGS_ENV}"] = data.decode()' in boot
    assert launch.SETTINGS_ENV == config.ENV


def test_a_traced_process_that_never_imports_torch_loads_nothing_of_distviz(
        tmp_path: Path) -> None:
    """The bootstrap waits for the process's first ``import torch`` (``_OnTorch``) before it
    loads distviz's hooks: ``multiprocessing``'s resource tracker, or a tool the program runs,
    starts as a bare interpreter does."""
    settings = TraceConfig(out_dir=str(tmp_path / "out"), contexts="none").to_env()
    probe = ("import json, sys; print(json.dumps([sorted(m for m in sys.modules "
             "if m.split('.')[0] == 'distviz'), [type(f).__name__ for f in sys.meta_path]]))")
    proc = subprocess.run([PY, "-c", probe], env=launch.environment(settings),
                          capture_output=True, text=True, timeout=HANG_GUARD_S, check=True)
    ours, finders = json.loads(proc.stdout)
    assert ours == [] and finders[0] == "_OnTorch", proc.stdout + proc.stderr


def test_reconfigure_hands_new_settings_to_a_bootstrap_still_waiting_for_torch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pytest plugin's new settings reach a process whose bootstrap has not loaded the
    hooks yet: its finder gives way to the hooks' own, with those settings."""
    from distviz.tracing.hooks import inject

    boot = (Path(launch.BOOT) / "sitecustomize.py").read_text(encoding="utf-8")
    assert f"\nclass {inject.BOOT_FINDER}:" in boot      # the name ``reconfigure`` looks for

    class _OnTorch:
        def find_spec(self, *args: object) -> None:
            return None

    monkeypatch.setattr(sys, "meta_path", [_OnTorch(), *sys.meta_path])
    config = TraceConfig(out_dir=str(tmp_path / "out"), contexts="all")
    assert inject.reconfigure(config)
    hook = sys.meta_path[0]
    assert isinstance(hook, inject._AfterTorch) and hook.config is config
    assert not any(type(f).__name__ == "_OnTorch" for f in sys.meta_path)


def _probe_at_first_line(out: Path) -> str:
    """A program that writes, at its first line, the distviz modules loaded and the first
    finder on ``sys.meta_path``."""
    return ("import json, sys; "
            f"open({str(out)!r}, 'w').write(json.dumps([sorted(m for m in sys.modules "
            "if m.split('.')[0] == 'distviz'), type(sys.meta_path[0]).__name__]))")


@pytest.mark.parametrize("wait_s", [0.0, 1.5])
def test_a_program_started_early_preloads_only_while_its_gate_is_closed(
        tmp_path: Path, wait_s: float) -> None:
    """The gate's wait is used to import the hooks' torch-free modules (``inject.PRELOAD``),
    never past its opening: released at once, the program's first line finds nothing of
    distviz loaded but the bootstrap's finder; released late, the preloaded modules. Either
    way the hooks themselves wait for ``import torch`` (``_OnTorch``)."""
    from distviz.tracing.hooks import inject

    out = tmp_path / "probe.json"
    settings = TraceConfig(out_dir=str(tmp_path / "out"), contexts="none").to_env()
    gated = _gated(tmp_path, _probe_at_first_line(out))
    time.sleep(wait_s)
    assert gated.release(settings).wait(HANG_GUARD_S) == 0
    ours, first = json.loads(out.read_text())
    assert first == inject.BOOT_FINDER
    assert "distviz.tracing.hooks.patches" not in ours      # nothing that needs torch
    if wait_s:
        assert set(inject.PRELOAD) <= set(ours), ours
    else:   # the gate was open (or opened) before the interpreter reached it
        assert not set(inject.PRELOAD) <= set(ours), ours
