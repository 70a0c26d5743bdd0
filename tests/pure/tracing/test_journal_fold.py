"""The session's events folded once (``distviz.tracing.shared.fold``), as the summary of
``distviz trace`` and the pytest plugin read them. Pure: no torch."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any

import pytest

from distviz.tracing.launcher import run_summary
from distviz.tracing.pytest_plugin import OUTSIDE, Findings
from distviz.tracing.shared import live
from distviz.tracing.shared.fold import fold
from distviz.tracing.shared.journal import SCRIPTED, ContextRow, Event


def _row(file: str, initiator: str, index: int, outcome: str = "completed",
         test: str | None = None) -> ContextRow:
    return ContextRow(file=file, initiator=initiator, index=index, context_id=index, pid=1,
                      workers=[initiator], nodes=3, messages=0, passes=1, outcome=outcome,
                      predicted=outcome, real=outcome, agreement="agrees", agreement_text="",
                      exit_code=0, category="agrees", violations=0, explanation=None,
                      shape={}, test=test)


EVENTS = [
    Event("context", 1, row=_row("b.trace.json", "trainer", 2, test="t::b"), test="t::b"),
    Event("context", 1, row=_row("a.trace.json", "trainer", 1, "hang", "t::a"), test="t::a"),
    Event("not_recorded", 1, "backward was not recorded", worker="w0", test="t::a"),
    Event("context", 1, row=_row("a.trace.json", "trainer", 1, test="t::a"), test="t::a"),  # the last wins
    Event(SCRIPTED, 1, worker="w1", test="t::b"),
    Event("rpc_failed", 2, "port taken", worker="w2"),
    Event("stop", 1, "a hang"),
]


def test_the_last_row_of_each_file_by_initiator_and_number_and_the_notes_in_order() -> None:
    folded = fold(EVENTS)
    assert [(r.file, r.outcome) for r in folded.rows] == [("a.trace.json", "completed"),
                                                           ("b.trace.json", "completed")]
    assert [(n.test, n.text.split(" (")[0]) for n in folded.notes] == [
        ("t::a", "w0: backward was not recorded"),
        (None, "w2: rpc.init_rpc failed: port taken"),
        (None, "distviz stopped the program: a hang"),
        ("t::b", "w1: 1 backward call from TorchScript, not recorded")]


def test_the_summary_and_the_plugin_read_the_same_fold() -> None:
    assert [e.row.file for e in run_summary.entries(EVENTS)] == ["a.trace.json", "b.trace.json"]
    found = Findings.of(EVENTS)
    assert {t: [r.file for r in rows] for t, rows in found.rows.items()} == {
        "t::a": ["a.trace.json"], "t::b": ["b.trace.json"]}
    assert found.notes[OUTSIDE] == ["w2: rpc.init_rpc failed: port taken"]
    assert found.notes["t::a"] == ["w0: backward was not recorded"]


class _CountingFile(io.FileIO):
    """A real file whose ``write`` calls are counted: each is one system call, as for
    Python's own standard error (a text layer that writes through to the file)."""

    writes: list[bytes]

    def write(self, data: Any) -> int:
        self.writes.append(bytes(data))
        return super().write(data)


def test_what_a_process_says_live_is_one_write_so_two_processes_never_cut_each_others_lines(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the stream Python makes for a piped standard error: no buffer, written through
    raw = _CountingFile(tmp_path / "stderr", "w")
    raw.writes = []
    stream = io.TextIOWrapper(raw, encoding="utf-8", line_buffering=False, write_through=True)
    monkeypatch.setattr(sys, "__stderr__", stream)
    live.say("context 7 may hang\nworkers: worker0, worker1")
    live.say("")
    assert raw.writes == [b"distviz: context 7 may hang\ndistviz: workers: worker0, worker1\n"]
    stream.close()
