"""``distviz export TRACE``: a trace as a picture, an HTML step viewer, a Perfetto trace or a
graph file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from distviz.cli.app import app, guard, stderr_console, stdout_console
from distviz.cli.options import (
    TRACE_HELP,
    ContextOpt,
    DepthOpt,
    FocusOpt,
    ModeOption,
    RpcCallOpt,
    ViewOpt,
    ViewWorker,
    check_export_flags,
    check_view_flags,
    stdout_flags,
    view_spec,
)
from distviz.cli.output import (
    analysis_of,
    check_mode,
    load_trace,
    write_frames,
    write_pictures,
)
from distviz.errors import UsageError
from distviz.words import plural


@app.command()
@guard
def export(
    trace_file: Annotated[Path, typer.Argument(help=TRACE_HELP)],
    fmt: Annotated[str, typer.Option("--format", "-f", help="svg, png, dot, html, perfetto, graphml or gexf.")] = "svg",
    output: Annotated[Path | None, typer.Option("-o", "--output", help="File to write.")] = None,
    step: Annotated[int | None, typer.Option("--step", help="Draw the state after replay step N.")] = None,
    frames: Annotated[Path | None, typer.Option("--frames", help="Write one picture per step into this folder.")] = None,
    view: ViewOpt = None,
    worker: ViewWorker = None,
    rpc_call: RpcCallOpt = None,
    focus: FocusOpt = None,
    depth: DepthOpt = None,
    full: Annotated[bool, typer.Option("--full", help="Draw every node (--view full).")] = False,
    mode: ModeOption = "fast",
    context: ContextOpt = None,
) -> None:
    """Export a trace as a picture, an HTML step viewer, a Perfetto trace or a graph file
    (GraphML, GEXF: the whole graph, for networkx, Gephi or yEd). Pictures show the
    most detailed view that stays readable and say which one; --view, --worker, --rpc-call and
    --focus pick another (the HTML viewer starts on it).

    Example:

      distviz export pipeline.trace.json --format png --focus loss --depth 2
    """
    check_export_flags(fmt, step=step, frames=frames, output=output, full=full)
    check_view_flags(fmt, {"--view": view, "--worker": worker, "--rpc-call": rpc_call,
                           "--focus": focus, "--depth": depth})
    spec = view_spec(view, full, worker, rpc_call, focus, depth)
    if fmt == "html" and context is None and frames is None:
        from distviz.trace.contexts_file import load_recording
        recording = load_recording(trace_file)
        if len(recording.contexts) > 1:
            from distviz.cli.contexts_report import context_analyses, context_reports, write_html
            target = output or trace_file.with_suffix("").with_suffix(".html")
            reports = context_reports(recording, check_mode(mode))
            write_html(recording, context_analyses(recording, reports), target)
            stdout_console().print(f"wrote {target} ({len(recording.contexts)} contexts)",
                                   markup=False)
            return
    trace = load_trace(trace_file, context)
    found = analysis_of(trace, check_mode(mode))   # the replay, verdict and timing, made once
    rp = found.replay
    if step is not None and not (-1 <= step < len(rp.events)):
        raise UsageError(f"--step {step}: the replay has steps 0 to {len(rp.events) - 1}")
    if frames is not None:
        n = write_frames(found, fmt, frames, spec)
        stdout_console().print(f"wrote {plural(n, 'frame')} to {frames}", markup=False)
        return
    ext = {"perfetto": "json"}.get(fmt, fmt)
    target = output or trace_file.with_suffix("").with_suffix(f".{ext}")
    if fmt in ("graphml", "gexf"):   # the whole graph, with the first pass's replay
        from distviz.files import write_atomic
        from distviz.views.graph_nx import graph_file, trace_graph
        write_atomic(target, graph_file(trace_graph(trace, rp), fmt))
        to_stdout = bool(stdout_flags({"-o": target}))
        (stderr_console() if to_stdout else stdout_console()).print(
            f"wrote {fmt} to standard output" if to_stdout else f"wrote {target}", markup=False)
        return
    written = write_pictures(found, {fmt: target}, step=step, spec=spec)
    to_stdout = bool(stdout_flags({"-o": target}))
    say = stderr_console() if to_stdout else stdout_console()
    say.print(f"wrote {fmt} to standard output" if to_stdout else f"wrote {target}",
              markup=False)
    for line in written.lines:
        say.print(line, markup=False, crop=False, overflow="ignore")
    for line in written.warnings:
        stderr_console().print(f"warning: {line}", markup=False, crop=False, overflow="ignore")
