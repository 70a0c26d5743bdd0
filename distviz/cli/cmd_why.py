"""``distviz why TRACE NAME``: why a leaf gets a gradient or not (the work is in
``distviz.analyses.why``; the lines in ``distviz.render.why_lines``; this module prints)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from distviz.cli.app import app, guard, stdout_console
from distviz.cli.options import ContextOpt, Json
from distviz.cli.output import load_trace


@app.command()
@guard
def why(
    trace_file: Annotated[Path, typer.Argument(help="Trace JSON written by distviz run or "
                                               "distviz trace.")],
    name: Annotated[str, typer.Argument(help="The leaf: its variable or parameter name "
                                        "(ps.encoder.weight), or its AccumulateGrad node id.")],
    as_json: Json = False,
    context: ContextOpt = None,
) -> None:
    """Say why a leaf (a parameter) gets a gradient or not: the path from a root that brings
    it and the replay step where it is accumulated into the context, or where the path breaks
    (not reachable from the roots, an RPC result not used, an RPC under torch.no_grad(),
    requires_grad=False, not used with grad enabled, a Python backward that returned None).
    A parameter the run named without a gradient is answered with the program's line that
    cut its way to the loss (the cuts in the index.json beside the trace).

    Example:

      distviz why unused-result.trace.json t2
    """
    from distviz.analyses.cut_answers import RunCuts
    from distviz.analyses.why import why as answer_for
    from distviz.render.why_lines import why_lines

    answer = answer_for(load_trace(trace_file, context), name, cuts=RunCuts.read(trace_file))
    if as_json:
        print(json.dumps(answer.to_json(), indent=1))
        return
    out = stdout_console()
    for line in why_lines(answer, width=out.width if out.is_terminal else None):
        out.print(line, crop=False, overflow="ignore")
