"""The command line's own behaviour: --version, exit status 70 for a bug in distviz, user text
printed as it is (never read as markup), the same option names for the same meaning in every
command, usage lines and value errors in distviz's words, the program's output kept apart from
the spinner (pure but for one child process in a pseudo-terminal; no workers)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import replay_fixtures as F
from conftest import ROOT
from guards import HANG_GUARD_S
from typer.testing import CliRunner

import distviz
from distviz import limits
from distviz.cli import app
from distviz.cli.app import guard

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _trace(tmp_path: Path, name: str = "design_note") -> Path:
    path = tmp_path / f"{name}.json"
    getattr(F, name)().save(path)
    return path


def _distviz(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS="100", NO_COLOR="1")
    return subprocess.run([sys.executable, "-m", "distviz", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=HANG_GUARD_S)


# -- --version -----------------------------------------------------------------------------------

def test_version_prints_the_package_version_and_exits_0() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"distviz {distviz.__version__} (Python ")


def test_top_level_help_lists_version() -> None:
    assert "--version" in CliRunner().invoke(app, ["--help"]).output


# -- exit status 70: a bug in distviz, never 1 ---------------------------------------------------

def test_a_bug_in_distviz_exits_70_not_1_which_a_traced_program_owns() -> None:
    assert limits.EXIT_INTERNAL == 70 and 1 not in limits.EXIT_CODES

    @guard
    def broken() -> None:
        raise ZeroDivisionError("division by zero")
    import typer
    with pytest.raises(typer.Exit) as info:
        os.environ.pop("DISTVIZ_DEBUG", None)
        broken()
    assert info.value.exit_code == 70


# -- user text is never read as console markup --------------------------------------------------

def test_scenarios_keeps_square_brackets_of_descriptions() -> None:
    result = CliRunner().invoke(app, ["scenarios"], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert "dist_autograd.backward(context_id, [loss])" in result.output


def test_variable_names_in_brackets_print_as_they_are(tmp_path: Path) -> None:
    b = F.TraceBuilder(2)
    leaf = b.acc(0, "[w]")
    mul = b.op(0, "MulBackward0", 3, [leaf])
    b.backward([mul], root_vars=["[loss]"])
    path = tmp_path / "brackets.json"
    b.build().save(path)
    result = CliRunner().invoke(app, ["replay", str(path)])
    assert "calls backward on `[loss]`" in result.output, result.output
    assert "the gradient of [w]" in result.output
    graph = CliRunner().invoke(app, ["graph", str(path)], env={"COLUMNS": "200"})
    assert "[w]" in graph.output, graph.output


# -- one name for one meaning --------------------------------------------------------------------

def test_replay_takes_no_log_like_run(tmp_path: Path) -> None:
    path = _trace(tmp_path)
    quiet = CliRunner().invoke(app, ["replay", str(path), "--no-log"])
    assert quiet.exit_code == 0, quiet.output
    assert "step 0" not in quiet.output and "replay steps (--no-log)" in quiet.output
    assert "completes in 28 steps" in quiet.output
    loud = CliRunner().invoke(app, ["replay", str(path), "--log"])
    assert len(loud.output.splitlines()) > len(quiet.output.splitlines())
    said = [[line for line in r.output.splitlines()
             if line.startswith("agreement with the real run: ")] for r in (quiet, loud)]
    assert said[0] and said[0] == said[1]     # the same sentence, worded alike, with or without


def _options(command: str) -> set[str]:
    import typer.main
    click_cmd = typer.main.get_command(app)
    sub = click_cmd.commands[command]  # type: ignore[attr-defined]
    return {o for p in sub.params for o in (*p.opts, *p.secondary_opts) if o.startswith("--")}


def test_the_step_log_options_are_the_same_for_run_and_replay() -> None:
    log = {"--log", "--no-log", "--worker", "--from", "--to", "--step", "--json", "--mode",
           "--context"}
    assert log <= _options("run") and log <= _options("replay")


def test_options_shared_by_run_and_trace_have_one_name() -> None:
    shared = {"--output", "--contexts", "--hang-timeout", "--interop-threads"}
    assert shared <= _options("run") and shared <= _options("trace")


# -- usage lines and value errors ---------------------------------------------------------------

@pytest.mark.parametrize(("command", "usage"), [
    ("run", "Usage: distviz run [OPTIONS] SCENARIO"),
    ("check", "Usage: distviz check [OPTIONS] SCENARIO"),
    ("replay", "Usage: distviz replay [OPTIONS] TRACE_FILE"),
    ("export", "Usage: distviz export [OPTIONS] TRACE_FILE"),
    ("graph", "Usage: distviz graph [OPTIONS] TRACE_FILE"),
    ("trace", "Usage: distviz trace [OPTIONS] -- COMMAND..."),
])
def test_usage_lines_read_plainly(command: str, usage: str) -> None:
    out = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"},
                             prog_name="distviz").output
    first = out.strip().splitlines()[0]
    assert first == usage, first
    assert not re.search(r"[{}<>]", "\n".join(out.splitlines()[:3])), out


def test_a_missing_argument_names_it_plainly() -> None:
    result = _distviz("replay")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "error: missing TRACE_FILE: trace JSON written by distviz run or distviz trace; "
        "see distviz replay --help"]
    assert "{" not in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["run", "design_note", "--interop-threads", "zero"],
     "error: --interop-threads zero: expected a whole number, like 1"),
    (["run", "design_note", "--hang-timeout", "soon"],
     "error: --hang-timeout soon: expected a number, like 5 or 0.5"),
    (["export", "x.json", "--step", "last"],
     "error: --step last: expected a whole number, like 1"),
])
def test_a_wrong_value_is_one_line_in_distviz_words(args: list[str], message: str) -> None:
    result = _distviz(*args)
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == [message], result.stderr


def test_an_unknown_option_suggests_the_near_one() -> None:
    result = _distviz("replay", "x.json", "--no-logg")
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == ["error: no such option --no-logg (did you mean '--no-log'?); see distviz "
                     "replay --help"], result.stderr


@pytest.mark.parametrize(("option", "near"), [
    ("--contextz", " (did you mean '--contexts'?)"), ("--bogus", "")])
def test_an_unknown_option_of_trace_is_not_run_as_the_command(tmp_path: Path, option: str,
                                                              near: str) -> None:
    """``distviz trace`` keeps the words it does not know as the command's start: a mistyped
    option of its own is one line and exit 2, never ``command not found`` (127), and the
    program it was given (started early, behind the gate) never runs."""
    marker = tmp_path / "ran"
    result = _distviz("trace", option, "all", "--", sys.executable, "-c",
                      f"open({str(marker)!r}, 'w')", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == [f"error: no such option {option}{near}; see distviz trace --help"]
    assert not marker.exists()


def test_an_unknown_command_suggests_the_near_one() -> None:
    result = _distviz("replai", "x.json")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "error: no such command 'replai' (did you mean 'replay'?); see distviz --help"]


def test_help_shows_value_types_in_words() -> None:
    out = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "200"}).output
    assert "--interop-threads N " in out and "--hang-timeout NUMBER " in out
    assert not re.search(r"<(int|float|str|path)>", out), out


# -- the program's output and the spinner -------------------------------------------------------

SPINNER = textwrap.dedent("""\
    import subprocess, sys, time
    from distviz.cli.running import program_output_above
    with program_output_above() as console, console.status("recorded context 8") as status:
        time.sleep(0.3)
        # a worker writes to the descriptor it inherited, as a scenario's print does
        subprocess.run([sys.executable, "-c",
                        "import os, time\\n"
                        "for i in range(3):\\n"
                        "    os.write(2, f'Training epoch {i}\\\\n'.encode()); time.sleep(0.2)"])
        status.update("recorded context 9")
        time.sleep(0.3)
    print("done", file=sys.stderr)
