"""The options of every command as ``Annotated`` types (defaults from ``distviz.limits``), and
the checks of option values: each problem a ``UsageError`` naming the flags."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from distviz import limits
from distviz.errors import UsageError

Sets = Annotated[list[str] | None, typer.Option("--set", help="Override a param: NAME=VALUE.")]
ModeOption = Annotated[str, typer.Option("--mode", help="fast (PyTorch's algorithm) or smart (the RFC's proposal).")]
Json = Annotated[bool, typer.Option("--json", help="Print one JSON report instead of text.")]
Step = Annotated[bool, typer.Option("--step", help="Step through the replay interactively.")]
WorkerOpt = Annotated[str | None, typer.Option("--worker", help="Only events of this worker.")]
FromOpt = Annotated[int | None, typer.Option("--from", help="First step to print.")]
ToOpt = Annotated[int | None, typer.Option("--to", help="Last step to print.")]

# -- the views of `export` (see distviz.views) ---------------------------------------------------
ViewOpt = Annotated[str | None, typer.Option("--view", help="summary (workers only), calls (one box per RPC call), folded (chains of ops folded) or full (every node); default: the most detailed one that stays readable.")]
ViewWorker = Annotated[str | None, typer.Option("--worker", help="Show one worker's nodes.")]
RpcCallOpt = Annotated[int | None, typer.Option("--rpc-call", help="Show one RPC call's nodes (N counts the program's RPC calls from 0).")]
FocusOpt = Annotated[str | None, typer.Option("--focus", help="Show the nodes around a node id or variable (t4, loss).")]
DepthOpt = Annotated[int | None, typer.Option("--depth", help="How many edges around --focus (default 2).")]

# -- the options of `run` (defaults from distviz.limits) ----------------------------------------
ScenarioArg = Annotated[Path, typer.Argument(
    metavar="SCENARIO", help="Scenario YAML file, or the name of a shipped scenario (distviz scenarios).")]
TraceOut = Annotated[Path | None, typer.Option("-o", "--output", help="Trace file to write (default: <name>.trace.json).")]
InteropThreads = Annotated[int, typer.Option("--interop-threads", help="Inter-op threads per worker; 1 makes the order predictable.")]
HangTimeout = Annotated[float, typer.Option("--hang-timeout", help="Seconds before a real backward counts as hung.")]
ConfirmHang = Annotated[bool, typer.Option("--confirm-hang", help="Run the real backward even when a hang is predicted.")]
NoBackward = Annotated[bool, typer.Option("--no-backward", help="Record only; skip the real backward.")]
NoReference = Annotated[bool, typer.Option("--no-reference", help="Skip the single-process reference gradients.")]
StartupTimeout = Annotated[float, typer.Option("--startup-timeout", help="Seconds allowed for start-up.")]
ForwardTimeout = Annotated[float, typer.Option("--timeout", help="Seconds allowed for the forward pass.")]
MaxNumel = Annotated[int, typer.Option("--max-numel", help="Largest tensor a scenario may create.")]
MaxSteps = Annotated[int, typer.Option("--max-steps", help="Loop/function step budget per worker.")]
MaxRpcDepth = Annotated[int, typer.Option("--max-rpc-depth", help="How deep RPC calls of scenario functions may nest.")]
MaxMemory = Annotated[str, typer.Option("--max-memory", help="Memory limit per worker (heap, tensors), like 4G or 512M.")]
#: The help of the TRACE argument of replay, export and graph.
TRACE_HELP = "Trace JSON written by distviz run or distviz trace."
DEFAULT_MAX_MEMORY = limits.format_size(limits.DEFAULT_MAX_MEMORY).replace(" ", "")  # 4GiB
Log = Annotated[bool | None, typer.Option("--log/--no-log", help="Print the step log (default: when short).")]
Svg = Annotated[Path | None, typer.Option("--svg", help="Also write the graph as SVG.")]
Png = Annotated[Path | None, typer.Option("--png", help="Also write the graph as PNG.")]
Dot = Annotated[Path | None, typer.Option("--dot", help="Also write the graph as DOT.")]
Html = Annotated[Path | None, typer.Option("--html", help="Also write the HTML step viewer.")]
Perfetto = Annotated[Path | None, typer.Option("--perfetto", help="Also write a Perfetto/Chrome trace.")]
Verbose = Annotated[bool, typer.Option("--verbose", "-v", help="Print each phase of the run on stderr.")]
InjectDelay = Annotated[list[str] | None, typer.Option("--inject-delay", help="Slow the real backward down on purpose: recv=2ms (each RecvRpcBackward waits before it sends) or WORKER=3x (its nodes take 3 times as long).")]
ContextsOpt = Annotated[str, typer.Option("--contexts", help="Training scenarios: the contexts to record per trainer: all, first, N,M or every:K.")]
ContextOpt = Annotated[int | None, typer.Option("--context", help="A recording of several contexts: show context N (from 1).")]
WhatIfOpt = Annotated[str | None, typer.Option("--what-if", help="Predict the backward's wall time with changes: latency=5ms,bandwidth=1Gbit/s,slow=worker1:2x,recv=2ms.")]


# -- the options of `trace` ------------------------------------------------------------------------
TraceCommand = Annotated[list[str], typer.Argument(metavar="COMMAND...", show_default=False, help="The command to run, after --.")]
TraceDir = Annotated[Path, typer.Option("-o", "--output", help="Folder for the traces and index.json.")]
Contexts = Annotated[str, typer.Option("--contexts", help="Contexts to record in full per initiator: first, all, N,M, every:K or none; every other backward is watched (--hang-timeout).")]
MaxContexts = Annotated[int | None, typer.Option("--max-contexts", help="Record at most this many contexts in all.")]
OnHang = Annotated[str, typer.Option("--on-hang", help="stop the program when a hang is predicted or seen, or continue.")]
TraceStrict = Annotated[bool, typer.Option("--strict", help="Fail the run (exit status 9) when the program succeeds but a parameter got no gradient, an all-zero one, one left in .grad, or one a local optimizer never applied.")]
TraceInterop = Annotated[int | None, typer.Option("--interop-threads", help="Inter-op threads in every process; 1 makes the order exact.")]

@dataclass(frozen=True)
class View:
    """How to show a finished run: JSON or text, the step log, pictures to write."""

    as_json: bool
    step: bool
    log: bool | None
    worker: str | None
    start: int | None
    end: int | None
    pictures: dict[str, Path | None]
    report_to_stderr: bool = False  # a file goes to standard output


def parse_sets(values: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values or []:
        if "=" not in item:
            raise UsageError(f"--set {item}: expected NAME=VALUE, e.g. --set micro=200")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


@dataclass(frozen=True)
class RunArgs:
    """``distviz run``'s parameters as one value: typer reads them from the command's
    signature, the command's body reads this (``check_run_args``, ``view``)."""

    scenario: Path
    sets: list[str] | None
    output: Path | None
    as_json: bool
    step: bool
    mode: str
    interop_threads: int
    hang_timeout: float
    confirm_hang: bool
    no_backward: bool
    no_reference: bool
    startup_timeout: float
    forward_timeout: float
    max_numel: int
    max_steps: int
    max_rpc_depth: int
    max_memory: str
    log: bool | None
    worker: str | None
    start: int | None
    end: int | None
    svg: Path | None
    png: Path | None
    dot: Path | None
    html: Path | None
    perfetto: Path | None
    verbose: bool
    inject_delay: list[str] | None
    contexts: str
    context: int | None

    @property
    def pictures(self) -> dict[str, Path | None]:
        return {"svg": self.svg, "png": self.png, "dot": self.dot, "html": self.html,
                "perfetto": self.perfetto}

    def data_on_stdout(self) -> list[str]:
        """The outputs that go to standard output (which moves the text report to stderr)."""
        return stdout_flags({"-o": self.output, "--svg": self.svg, "--png": self.png,
                             "--dot": self.dot, "--html": self.html,
                             "--perfetto": self.perfetto}, self.as_json)

    def view(self) -> View:
        return View(as_json=self.as_json, step=self.step, log=self.log, worker=self.worker,
                    start=self.start, end=self.end, pictures=self.pictures,
                    report_to_stderr=bool(self.data_on_stdout()))


