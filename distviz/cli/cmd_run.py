"""``distviz run SCENARIO``: run a scenario on real RPC workers, record the graph, replay it and
compare with PyTorch (the run and its report: ``distviz.cli.running``)."""

from __future__ import annotations

from pathlib import Path

import typer

from distviz import limits
from distviz.cli.app import app, guard
from distviz.cli.options import (
    DEFAULT_MAX_MEMORY,
    ConfirmHang,
    ContextOpt,
    ContextsOpt,
    Dot,
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
    RunArgs,
    ScenarioArg,
    Sets,
    StartupTimeout,
    Step,
    Svg,
    ToOpt,
    TraceOut,
    Verbose,
    WorkerOpt,
    check_run_args,
    parse_sets,
)
from distviz.cli.output import (
    check_mode,
)
from distviz.cli.running import finish_run, run_with_progress


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