""")


def test_program_output_never_runs_into_the_spinner_line(tmp_path: Path) -> None:
    import pty
    script = tmp_path / "spin.py"
    script.write_text(SPINNER)
    pid, fd = pty.fork()
    if pid == 0:  # the child: its standard error is the pseudo-terminal
        os.environ["COLUMNS"] = "80"
        os.environ.pop("NO_COLOR", None)
        os.execv(sys.executable, [sys.executable, str(script)])
    chunks: list[bytes] = []
    while True:
        try:
            data = os.read(fd, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.waitpid(pid, 0)
    text = b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")
    # what stays on each line of the screen: the text after its last carriage return
    lines = [ANSI.sub("", line.split("\r")[-1]) for line in text.split("\n")]
    epochs = [line for line in lines if "Training epoch" in line]
    assert len(epochs) == 3, text
    assert all(line.strip().startswith("Training epoch") for line in epochs), epochs
    assert any("done" in line for line in lines), text


def test_scenarios_has_no_empty_row_after_a_long_description() -> None:
    result = CliRunner().invoke(app, ["scenarios"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert [n for n, line in enumerate(result.output.splitlines()) if not line.strip()] == []


@pytest.mark.parametrize("command", ["replay", "export", "graph"])
def test_trace_argument_help_names_every_way_a_trace_is_written(command: str) -> None:
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "distviz run or distviz trace" in result.output, result.output


def test_a_context_past_the_last_names_the_option_once(tmp_path: Path) -> None:
    b = F.TraceBuilder(2)
    b.backward([b.op(0, "MulBackward0", 3, [b.acc(0, "w")])])
    path = tmp_path / "one.json"
    b.build().save(path)
    result = _distviz("replay", str(path), "--context", "2")
    assert result.returncode == 2
    assert result.stderr.splitlines() == ["error: --context 2: the recording holds only context 1"]
