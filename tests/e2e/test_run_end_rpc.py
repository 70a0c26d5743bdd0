"""One kind of recording: a plain ``distviz run`` of a scenario on real RPC workers (the rest
is tests/pure/cli/test_run_end.py)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from builders.run_end import _json_of_show_run, save_run
from conftest import SCENARIOS, run_cached
from typer.testing import CliRunner

from distviz.cli import app
from distviz.scenario import load_scenario
from distviz.trace import SCHEMA_VERSION, Trace


@pytest.mark.rpc
def test_a_plain_scenarios_run_is_a_recording_of_one_context(tmp_path: Path) -> None:
    result = copy.deepcopy(run_cached("design_note"))   # save_run stamps the run's meta
    rec = result.recording
    assert result.error is None and rec is not None
    assert len(rec.contexts) == 1 and rec.iterations == [None] and rec.training is None
    assert rec.version == SCHEMA_VERSION and rec.single_trace is result.trace
    assert isinstance(result.trace, Trace) and result.trace.real is not None
    assert result.trace.scenario is not None and result.trace.scenario.name == "design-note"
    out = tmp_path / "design-note.trace.json"
    sc = load_scenario(str(SCENARIOS / "design_note.yaml"))
    recording = save_run(sc, result, "fast", out)
    from_run, code = _json_of_show_run(recording, out)
    replayed = CliRunner().invoke(app, ["replay", str(out), "--json"])
    assert json.loads(replayed.stdout) == from_run and code == replayed.exit_code == 0
