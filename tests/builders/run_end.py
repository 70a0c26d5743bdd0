"""What tests/pure/cli/test_run_end.py and tests/e2e/test_run_end_rpc.py share."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

from distviz.cli.options import View
from distviz.cli.running import save_recording, show_run
from distviz.judge.policy import recording_of
from distviz.runner.supervisor.run import RunResult
from distviz.scenario import Scenario
from distviz.trace.contexts_file import Recording


def _view(as_json: bool) -> View:
    return View(as_json=as_json, step=False, log=None, worker=None, start=None, end=None,
                pictures={})


def save_run(sc: Scenario, result: RunResult, mode: str, out: Path) -> Recording:
    """What ``distviz run`` saves of ``result``: the library's recording of the run
    (``recording_of``), saved by the CLI (``save_recording``)."""
    return save_recording(recording_of(sc, result, mode), result.error, out, sc.path)


def _json_of_show_run(recording: Recording, path: Path) -> tuple[dict[str, object], int]:
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = show_run(recording, "fast", path, _view(as_json=True))
    return json.loads(buffer.getvalue()), code