def check_run_args(args: RunArgs, sc: Any) -> Any:
    """The ``RunOptions`` of ``args`` for the scenario ``sc``, checked: ``UsageError`` for an
    option out of range or one that does not apply to ``sc`` (naming the flags)."""
    from distviz.analyses.changes import parse_inject_delay
    from distviz.outcome import Mode
    from distviz.runner.supervisor.run import RunOptions
    from distviz.selection import ContextSelection
    if args.mode not in tuple(Mode):
        raise UsageError(f"--mode {args.mode}: expected fast or smart")
    opts = RunOptions(interop_threads=args.interop_threads, hang_timeout=args.hang_timeout,
                      confirm_hang=args.confirm_hang, startup_timeout=args.startup_timeout,
                      forward_timeout=args.forward_timeout, max_numel=args.max_numel,
                      max_steps=args.max_steps, max_rpc_depth=args.max_rpc_depth,
                      max_memory=memory_size(args.max_memory),
                      run_backward=not args.no_backward, reference=not args.no_reference,
                      inject=parse_inject_delay(args.inject_delay or [], list(sc.workers)),
                      contexts=ContextSelection.parse(args.contexts).text())
    check_run_options(opts)
    if opts.contexts == "none":
        raise UsageError("--contexts none: distviz run records the contexts it runs; none is "
                         "for distviz trace, which then only watches every backward")
    check_steps(args.start, args.end, None)
    if sc.training:
        check_training_options(no_backward=args.no_backward, inject=bool(args.inject_delay),
                               context=args.context)
    elif args.contexts != "all":
        raise UsageError(f"--contexts {args.contexts}: {sc.name} has a backward: key and one "
                         "context; --contexts chooses among the contexts a training program "
                         "opens")
    elif args.context not in (None, 1):
        raise UsageError(f"--context {args.context}: {sc.name} has a backward: key and "
                         "records one context, context 1")
    return opts


