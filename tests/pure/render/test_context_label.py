"""One name for one context everywhere: the number the user counts (``--context N``, the N of
``trainer.ctxN.trace.json``), with PyTorch's context id beside it where it helps, all from
``distviz.words.context_label`` (pure, milliseconds)."""

from __future__ import annotations

import json
from pathlib import Path

import replay_fixtures as F
from rich.console import Console
from typer.testing import CliRunner

from distviz.cli import app
from distviz.render.html.data import event_texts
from distviz.render.tree import render_summary
from distviz.replay import replay
from distviz.trace import loads
from distviz.trace.contexts_file import Recording, load_recording
from distviz.words import context_label

TRAINER_ID = 562949953421312 + 2     # PyTorch's id of rank 2's third context: (2 << 48) | 2


def test_context_label_puts_the_users_number_first() -> None:
    assert context_label(1, 562949953421312) == "context 1 (id 562949953421312)"
    assert context_label(3, 7, "trainer 3") == "context 3 (trainer 3, id 7)"
    assert context_label(2) == "context 2"


def _traced(number: int) -> str:
    """A trace file as ``distviz trace`` writes it for the initiator's context ``number``."""
    t = F.design_note()
    t.context_id = TRAINER_ID
    t.meta["traced"] = {"pid": 1, "argv": ["x.py"], "context": number, "seconds": {}}
    return t.dumps()


def test_the_step_log_of_a_traced_context_counts_like_its_file_name() -> None:
    t = loads(_traced(3))
    assert t.number == 3
    texts = event_texts(replay(t)).splitlines()
    assert f"in context 3 (id {TRAINER_ID})" in texts[0]
    assert not any(str(TRAINER_ID) in text for text in texts[1:])
    assert any("into context 3 " in text for text in texts)


def test_a_recording_numbers_its_contexts_as_context_n_does(tmp_path: Path) -> None:
    traces = [F.design_note(), F.design_note()]
    for i, t in enumerate(traces):
        t.context_id = TRAINER_ID + i
    recording = Recording(contexts=traces, iterations=[None, None],
                          workers=list(traces[0].workers))
    path = tmp_path / "r.json"
    recording.save(path)
    again = load_recording(path)
    assert [t.number for t in again.contexts] == [1, 2]
    assert again.label(1) == f"context 2 (id {TRAINER_ID + 1})"
    out = CliRunner().invoke(app, ["replay", str(path), "--context", "2"]).output
    assert f"in context 2 (id {TRAINER_ID + 1})" in out


def test_the_run_summary_and_the_step_log_say_the_same_context() -> None:
    t = F.design_note()      # a run's one context: number 1, PyTorch's id 0
    console = Console(width=200, color_system=None, record=True, file=open("/dev/null", "w"))
    console.print(render_summary(t))
    assert "· context 1 (id 0) ·" in console.export_text()
    assert "in context 1 (id 0)" in event_texts(replay(t)).splitlines()[0]


def test_the_html_data_carries_the_label_not_the_bare_id(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(_traced(2))
    html = tmp_path / "t.html"
    result = CliRunner().invoke(app, ["export", str(path), "--format", "html", "-o", str(html)])
    assert result.exit_code == 0, result.output
    text = html.read_text()
    assert f"in context 2 (id {TRAINER_ID})" in text
    assert f"context {TRAINER_ID}" not in text
    assert json.loads(path.read_text())["context_id"] == TRAINER_ID
