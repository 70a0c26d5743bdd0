"""``distviz replay TRACE``: replay a saved trace (no torch, no workers) and report as ``run``
does (``distviz.cli.contexts_report``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from distviz.cli.app import app, guard
from distviz.cli.options import (
    TRACE_HELP,
    ContextOpt,
    FromOpt,
    Json,
    Log,
    ModeOption,
    Step,
    ToOpt,
    View,
    WhatIfOpt,
    WorkerOpt,
)
from distviz.cli.output import (
    check_mode,
)


@app.command()
@guard
def replay(
    trace_file: Annotated[Path, typer.Argument(help=TRACE_HELP)],
    as_json: Json = False,
    step: Step = False,
    mode: ModeOption = "fast",
    worker: WorkerOpt = None,
    start: FromOpt = None,
    end: ToOpt = None,
    graph: Annotated[bool, typer.Option("--graph", help="Show each worker's graph as a tree first.")] = False,
    what_if: WhatIfOpt = None,
    context: ContextOpt = None,
    log: Log = None,
) -> None:
    """Replay a saved trace (no torch, no workers) and print the step log, then where the real
    backward spent its time (or, with --what-if, how long it would take with the changes).

    Example:

      distviz replay design-note.trace.json --worker worker1
    """
    from distviz.cli.contexts_report import replay_file
    from distviz.trace.contexts_file import load_recording
    view = View(as_json=as_json, step=step, log=log, worker=worker, start=start, end=end,
                pictures={})
    raise typer.Exit(replay_file(load_recording(trace_file), str(trace_file), check_mode(mode),
                                 view, context, graph, what_if))
