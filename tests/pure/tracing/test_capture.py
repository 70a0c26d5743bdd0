"""The one capture pipeline's steps (``distviz.tracing.recording.capture``) on a real trace
and a real session folder: what a recorded context and a watched one write. Pure: no torch."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import replay_fixtures as F

from distviz.trace import load
from distviz.tracing.config import TEST_ENV, TraceConfig
from distviz.tracing.recording import capture
from distviz.tracing.shared import journal


def test_a_step_is_timed_into_its_key_and_adds_up() -> None:
    seconds: dict[str, float] = {}
    assert capture.timed(seconds, "record", lambda: 7) == 7
    capture.timed(seconds, "record", lambda: None)
    assert set(seconds) == {"record"} and 0 <= seconds["record"] < 1
    with pytest.raises(ValueError):
        capture.timed(seconds, "replay", lambda: int("x"))
    assert "replay" not in seconds


def test_a_context_goes_from_its_trace_to_a_claimed_file_and_a_journal_row(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TEST_ENV, "tests/test_x.py::test_y")
    config = TraceConfig(out_dir=str(tmp_path / "out"), session_dir=str(tmp_path / "session"))
    trace = F.design_note()
    seconds = {"record": 0.5}
    got = capture.capture(lambda: trace, seconds=seconds, file=capture.Claim(config, 3))
    rp, path = got.replay, got.path
    assert rp is not None and path is not None and got.error is None
    assert rp.outcome == "completed" and set(seconds) == {"record", "replay"}
    assert got.trace is trace and got.seconds is seconds and seconds["record"] >= 0.5
    assert path.name == f"tests_test_x.py_test_y.{trace.initiator}.ctx3.trace.json"
    assert not path.exists() or path.stat().st_size == 0    # claimed, not written
    assert capture.claim(config, trace.initiator, 3) != path     # never one file for two
    traced = capture.stamp(trace, 3, seconds, watched={"gradients": {}})
    assert list(traced) == ["pid", "argv", "context", "seconds", "watched", "test"]
    assert (traced["pid"], traced["argv"], traced["context"]) == (os.getpid(), sys.argv, 3)
    row = capture.row(trace, rp, path, 3, seconds)
    capture.save(config, trace, path, row, trace.initiator)
    saved = load(path)
    assert saved.meta.traced is not None
    assert saved.meta.traced["agreement"] == row.agreement_text
    assert list(saved.meta.traced)[-1] == "agreement"
    (event,) = journal.read(config.session_dir)
    assert event.kind == "context" and event.row is not None
    assert (event.row.file, event.row.index, event.test) == (str(path), 3,
                                                             "tests/test_x.py::test_y")
    assert json.loads(path.read_text())["meta"]["traced"]["test"] == "tests/test_x.py::test_y"


def test_a_snapshot_writes_its_trace_before_the_replay_that_raises(tmp_path: Path) -> None:
    trace = F.design_note()
    trace.passes[0].roots.append("worker1/nowhere")    # the replay refuses the root
    path = tmp_path / "snap.trace.json"
    got = capture.capture(lambda: trace, file=path, write_first=True, catch=True)
    assert got.replay is None and isinstance(got.error, Exception)
    assert got.path == path and json.loads(path.read_text())["passes"][0]["roots"][-1] == \
        "worker1/nowhere"     # written before the replay raised
    with pytest.raises(type(got.error)):
        capture.capture(lambda: trace)      # without catch, the replay's error is raised


def test_no_replay_where_the_caller_says_so_and_no_file_claimed_after_a_failed_replay(
        tmp_path: Path) -> None:
    config = TraceConfig(out_dir=str(tmp_path / "out"), session_dir=str(tmp_path / "session"))
    trace = F.design_note()
    seen: list[int] = []
    got = capture.capture(lambda: trace, replay=lambda t: seen.append(len(t.passes)) is not None,
                          file=capture.Claim(config, 1, "w9"))
    assert (got.replay, seen, set(got.seconds)) == (None, [1], {"record"})
    assert got.path is not None and got.path.name == "w9.ctx1.trace.json"
    broken = F.design_note()
    broken.passes[0].roots.append("worker1/nowhere")
    failed = capture.capture(lambda: broken, file=capture.Claim(config, 2), catch=True)
    assert failed.error is not None and failed.path is None
    with pytest.raises(KeyError):
        capture.capture(lambda: {}["x"])     # what the recording raises is raised
