"""One kind of recording: every run's result is a ``Recording``, and ``distviz run`` and
``distviz replay`` end the same way for it.

A plain scenario's run is a recording of one context without training: saved as the version 1
trace it always was, shown as a trace, and judged by the one verdict as its trace is. A run
that failed saves what it recorded and names the file in its error, in the words each form
has always used. The pure tests build the run's result from a trace recorded by a real run
(``tests/traces/pipeline.json``); the ``rpc`` test runs the scenario."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from builders.run_end import _json_of_show_run, save_run
from conftest import ROOT, SCENARIOS
from typer.testing import CliRunner

from distviz.cli import app
from distviz.errors import RunError
from distviz.judge.verdict import judge
from distviz.replay import replay
from distviz.runner.supervisor.run import RunResult
from distviz.scenario import Scenario, load_scenario
from distviz.trace import SCHEMA_VERSION, load
from distviz.trace.contexts_file import RECORDING_VERSION, Recording, load_recording

PIPELINE = ROOT / "tests" / "traces" / "pipeline.json"


def _plain() -> Scenario:
    return load_scenario(str(SCENARIOS / "pipeline.yaml"))


def test_a_plain_run_is_saved_as_the_version_1_trace_it_records(tmp_path: Path) -> None:
    trace = load(PIPELINE)
    out = tmp_path / "run.trace.json"
    saved = save_run(_plain(), RunResult(recording=Recording.single(trace)), "fast", out)
    assert saved.single_trace is trace
    on_disk = json.loads(out.read_text(encoding="utf-8"))
    assert on_disk["schema_version"] == SCHEMA_VERSION and "contexts" not in on_disk
    assert on_disk["meta"]["mode"] == "fast"      # the run's meta, in its one trace
    assert out.read_text(encoding="utf-8") == trace.dumps()


def test_a_plain_run_reports_and_exits_as_replay_of_its_file(tmp_path: Path) -> None:
    """``run --json`` of a one-context recording and ``replay --json`` of the file it saved
    give the same report and the same exit code, the verdict's."""
    trace = load(PIPELINE)
    out = tmp_path / "run.trace.json"
    recording = save_run(_plain(), RunResult(recording=Recording.single(trace)), "fast", out)
    from_run, code = _json_of_show_run(recording, out)
    replayed = CliRunner().invoke(app, ["replay", str(out), "--json"])
    assert json.loads(replayed.stdout) == from_run
    expected = judge(trace, replay(trace))
    assert code == replayed.exit_code == expected.exit_code
    assert from_run["verdict"] == expected.to_json()


def test_a_plain_run_that_failed_before_recording_saves_the_scenario_and_the_error(
        tmp_path: Path) -> None:
    out = tmp_path / "failed.trace.json"
    sc = _plain()
    with pytest.raises(RunError) as caught:
        save_run(sc, RunResult(error=RunError("worker1 died during start-up")), "fast", out)
    assert caught.value.message == (f"worker1 died during start-up (partial trace saved to "
                                    f"{out})")
    saved = load(out)
    assert saved.nodes == [] and saved.workers == list(sc.workers)
    assert saved.real is not None and saved.real.outcome == "error"
    assert saved.scenario is not None and saved.scenario.name == sc.name
    result = CliRunner().invoke(app, ["replay", str(out)])
    assert "no graph to replay" in result.stdout


def test_a_training_run_that_failed_names_the_contexts_it_saved(tmp_path: Path) -> None:
    first, second = load(PIPELINE), load(PIPELINE)
    recording = Recording(contexts=[first, second], iterations=[None, None],
                          workers=list(first.workers))
    out = tmp_path / "partial.json"
    sc = load_scenario(str(SCENARIOS / "seed_training.yaml"))
    with pytest.raises(RunError) as caught:
        save_run(sc, RunResult(recording=recording, error=RunError("trainer failed")), "fast",
                 out)
    assert caught.value.message == f"trainer failed (the 2 contexts recorded before were saved " \
                                   f"to {out})"
    assert json.loads(out.read_text(encoding="utf-8"))["schema_version"] == RECORDING_VERSION
    assert len(load_recording(out).contexts) == 2


def test_a_training_run_that_recorded_nothing_saves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "nothing.json"
    sc = load_scenario(str(SCENARIOS / "seed_training.yaml"))
    with pytest.raises(RunError) as caught:
        save_run(sc, RunResult(error=RunError("trainer failed")), "fast", out)
    assert caught.value.message == "trainer failed" and not out.exists()
    with pytest.raises(RunError, match="no context was recorded"):
        save_run(sc, RunResult(), "fast", out)


def test_a_recording_of_one_context_is_one_trace_only_without_training() -> None:
    trace = load(PIPELINE)
    assert Recording.single(trace).single_trace is trace
    two = Recording(contexts=[trace, load(PIPELINE)], iterations=[None, None],
                    workers=list(trace.workers))
    assert two.single_trace is None
    assert Recording(contexts=[], iterations=[], workers=[]).single_trace is None


def test_run_of_a_plain_scenario_refuses_another_context_before_starting_workers() -> None:
    result = CliRunner().invoke(app, ["run", str(SCENARIOS / "pipeline.yaml"), "--context", "2"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "error: --context 2: pipeline has a backward: key and records one context, context 1"]
