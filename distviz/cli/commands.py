"""The command bodies, registered on ``app`` in the order ``--help`` lists them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from distviz import limits
from distviz.cli.app import app, guard, stderr_console, stdout_console, unbounded_console
from distviz.cli.options import (
    DEFAULT_MAX_MEMORY,
    ConfirmHang,
    ContextOpt,
    ContextsOpt,
    DepthOpt,
    Dot,
    FocusOpt,
    ForwardTimeout,
    FromOpt,
    HangTimeout,
    Html,
    InjectDelay,
    InteropThreads,
    Json,
    Log,
    MaxMemory,
    MaxNumel,
    MaxRpcDepth,
    MaxSteps,
    ModeOption,
    NoBackward,
    NoReference,
    Perfetto,
    Png,
    RpcCallOpt,
    RunArgs,
    ScenarioArg,
    Sets,
    StartupTimeout,
    Step,
    Svg,
    ToOpt,
    TraceOut,
    Verbose,
    View,
    ViewOpt,
    ViewWorker,
    WhatIfOpt,
    WorkerOpt,
    check_export_flags,
    check_run_args,
    check_view_flags,
    parse_sets,
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
from distviz.cli.running import finish_run, run_with_progress
from distviz.errors import DistvizError, UsageError
from distviz.words import plural

TRACE_HELP = "Trace JSON written by distviz run or distviz trace."


@app.command()
@guard
def run(
    scenario: ScenarioArg,
    sets: Sets = None,
    output: TraceOut = None,
    as_json: Json = False,
    step: Step = False,
    mode: ModeOption = "fast",
    interop_threads: InteropThreads = 1,
    hang_timeout: HangTimeout = limits.HANG_TIMEOUT,
    confirm_hang: ConfirmHang = False,
    no_backward: NoBackward = False,
    no_reference: NoReference = False,
    startup_timeout: StartupTimeout = limits.STARTUP_TIMEOUT,
    forward_timeout: ForwardTimeout = limits.FORWARD_TIMEOUT,
    max_numel: MaxNumel = limits.DEFAULT_MAX_NUMEL,
    max_steps: MaxSteps = limits.DEFAULT_MAX_STEPS,
    max_rpc_depth: MaxRpcDepth = limits.DEFAULT_MAX_RPC_DEPTH,
    max_memory: MaxMemory = DEFAULT_MAX_MEMORY,
    log: Log = None,
    worker: WorkerOpt = None,
    start: FromOpt = None,
    end: ToOpt = None,
    svg: Svg = None,
    png: Png = None,
    dot: Dot = None,
    html: Html = None,
    perfetto: Perfetto = None,
    verbose: Verbose = False,
    inject_delay: InjectDelay = None,
    contexts: ContextsOpt = "all",
    context: ContextOpt = None,
) -> None:
    """Run a scenario on real RPC workers, record the graph, replay it and compare with PyTorch.

    Example:

      distviz run pipeline --set micro=8 -o pipeline.trace.json
    """
    args = RunArgs(**locals())     # the parameters as one value, before any other name
    from distviz.runner.supervisor.torch_range import require_torch
    from distviz.scenario import load_scenario
    from distviz.scenario.shipped import resolve_scenario

    require_torch()
    args.data_on_stdout()     # a second output on standard output is refused before the run
    sc = load_scenario(str(resolve_scenario(str(scenario))), parse_sets(sets))
    opts = check_run_args(args, sc)
    judged = run_with_progress(sc, opts, check_mode(mode), quiet=as_json, verbose=verbose)
    out_path = output or Path(f"{sc.name}.trace.json")
    raise typer.Exit(finish_run(sc, judged, check_mode(mode), out_path, args.view(), context))


@app.command()
@guard
def check(
    scenario: ScenarioArg,
    sets: Sets = None,
) -> None:
    """Validate a scenario without starting any worker.

    Example:

      distviz check pipeline --set micro=200
    """
    from distviz.scenario import load_scenario
    from distviz.scenario.shipped import resolve_scenario
    sc = load_scenario(str(resolve_scenario(str(scenario))), parse_sets(sets))
    passes = (f"{plural(len(sc.mains), 'main')} calling dist_autograd.backward" if sc.training
              else plural(len(sc.passes), "backward pass", "backward passes"))
    stdout_console().print(f"{scenario}: ok ({sc.name}: {plural(len(sc.workers), 'worker')}, "
                           f"{passes})", markup=False)


@app.command()
@guard
def scenarios() -> None:
    """List the shipped scenarios; run one by name from any folder.

    Example:

      distviz scenarios
    """
    from rich.table import Table

    from distviz.scenario import load_scenario
    from distviz.scenario.shipped import scenario_dir, shipped_scenarios
    found = shipped_scenarios()
    if not found:
        raise UsageError(f"no shipped scenarios in {scenario_dir()}; reinstall distviz")
    table = Table(box=None, pad_edge=False)
    table.add_column("name", no_wrap=True)
    table.add_column("workers", justify="right", no_wrap=True)
    table.add_column("description", overflow="fold")
    for name, path in found.items():
        try:
            sc = load_scenario(str(path))
            table.add_row(name, str(len(sc.workers)), sc.description)
        except DistvizError as exc:
            table.add_row(name, "?", f"invalid: {exc.one_line()}")
    out = stdout_console()
    out.print(table)
    out.print(f"run one with: distviz run NAME (the files are in {scenario_dir()})",
              markup=False)


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
