"""What tests/pure/trace/test_recording.py and tests/e2e/test_recording_browser.py share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import replay_fixtures as F
from typer.testing import CliRunner

from distviz.cli import app
from distviz.trace.contexts_file import Recording
from distviz.trace.iteration import Iteration, OptimizerStep, ParamUpdate, TrainingSummary


def _iteration(trainer: str, index: int) -> Iteration:
    return Iteration(trainer=trainer, index=index, context_id=index, loss=(1.5 / index,),
                     steps=(OptimizerStep("SGD", (ParamUpdate("worker1", "w", 0.25),)),),
                     enter_us=10.0 * index, exit_us=10.0 * index + 5)


def _recording() -> Recording:
    traces = [F.design_note(), F.nested()]
    traces[0].workers = list(traces[1].workers)   # a run's contexts share its workers
    return Recording(contexts=traces, iterations=[_iteration("worker0", 1),
                                                  _iteration("worker0", 2)],
                     workers=list(traces[0].workers),
                     training=TrainingSummary(trainers=("worker0",),
                                              schedule=(("worker0", 1), ("worker0", 2)),
                                              contexts_total=2))


def _invoke(*args: Any) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], env={"NO_COLOR": "1",
                                                                "COLUMNS": "120"})


def _html(tmp_path: Path) -> tuple[Path, Recording]:
    rec = _recording()
    path = rec.save(tmp_path / "r.json")
    out = tmp_path / "r.html"
    result = _invoke("export", path, "--format", "html", "-o", out)
    assert result.exit_code == 0 and "2 contexts" in result.output, result.output
    return out, rec
