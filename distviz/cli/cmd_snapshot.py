"""``distviz snapshot DIR``: what every process of a running ``distviz trace -o DIR`` job is
doing now (the work is in ``distviz.tracing.snapshot.client``; this module prints)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from distviz.cli.app import app, guard, stdout_console
from distviz.cli.options import Json


@app.command()
@guard
def snapshot(
    folder: Annotated[Path, typer.Argument(metavar="DIR", help="The -o folder of a running "
                                           "`distviz trace` (or `pytest --distviz=DIR`).")],
    json_out: Json = False,
) -> None:
    """Show what every process of a running traced job is doing now: its live contexts, their
    graphs so far and every thread's stack.

    Each process writes, under DIR/snapshots/<time>/, the Python stack of every thread and,
    for each dist autograd context it entered and has not left (a forward still open, or a
    backward in flight), the graph so far as a trace that distviz replay reads. It works while
    the program is blocked inside PyTorch (an rpc_sync, the backward, rpc.shutdown). A
    process that does not answer in time is named; the others are still shown.

    Example:

      distviz snapshot traces
    """
    from distviz.tracing.snapshot import client as snap

    taken = snap.take(folder)
    if json_out:
        report = {"job_pid": taken.job_pid, "folder": str(taken.folder),
                  "processes": [p.to_json() for p in taken.processes],
                  "silent": [{**asdict(s.listener), "why": s.why} for s in taken.silent]}
        print(json.dumps(report, indent=1))
        return
    out = stdout_console()
    for line in snap.report_lines(taken, folder):
        out.print(line, markup=False)
