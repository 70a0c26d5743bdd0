"""``distviz trace``'s summary at the end of a run: one line per context at any terminal
width, and for many contexts their timing as a median, the slowest and the outliers with their
critical path (pure, milliseconds)."""

from __future__ import annotations

import dataclasses

from rich.console import Console

from distviz.tracing.launcher import run_summary
from distviz.tracing.shared import journal

CHANGE = ("+6 nodes (+2 trainer/AddBackward0, +2 trainer/MulBackward0, +1 ps/AddmmBackward0, "
          "+1 ps/TBackward0)")


def _entry(k: int, backward_s: float | None = None, change: str = "same shape",
           initiator: str = "trainer") -> run_summary.Entry:
    seconds = {"record": 0.01, "replay": 0.001}
    time = None
    if backward_s is not None:
        seconds["backward"] = backward_s
        time = (f"backward {backward_s * 1000:.3g} ms (measured); critical path 9 nodes, 2 "
                f"messages: compute {k} ms on ps")
    row = journal.ContextRow(
        file=f"{initiator}.ctx{k}.trace.json", initiator=initiator, index=k,
        context_id=562949953421312 + k, pid=1, workers=[initiator, "ps"], nodes=20,
        messages=4, outcome="completed", predicted="completed", real="completed",
        agreement="agrees", time=time, seconds=seconds)
    return run_summary.Entry(row=row, change=change)


def _render(found: list[run_summary.Entry], width: int) -> list[str]:
    console = Console(width=width, color_system=None, record=True, file=open("/dev/null", "w"))
    console.print(run_summary.table(found))
    return [line for line in console.export_text().splitlines() if line.strip()]


def test_the_table_has_one_line_per_context_at_80_columns() -> None:
    found = [_entry(1, change="first recorded"), _entry(2, change=CHANGE), _entry(3, change="-1 nodes")]
    lines = _render(found, 80)
    assert len(lines) == 1 + len(found), "\n".join(lines)
    assert all(len(line) <= 80 for line in lines)
    assert lines[2].rstrip().endswith("…")     # cut to fit; index.json keeps it whole


def test_a_run_of_contexts_of_one_shape_and_one_result_is_one_line() -> None:
    found = [_entry(1, change="first recorded")] + [_entry(k) for k in range(2, 151)]
    found.append(_entry(151, change="+1 nodes (+1 ps/AddBackward0)"))
    found.append(_entry(152))
    lines = _render(found, 120)
    assert len(lines) == 3, "\n".join(lines)
    assert lines[1].split()[:2] == ["trainer", "1"]
    assert lines[1].rstrip().endswith("first recorded; contexts 2-150: the same")
    assert lines[2].split()[:2] == ["trainer", "151"]
    assert lines[2].rstrip().endswith("; context 152: the same")


def test_a_context_with_another_result_or_initiator_starts_a_new_line() -> None:
    other = _entry(3)
    other = run_summary.Entry(row=dataclasses.replace(other.row, agreement="not compared"),
                          change="same shape")
    found = [_entry(1, change="first recorded"), _entry(2), other, _entry(4),
             _entry(1, initiator="worker2", change="first recorded"),
             _entry(2, initiator="worker2")]
    lines = _render(found, 120)
    assert [line.split()[1] for line in lines[1:]] == ["1", "3", "4", "1"], lines
    assert lines[1].endswith("context 2: the same") and lines[2].rstrip().endswith("same shape")


def test_a_wide_console_shows_the_whole_change() -> None:
    lines = _render([_entry(1, change=CHANGE)], 400)
    assert CHANGE in lines[1]


def test_a_few_contexts_get_a_timing_line_each() -> None:
    found = [_entry(k, 0.002) for k in range(1, 4)]
    lines = run_summary.timing_lines(found)
    assert lines == [f"trainer context {k}: {found[k - 1].row.time}" for k in range(1, 4)]


def test_many_contexts_get_median_slowest_and_outliers_with_their_critical_path() -> None:
    found = [_entry(k, 0.002) for k in range(1, 51)]
    found[6] = _entry(7, 0.020)
    found[30] = _entry(31, 0.009)
    lines = run_summary.timing_lines(found)
    assert len(lines) == 3, lines
    assert lines[0] == ("backward time over 50 contexts: median 2 ms, slowest 20 ms (trainer "
                        "context 7); every context's critical path is in index.json")
    assert lines[1] == ("outlier trainer context 7 (10.0x the median): backward 20 ms "
                        "(measured); critical path 9 nodes, 2 messages: compute 7 ms on ps")
    assert lines[2].startswith("outlier trainer context 31 (4.5x the median): backward 9 ms")


def test_many_even_contexts_say_there_is_no_outlier() -> None:
    found = [_entry(k, 0.002 + k * 1e-6) for k in range(1, 21)]
    lines = run_summary.timing_lines(found)
    assert len(lines) == 2 and lines[1].startswith("no outliers")


def test_backward_calls_from_torchscript_are_counted_per_worker_and_test() -> None:
    from distviz.tracing.launcher.command import Finished
    from distviz.tracing.pytest_plugin import Findings

    def scripted(worker: str, test: str | None) -> journal.Event:
        return journal.Event(kind=journal.SCRIPTED, pid=1, worker=worker, test=test)
    events = [scripted("worker0", "t.py::a"), scripted("worker0", "t.py::a"),
              scripted("worker1", "t.py::b")]
    notes = run_summary.notes(Finished(0, False, False, 0, events), [])
    assert notes[:2] == [
        "worker0: 2 backward calls from TorchScript, not recorded (a scripted "
        "dist_autograd.backward runs PyTorch's op directly; counted once per context)",
        "worker1: 1 backward call from TorchScript, not recorded (a scripted "
        "dist_autograd.backward runs PyTorch's op directly; counted once per context)"]
    found = Findings.of(events)
    assert [n.split(" from")[0] for n in found.notes["t.py::a"]] == ["worker0: 2 backward calls"]
    assert [n.split(" from")[0] for n in found.notes["t.py::b"]] == ["worker1: 1 backward call"]


def test_what_the_summary_imports_is_loaded_while_the_program_runs() -> None:
    """The modules the end of ``distviz trace`` imports inside its functions (the summary, the
    cuts' notes, the contexts' table) are in ``command.AFTER_START``, loaded on a side thread
    while the program runs: imported at the end, they add to every traced run's wall time."""
    import ast
    import importlib.util
    from pathlib import Path

    from distviz.tracing.launcher import command

    ends = ("distviz.tracing.launcher.run_summary", "distviz.tracing.launcher.backward_counts",
            "distviz.tracing.shared.fold")
    late: set[str] = set()
    for name in ends:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None
        tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                late |= {node.module for node in ast.walk(fn)
                         if isinstance(node, ast.ImportFrom) and node.module}
    assert "distviz.cuts" in late, "the check must see the cuts' notes' import"
    assert late <= set(command.AFTER_START), sorted(late - set(command.AFTER_START))
