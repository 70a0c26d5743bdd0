"""Limits and their options: sizes as written on the command line, the checks of the run
options, and how a worker's out-of-memory error is told. Pure: no torch, no workers."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from typer.testing import CliRunner

from distviz import limits
from distviz.cli import app
from distviz.limits import format_size, parse_size
from distviz.runner.worker.main import out_of_memory
from distviz.torch_errors import classify

ROOT = Path(__file__).resolve().parents[3]
DESIGN_NOTE = str(ROOT / "scenarios" / "design_note.yaml")


@pytest.mark.parametrize("text,size", [
    ("4G", 4 * 2**30), ("4GiB", 4 * 2**30), ("4gb", 4 * 2**30), ("512M", 512 * 2**20),
    ("1.5G", 3 * 2**29), ("1073741824", 2**30), ("2T", 2 * 2**40), (" 64k ", 64 * 1024),
])
def test_sizes_read_with_binary_units(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "G", "lots", "-1G", "0", "nan", "inf", "4X"])
def test_a_size_that_is_not_one_says_what_is_expected(text: str) -> None:
    with pytest.raises(ValueError, match="expected"):
        parse_size(text)


def test_sizes_are_shown_in_the_largest_whole_unit() -> None:
    assert format_size(4 * 2**30) == "4 GiB"
    assert format_size(3 * 2**29) == "1.5 GiB"
    assert format_size(40_000_000_000) == "37.3 GiB"
    assert format_size(512 * 2**20) == "512 MiB"
    assert format_size(100) == "100 bytes"


def test_the_default_memory_limit_is_above_the_minimum_and_shown_in_help() -> None:
    assert limits.DEFAULT_MAX_MEMORY > limits.MIN_MAX_MEMORY
    result = CliRunner().invoke(app, ["run", "--help"], env={"NO_COLOR": "1", "COLUMNS": "200"})
    assert "[default: 4GiB]" in result.output
    assert f"[default: {limits.DEFAULT_MAX_RPC_DEPTH}]" in result.output


def test_more_rpc_depth_gets_more_rpc_threads() -> None:
    assert limits.rpc_threads(limits.DEFAULT_MAX_RPC_DEPTH) == limits.RPC_THREADS
    assert limits.rpc_threads(40) == 40 + limits.RPC_SPARE_THREADS


@pytest.mark.parametrize("args,message", [
    (["--max-memory", "100M"], "--max-memory 100M: a worker needs at least 1 GiB"),
    (["--max-memory", "lots"], "--max-memory lots: expected a size like 4G"),
    (["--max-rpc-depth", "0"], "--max-rpc-depth 0: expected a positive number"),
])
def test_bad_limit_options_are_usage_errors_before_any_worker_starts(
        args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["run", DESIGN_NOTE, *args])
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_an_allocator_failure_says_how_much_was_asked_and_the_limit() -> None:
    msg = out_of_memory(classify(RuntimeError(
        "DefaultCPUAllocator: can't allocate memory: you tried to allocate 40000000000 bytes. "
        "Error code 12 (Cannot allocate memory)")), 2**30)
    assert msg == ("out of memory: an operation asked for 37.3 GiB; each worker may use 1 GiB "
                   "(raise the limit with --max-memory)")


def test_a_python_memory_error_is_out_of_memory_even_when_torch_wraps_it() -> None:
    for error in (MemoryError(), RuntimeError("MemoryError()")):
        msg = out_of_memory(classify(error), 4 * 2**30)
        assert msg is not None and "Python raised MemoryError" in msg and "4 GiB" in msg


def test_other_errors_are_not_out_of_memory() -> None:
    assert out_of_memory(classify(RuntimeError("mat1 and mat2 shapes cannot be multiplied")),
                         2**30) is None


def test_a_remote_error_names_the_innermost_worker() -> None:
    # worker0 -> worker1 -> worker2, which raised: torch names each hop, the innermost last
    text = ("On WorkerInfo(id=1, name=worker1):\nRuntimeError('On WorkerInfo(id=2, "
            "name=worker2):\nRuntimeError(\"boom\")\nTraceback ...')\nTraceback ...\n"
            "RuntimeError: On WorkerInfo(id=2, name=worker2):\nRuntimeError('boom')\n")
    assert classify(RuntimeError(text)).worker == "worker2"
    assert classify(RuntimeError("plain")).worker is None


def test_a_worker_status_is_never_mistaken_for_an_exit_code() -> None:
    statuses = {int(s) for s in limits.WorkerStatus if s is not limits.WorkerStatus.DONE}
    assert statuses and statuses.isdisjoint(int(c) for c in limits.ExitCode)
    assert limits.WorkerStatus.DONE == 0 and limits.WorkerStatus.CRASHED == 17  # the trace's


_EXITS = {"_exit", "exit", "Exit", "SystemExit"}


def _literal_exits(tree: ast.AST) -> list[int]:
    """Lines that end a process with a number written out, or give an ``exit_code`` field the
    type ``int``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else \
                getattr(node.func, "id", "")
            args = [*node.args, *(k.value for k in node.keywords if k.arg == "code")]
            if name in _EXITS and any(isinstance(a, ast.Constant) and isinstance(a.value, int)
                                      for a in args):
                found.append(node.lineno)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and \
                node.target.id == "exit_code" and ast.unparse(node.annotation) == "int":
            found.append(node.lineno)
    return sorted(found)


def test_no_literal_exit_code_and_no_int_exit_code_field() -> None:
    found = [f"{path.relative_to(ROOT)}:{line}" for path in sorted((ROOT / "distviz").rglob("*.py"))
             for line in _literal_exits(ast.parse(path.read_text(encoding="utf-8")))]
    assert found == []
    # the check finds what it looks for
    assert _literal_exits(ast.parse("os._exit(70)\nraise typer.Exit(code=1)\nexit_code: int = 0")) \
        == [1, 2, 3]
