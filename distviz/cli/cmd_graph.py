"""``distviz graph TRACE``: each worker's graph as a tree in the terminal."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from distviz.cli.app import app, guard, unbounded_console
from distviz.cli.options import (
    TRACE_HELP,
    ContextOpt,
)
from distviz.cli.output import (
    load_trace,
)


@app.command()
@guard
def graph(
    trace_file: Annotated[Path, typer.Argument(help=TRACE_HELP)],
    max_nodes: Annotated[int, typer.Option("--max-nodes", help="Above this, show a summary.")] = 200,
    context: ContextOpt = None,
) -> None:
    """Show each worker's graph as a tree with dependency counts and send/recv pairs.

    Example:

      distviz graph design-note.trace.json
    """
    from distviz.render import tree
    trace = load_trace(trace_file, context)
    unbounded_console().print(tree.render_graph(trace, max_nodes=max_nodes))