def check_run_options(opts: Any) -> None:
    """``UsageError`` for a run option out of range."""
    if opts.interop_threads < 1:
        raise UsageError(f"--interop-threads {opts.interop_threads}: expected 1 or more")
    for flag, value in (("--hang-timeout", opts.hang_timeout),
                        ("--startup-timeout", opts.startup_timeout),
                        ("--timeout", opts.forward_timeout), ("--max-numel", opts.max_numel),
                        ("--max-steps", opts.max_steps), ("--max-rpc-depth", opts.max_rpc_depth)):
        if value <= 0:
            raise UsageError(f"{flag} {value}: expected a positive number")


def check_training_options(*, no_backward: bool, inject: bool, context: int | None) -> None:
    """``UsageError`` for a ``run`` option a training scenario cannot honour (its program runs
    the backward passes itself)."""
    if no_backward:
        raise UsageError("--no-backward does not apply to a training scenario: its program "
                         "runs each backward itself (choose contexts to record with --contexts)")
    if inject:
        raise UsageError("--inject-delay does not apply to a training scenario; use it with a "
                         "scenario that has a backward: key")
    if context is not None and context < 1:
        raise UsageError(f"--context {context}: contexts are numbered from 1")


def memory_size(text: str) -> int:
    """``--max-memory``: bytes, at least what torch and RPC need (``UsageError`` otherwise)."""
    try:
        size = limits.parse_size(text)
    except ValueError as exc:
        raise UsageError(f"--max-memory {text}: {exc}") from None
    if size < limits.MIN_MAX_MEMORY:
        raise UsageError(f"--max-memory {text}: a worker needs at least "
                         f"{limits.format_size(limits.MIN_MAX_MEMORY)} (torch, RPC and their "
                         "threads)")
    return size


