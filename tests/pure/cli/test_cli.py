"""The command-line shell: the JSON report, the step-through through the real CLI in a terminal,
colour and pipes, usage errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import replay_fixtures as F
from builders.pane import Pane
from conftest import ROOT
from guards import HANG_GUARD_S
from typer.testing import CliRunner

from distviz.cli import app


def _trace(tmp_path: Path, name: str = "design_note") -> Path:
    path = tmp_path / f"{name}.json"
    getattr(F, name)().save(path)
    return path


def test_replay_json_report_has_the_documented_fields(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["replay", str(_trace(tmp_path)), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["replay"]["outcome"] == "completed"
    assert report["real"]["outcome"] == "skipped"
    steps = report["replay"]["steps"]
    assert [s["step"] for s in steps] == list(range(len(steps)))
    for s in steps:
        assert {"step", "worker", "action"} <= set(s)
        if s["action"] in ("execute", "accumulate"):
            assert "node" in s
        if s["action"] in ("send_gradient", "receive_gradient"):
            assert {"msg_id", "context_id", "from", "to"} <= set(s["message"])
    assert set(report["agreement"]) >= {"outcome", "order", "executed", "gradients"}


def test_hang_json_report_names_the_blocked_send(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["replay", str(_trace(tmp_path, "unused_rpc_result")),
                                      "--json"])
    assert result.exit_code == 6
    report = json.loads(result.output)
    hang = report["replay"]["hang"]
    assert report["replay"]["outcome"] == "hang"
    assert hang["blocked_sends"] and hang["blocked_sends"][0]["msg_id"] is not None
    assert hang["blocked_workers"] and hang["fixes"]


def test_smart_mode_completes_where_fast_hangs(tmp_path: Path) -> None:
    path = _trace(tmp_path, "unused_rpc_result")
    runner = CliRunner()
    assert runner.invoke(app, ["replay", str(path)]).exit_code == 6
    result = runner.invoke(app, ["replay", str(path), "--mode", "smart", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    smart = report["agreement"]["smart"]
    assert smart["fast_outcome"] == "hang" and smart["smart_outcome"] == "completed"
    assert smart["excluded"]


def test_piped_log_has_no_control_codes_and_respects_filters(tmp_path: Path) -> None:
    path = _trace(tmp_path)
    out = subprocess.run([sys.executable, "-m", "distviz", "replay", str(path), "--worker",
                          "worker1", "--from", "5", "--to", "20"], capture_output=True,
                         text=True, cwd=ROOT, timeout=HANG_GUARD_S, env={**os.environ, "TERM": "xterm"})
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stdout
    steps = [ln.split()[:2] for ln in out.stdout.splitlines() if ln[:5].strip().isdigit()]
    assert steps and all(w == "worker1" and 5 <= int(n) <= 20 for n, w in steps)


def test_unknown_worker_filter_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["replay", str(_trace(tmp_path)), "--worker", "wroker1"])
    assert result.exit_code == 2
    assert "did you mean 'worker1'" in result.output


def test_export_conflicting_options_are_named(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["export", str(_trace(tmp_path)), "--format", "html",
                                      "--frames", str(tmp_path / "f")])
    assert result.exit_code == 2 and "--frames cannot be used with --format html" in result.output


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_cli_step_through_in_a_terminal(tmp_path: Path) -> None:
    path = _trace(tmp_path)
    pane = Pane(f"{sys.executable} -m distviz replay {path} --step; sleep 30")
    try:
        pane.wait_for(r"\bstep 0/27 ")
        pane.send("n", "n", "n")
        pane.wait_for(r"\bstep 3/27 ")
        pane.send("p")
        screen = pane.wait_for(r"\bstep 2/27 ")
        assert "SumBackward0" in screen
        pane.send("G")
        pane.wait_for(r"\bstep 27/27 ")
        pane.send("q")
        pane.wait_for(r"stopped at step 27/27")
    finally:
        pane.close()


def test_the_pure_side_never_imports_torch(tmp_path: Path) -> None:
    # replay, log, graph, DOT, HTML and Perfetto of a saved trace run without torch
    path = _trace(tmp_path)
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from distviz.cli import app\n"
        "r = CliRunner()\n"
        f"for args in (['replay', {str(path)!r}], ['replay', {str(path)!r}, '--json'],\n"
        f"             ['graph', {str(path)!r}],\n"
        f"             ['export', {str(path)!r}, '--format', 'dot', '-o', {str(tmp_path / 'g.dot')!r}],\n"
        f"             ['export', {str(path)!r}, '--format', 'perfetto', '-o', {str(tmp_path / 'p.json')!r}]):\n"
        "    res = r.invoke(app, args)\n"
        "    assert res.exit_code == 0, (args, res.output)\n"
        "import distviz.render.html.page, distviz.render.stepper, distviz.judge.agreement\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=HANG_GUARD_S)
    assert out.returncode == 0, out.stderr


def test_unwritable_output_is_a_clear_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["export", str(_trace(tmp_path)), "--format", "dot", "-o",
                                      "/proc/no-such-dir/x.dot"])
    assert result.exit_code == 2
    assert "check the path and its permissions" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("flag", ["--hang-timeout", "--timeout", "--max-steps"])
def test_non_positive_limits_are_refused_before_anything_runs(flag: str) -> None:
    value = "0" if flag == "--max-steps" else "-1"
    result = CliRunner().invoke(app, ["run", str(ROOT / "scenarios" / "design_note.yaml"),
                                      flag, value])
    assert result.exit_code == 2 and "expected a positive number" in result.output


def test_trace_parent_loads_no_replay_when_nothing_happened(tmp_path: Path) -> None:
    """``distviz trace``'s parent imports the replay only for a context that needs it: the
    summary of a run where nothing was recorded (its exit code, the backward counts) is light."""
    code = (   # the parent ends with os._exit (``QUICK_EXIT``): the report goes just before
        "import os, sys\n"
        "end = os._exit\n"
        "def report(code):\n"
        "    print('LOADED', sorted(m for m in sys.modules\n"
        "          if m.startswith(('distviz.replay', 'distviz.judge', 'distviz.analyses',\n"
        "                           'torch'))), flush=True)\n"
        "    end(code)\n"
        "os._exit = report\n"
        "from distviz.cli import main\n"
        f"sys.argv = ['distviz', 'trace', '-o', {str(tmp_path / 'out')!r}, '--', '/bin/true']\n"
        "main()\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=HANG_GUARD_S)
    assert out.returncode == 0, out.stderr
    assert "no context was recorded" in out.stdout
    assert out.stdout.strip().splitlines()[-1] == "LOADED []", out.stdout