def check_steps(start: int | None, end: int | None, n_steps: int | None) -> None:
    """``UsageError`` unless ``--from``/``--to`` select some of the replay's steps
    (``0 .. n_steps - 1``; ``None``: not known yet); a ``--to`` past the end means "to the
    end"."""
    for flag, value in (("--from", start), ("--to", end)):
        if value is not None and value < 0:
            raise UsageError(f"{flag} {value}: steps are numbered from 0")
    if start is not None and n_steps is not None and start > n_steps - 1:
        raise UsageError(f"--from {start}: the replay has {n_steps} steps, numbered 0 to "
                         f"{n_steps - 1}; give --from {n_steps - 1} or less")
    if start is not None and end is not None and end < start:
        raise UsageError(f"--from {start} is after --to {end}; give --to {start} or more")


def view_spec(view: str | None, full: bool, worker: str | None, rpc_call: int | None,
              focus: str | None, depth: int | None) -> Any:
    """The ``ViewSpec`` of ``export``'s view options; ``UsageError`` naming the flags."""
    from distviz.views import DETAILS, ViewSpec
    if view is not None and view not in DETAILS:
        raise UsageError(f"--view {view}: expected one of {', '.join(DETAILS)}")
    if full and view not in (None, "full"):
        raise UsageError(f"--full cannot be used with --view {view}; --full is --view full")
    if depth is not None and focus is None:
        raise UsageError("--depth needs --focus: it counts the edges around the focus node")
    return ViewSpec(detail="full" if full else view, worker=worker, rpc_call=rpc_call,
                    focus=focus, depth=2 if depth is None else depth)


def check_export_flags(fmt: str, *, step: int | None, frames: Path | None,
                        output: Path | None, full: bool) -> None:
    """``UsageError`` naming both flags when ``export`` was given a flag that the format or
    another flag would ignore."""
    formats = ("svg", "png", "dot", "html", "perfetto", "graphml", "gexf")
    if fmt not in formats:
        raise UsageError(f"--format {fmt}: expected one of {', '.join(formats)}")
    pictures = ("svg", "png", "dot")
    if frames is not None:
        if fmt not in pictures:
            raise UsageError(f"--frames cannot be used with --format {fmt}; use svg, png or dot")
        if step is not None:
            raise UsageError("--step cannot be used with --frames: --frames writes every step")
        if output is not None:
            raise UsageError("--output cannot be used with --frames: the frames are written "
                             "into the --frames folder")
    if step is not None and fmt not in pictures:
        raise UsageError(f"--step cannot be used with --format {fmt}; it draws one step as svg, "
                         "png or dot")
    if full and fmt in ("perfetto", "graphml", "gexf"):
        raise UsageError(f"--full cannot be used with --format {fmt}; it applies to pictures "
                         "and the HTML viewer")


def check_view_flags(fmt: str, flags: dict[str, Any]) -> None:
    """``UsageError`` for a view flag (``--view``, ``--worker``, ...) the format ignores."""
    given = [f for f, v in flags.items() if v is not None and v is not False]
    if given and fmt in ("perfetto", "graphml", "gexf"):
        raise UsageError(f"{given[0]} cannot be used with --format {fmt}; it applies to "
                         "pictures and the HTML viewer")


def is_stdout(path: Path) -> bool:
    """``-``, or a path that names this process's standard output (``/dev/stdout``)."""
    from distviz.files import STDOUT  # only when a path is read

    if str(path) == STDOUT:
        return True
    try:
        return os.path.samestat(os.stat(path), os.fstat(sys.stdout.fileno()))
    except (OSError, ValueError, AttributeError):  # no such file; stdout has no descriptor
        return False


def stdout_flags(outputs: dict[str, Path | None], as_json: bool = False) -> list[str]:
    """The flags among ``outputs`` that write to standard output; at most one may, and not
    with ``--json``. Raises ``UsageError`` otherwise."""
    flags = [flag for flag, path in outputs.items() if path is not None and is_stdout(path)]
    if len(flags) > 1:
        raise UsageError(f"{' and '.join(flags)} all write to standard output; give all but "
                         "one of them a file name")
    if flags and as_json:
        raise UsageError(f"{flags[0]} {outputs[flags[0]]} cannot be used with --json: both "
                         "write to standard output")
    return flags
