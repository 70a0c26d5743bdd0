"""The command-line interface: a thin typed shell over the library.

It alone prints, writes files and picks exit codes (their table, ``EXIT_CODES``, is in
``distviz.limits`` with every other limit).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from distviz import limits
from distviz.errors import DistvizError, Interrupted, UsageError
from distviz.limits import (
    EXIT_BACKWARD_ERROR,
    EXIT_BAD_INPUT,
    EXIT_DISAGREE,
    EXIT_HANG,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_RUN_FAILED,
)
from distviz.trace import STDOUT, Trace, is_stream, write_atomic

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Record, replay and visualize PyTorch distributed autograd (FAST mode).\n\n"
                       "Example:\n\n  distviz run design_note")

def _out() -> Console:
    return Console(highlight=False, soft_wrap=True)


def _out_unbounded() -> Console:
    """Standard output for text pictures (the graph's trees and tables): the terminal's width
    on a terminal; in a pipe or a file as wide as each line needs, so nothing is cut."""
    out = _out()
    if out.is_terminal:
        return out
    return Console(highlight=False, soft_wrap=True, width=1_000_000)


def _err() -> Console:
    return Console(stderr=True, highlight=False)


def fail(err: DistvizError) -> typer.Exit:
    """Print ``err`` on stderr (one line per problem) and return the Exit to raise."""
    for line in err.lines():
        print(f"error: {line}", file=sys.stderr, flush=True)
    return typer.Exit(err.exit_code)


def _parse_sets(values: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values or []:
        if "=" not in item:
            raise UsageError(f"--set {item}: expected NAME=VALUE, e.g. --set micro=200")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _load_trace(path: Path) -> Trace:
    from distviz.trace import load
    return load(path)


def _replay(trace: Trace, mode: str) -> Any:
    from distviz.replay.fast import replay
    if mode not in ("fast", "smart"):
        raise UsageError(f"--mode {mode}: expected fast or smart")
    return replay(trace, mode=mode)


def _agreement(trace: Trace, rp: Any) -> dict[str, Any]:
    """Agreement with PyTorch for FAST mode; for SMART (which PyTorch never built), the
    comparison with FAST and with the reference gradients."""
    from distviz.replay.agreement import compare, smart_report
    if rp.mode == "smart":
        fast = _replay(trace, "fast")
        out = dict(compare(trace, fast))
        out["smart"] = smart_report(trace, rp, fast)
        out["text"] = out["smart"]["text"]
        return out
    return dict(compare(trace, rp))


def _exit_code(trace: Trace, rp: Any, agreement: dict[str, Any] | None) -> int:
    if rp.mode == "smart":
        return {"completed": EXIT_OK, "hang": EXIT_HANG}.get(rp.outcome, EXIT_BACKWARD_ERROR)
    real = (trace.real or {}).get("outcome")
    if rp.outcome == "hang" or real == "hang":
        return EXIT_HANG
    if rp.outcome == "error" or real == "error":
        return EXIT_BACKWARD_ERROR
    if agreement:
        # with more than one inter-op thread calls overlap: the order may differ by nature
        checks = ["outcome", "executed", "gradients", "leaves"]
        if agreement.get("exact") is not False:
            checks.append("order")
        if any(agreement.get(k) is False for k in checks):
            return EXIT_DISAGREE
    return EXIT_OK


def _report(trace: Trace, rp: Any, agreement: dict[str, Any], trace_path: str | None,
            timing: dict[str, Any]) -> dict[str, Any]:
    real: dict[str, Any] = dict(trace.real) if trace.real else {"outcome": "skipped"}
    events: list[Any] = real.pop("events", [])
    real["events_count"] = len(events)
    return {"trace": trace_path, "scenario": trace.scenario, "workers": trace.workers,
            "replay": rp.to_json(), "real": real, "reference": trace.reference,
            "agreement": agreement, **timing}


def _show(trace: Trace, rp: Any, agreement: dict[str, Any] | None, *, step: bool,
          worker: str | None, start: int | None, end: int | None, log: bool) -> None:
    from distviz.render import terminal
    out = _out()
    if worker is not None and worker not in trace.workers:
        import difflib
        near = difflib.get_close_matches(worker, trace.workers, n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise UsageError(f"--worker {worker}: no such worker{hint}; workers: "
                         f"{', '.join(trace.workers)}")
    _check_steps(start, end, len(rp.events))
    if step and sys.stdin.isatty() and sys.stdout.isatty():
        from distviz.render.stepper import step_through
        step_through(trace, rp, out, agreement=agreement)
        return
    if log:
        # one event per line, never wrapped or cropped, so the log greps well in a pipe
        width = out.width if out.is_terminal else None
        for line in terminal.render_log(trace, rp, worker=worker, start=start, end=end,
                                        agreement=agreement, width=width):
            out.print(line, crop=False, overflow="ignore")


def _check_steps(start: int | None, end: int | None, n_steps: int | None) -> None:
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


def _write_pictures(trace: Trace, rp: Any, agreement: dict[str, Any] | None,
                    targets: dict[str, Path | None], step: int | None = None,
                    full: bool = False) -> list[str]:
    from distviz.errors import RenderError
    from distviz.render import dot as dotmod
    from distviz.render import graphviz_backend
    written: list[str] = []
    wanted = {k: v for k, v in targets.items() if v is not None}
    if not wanted:
        return written
    source = None
    if any(k in wanted for k in ("dot", "svg", "png")):
        source = dotmod.to_dot(trace, rp, step=step, full=full)
    for fmt, path in wanted.items():
        assert path is not None
        if fmt == "dot":
            assert source is not None
            write_atomic(path, source)
        elif fmt in ("svg", "png"):
            assert source is not None
            try:
                data = graphviz_backend.render(source, fmt)
            except RenderError as exc:
                if is_stream(path):  # no file to put the DOT source beside
                    raise
                dot_path = path.with_suffix(".dot")
                write_atomic(dot_path, source)
                raise RenderError(f"{exc.message}; the DOT source was written to {dot_path}",
                                  path=str(path)) from None
            write_atomic(path, data)
        elif fmt == "html":
            from distviz.render.html import to_html
            plain = dotmod.to_dot(trace, full=full)
            svg: str | None
            try:
                svg = graphviz_backend.render(plain, "svg").decode("utf-8")
            except RenderError:
                svg = None
            write_atomic(path, to_html(trace, rp, svg=svg, agreement=agreement, full=full))
        elif fmt == "perfetto":
            from distviz.render.perfetto import to_perfetto
            write_atomic(path, json.dumps(to_perfetto(trace, rp)))
        written.append(str(path))
    return written


def _is_stdout(path: Path) -> bool:
    """``-``, or a path that names this process's standard output (``/dev/stdout``)."""
    if str(path) == STDOUT:
        return True
    try:
        return os.path.samestat(os.stat(path), os.fstat(sys.stdout.fileno()))
    except (OSError, ValueError, AttributeError):  # no such file; stdout has no descriptor
        return False


def _stdout_flags(outputs: dict[str, Path | None], as_json: bool = False) -> list[str]:
    """The flags among ``outputs`` that write to standard output; at most one may, and not
    with ``--json``. Raises ``UsageError`` otherwise."""
    flags = [flag for flag, path in outputs.items() if path is not None and _is_stdout(path)]
    if len(flags) > 1:
        raise UsageError(f"{' and '.join(flags)} all write to standard output; give all but "
                         "one of them a file name")
    if flags and as_json:
        raise UsageError(f"{flags[0]} {outputs[flags[0]]} cannot be used with --json: both "
                         "write to standard output")
    return flags


def _guard(fn: Any) -> Any:
    """Run a command body: DistvizError -> one line + its exit code; Ctrl-C -> 130."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except typer.Exit:
            raise
        except DistvizError as err:
            raise fail(err) from None
        except KeyboardInterrupt:
            raise fail(Interrupted("interrupted by Ctrl-C")) from None
        except BrokenPipeError:
            try:
                sys.stdout = open(os.devnull, "w")  # noqa: SIM115
            except OSError:
                pass
            raise typer.Exit(EXIT_OK) from None
        except OSError as exc:  # a file we were asked to write or read
            where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
            print(f"error: {where}{exc.strerror or exc}; check the path and its permissions",
                  file=sys.stderr, flush=True)
            raise typer.Exit(EXIT_BAD_INPUT) from None
        except Exception as exc:  # noqa: BLE001
            if os.environ.get("DISTVIZ_DEBUG"):
                raise
            text = " ".join(str(exc).split())
            print(f"internal error: {type(exc).__name__}: {text} (set DISTVIZ_DEBUG=1 for the "
                  "traceback and report it)", file=sys.stderr, flush=True)
            raise typer.Exit(EXIT_INTERNAL) from None
    return wrapper


Sets = Annotated[list[str] | None, typer.Option("--set", help="Override a param: NAME=VALUE.")]
Mode = Annotated[str, typer.Option("--mode", help="fast (PyTorch's algorithm) or smart (the RFC's proposal).")]
Json = Annotated[bool, typer.Option("--json", help="Print one JSON report instead of text.")]
Step = Annotated[bool, typer.Option("--step", help="Step through the replay interactively.")]
WorkerOpt = Annotated[str | None, typer.Option("--worker", help="Only events of this worker.")]
FromOpt = Annotated[int | None, typer.Option("--from", help="First step to print.")]
ToOpt = Annotated[int | None, typer.Option("--to", help="Last step to print.")]

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
_DEFAULT_MAX_MEMORY = limits.format_size(limits.DEFAULT_MAX_MEMORY).replace(" ", "")  # 4GiB
Log = Annotated[bool | None, typer.Option("--log/--no-log", help="Print the step log (default: when short).")]
Svg = Annotated[Path | None, typer.Option("--svg", help="Also write the graph as SVG.")]
Png = Annotated[Path | None, typer.Option("--png", help="Also write the graph as PNG.")]
Dot = Annotated[Path | None, typer.Option("--dot", help="Also write the graph as DOT.")]
Html = Annotated[Path | None, typer.Option("--html", help="Also write the HTML step viewer.")]
Perfetto = Annotated[Path | None, typer.Option("--perfetto", help="Also write a Perfetto/Chrome trace.")]
Verbose = Annotated[bool, typer.Option("--verbose", "-v", help="Print each phase of the run on stderr.")]
InjectDelay = Annotated[list[str] | None, typer.Option("--inject-delay", help="Slow the real backward down on purpose: recv=2ms (each RecvRpcBackward waits before it sends) or WORKER=3x (its nodes take 3 times as long).")]
WhatIfOpt = Annotated[str | None, typer.Option("--what-if", help="Predict the backward's wall time with changes: latency=5ms,bandwidth=1Gbit/s,slow=worker1:2x,recv=2ms.")]


@dataclass(frozen=True)
class _View:
    """How to show a finished run: JSON or text, the step log, pictures to write."""

    as_json: bool
    step: bool
    log: bool | None
    worker: str | None
    start: int | None
    end: int | None
    pictures: dict[str, Path | None]
    report_to_stderr: bool = False  # a file goes to standard output


@app.command()
@_guard
def run(
    scenario: ScenarioArg,
    sets: Sets = None,
    output: TraceOut = None,
    as_json: Json = False,
    step: Step = False,
    mode: Mode = "fast",
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
    max_memory: MaxMemory = _DEFAULT_MAX_MEMORY,
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
) -> None:
    """Run a scenario on real RPC workers, record the graph, replay it and compare with PyTorch.

    Example:

      distviz run pipeline --set micro=8 -o pipeline.trace.json
    """
    from distviz.replay.changes import parse_inject_delay
    from distviz.runner.parent import RunOptions
    from distviz.scenario import load_scenario
    from distviz.shipped import resolve_scenario

    # data on standard output moves the text report to stderr
    data_on_stdout = _stdout_flags({"-o": output, "--svg": svg, "--png": png, "--dot": dot,
                                    "--html": html, "--perfetto": perfetto}, as_json)
    sc = load_scenario(str(resolve_scenario(str(scenario))), _parse_sets(sets))
    opts = RunOptions(interop_threads=interop_threads, hang_timeout=hang_timeout,
                      confirm_hang=confirm_hang, startup_timeout=startup_timeout,
                      forward_timeout=forward_timeout, max_numel=max_numel,
                      max_steps=max_steps, max_rpc_depth=max_rpc_depth,
                      max_memory=_memory_size(max_memory), run_backward=not no_backward,
                      reference=not no_reference,
                      inject=parse_inject_delay(inject_delay or [], list(sc.workers)))
    _check_run_options(opts)
    _check_steps(start, end, None)
    result = _run_with_progress(sc, opts, quiet=as_json, verbose=verbose)
    out_path = output or Path(f"{sc.name}.trace.json")
    trace = _run_trace(sc, result, mode, out_path)
    view = _View(as_json=as_json, step=step, log=log, worker=worker, start=start, end=end,
                 pictures={"svg": svg, "png": png, "dot": dot, "html": html,
                           "perfetto": perfetto}, report_to_stderr=bool(data_on_stdout))
    raise typer.Exit(_finish_run(trace, mode, out_path, view))


def _check_run_options(opts: Any) -> None:
    """``UsageError`` for a run option out of range."""
    if opts.interop_threads < 1:
        raise UsageError(f"--interop-threads {opts.interop_threads}: expected 1 or more")
    for flag, value in (("--hang-timeout", opts.hang_timeout),
                        ("--startup-timeout", opts.startup_timeout),
                        ("--timeout", opts.forward_timeout), ("--max-numel", opts.max_numel),
                        ("--max-steps", opts.max_steps), ("--max-rpc-depth", opts.max_rpc_depth)):
        if value <= 0:
            raise UsageError(f"{flag} {value}: expected a positive number")


def _memory_size(text: str) -> int:
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


def _run_with_progress(sc: Any, opts: Any, *, quiet: bool, verbose: bool) -> Any:
    """Run the scenario with its phases on stderr: one line each (``--verbose``), a spinner
    on a terminal, or nothing. Returns the ``RunResult``."""
    from distviz.runner.parent import run_scenario

    def decide(trace: Trace) -> tuple[bool, str | None]:
        if _replay(trace, "fast").outcome == "hang" and not opts.confirm_hang:
            return False, ("the replay predicts a FAST-mode hang; the real backward was skipped "
                           "(use --confirm-hang to run it anyway)")
        return True, None

    err = _err()
    if verbose:
        def say(msg: str) -> None:
            print(f"distviz: {msg}", file=sys.stderr, flush=True)
        return run_scenario(sc, opts, decide, say)
    if err.is_terminal and not quiet:
        with err.status("starting workers") as status:
            return run_scenario(sc, opts, decide, lambda m: status.update(m))
    return run_scenario(sc, opts, decide, None)


def _run_trace(sc: Any, result: Any, mode: str, out_path: Path) -> Trace:
    """The trace of a finished run with its ``meta``. When the run failed, saves what was
    recorded (or just the scenario and the error) to ``out_path`` and raises the failure."""
    trace = result.trace
    failure = result.error
    if trace is None:
        if failure is None:
            raise RuntimeError("the run returned neither a trace nor an error")
        # nothing was recorded yet: keep what is known (scenario, workers, the error)
        trace = Trace(workers=list(sc.workers), initiator=sc.initiator, context_id=-1, nodes=[],
                      passes=[], scenario={"name": sc.name, "description": sc.description,
                                           "path": sc.path, "params": dict(sc.params),
                                           "seed": sc.seed})
    from distviz import __version__
    trace.meta = {"distviz_version": __version__, "python": sys.version.split()[0],
                  "timings_s": {k: round(v, 4) for k, v in sorted(result.timings.items())},
                  "mode": mode}
    if failure is not None:
        text = failure.one_line() if isinstance(failure, DistvizError) else str(failure)
        if trace.real is None or trace.real.get("outcome") in (None, "skipped"):
            trace.real = {"outcome": "error", "error": text, "events": [], "gradients": {}}
        trace.save(out_path)
        if isinstance(failure, DistvizError):
            failure.message += f" (partial trace saved to {out_path})"
        raise failure
    return trace


def _finish_run(trace: Trace, mode: str, out_path: Path, view: _View) -> int:
    """Save the trace, replay it, write the pictures, print the report; return the exit code."""
    from distviz.render import terminal

    trace.save(out_path)
    rp = _replay(trace, mode)
    agreement = _agreement(trace, rp)
    _write_pictures(trace, rp, agreement, view.pictures)
    from distviz.replay.whatif import time_report
    time_lines, timing = time_report(trace)
    if view.as_json:
        print(json.dumps(_report(trace, rp, agreement, str(out_path), timing), indent=1))
        return _exit_code(trace, rp, agreement)
    with contextlib.redirect_stdout(sys.stderr if view.report_to_stderr else sys.stdout):
        out = _out_unbounded()
        out.print(terminal.render_summary(trace))
        show_log = view.log if view.log is not None else len(rp.events) <= 400
        _show(trace, rp, agreement, step=view.step, worker=view.worker, start=view.start,
              end=view.end, log=show_log or view.step)
        if not show_log and not view.step:
            out.print(f"{len(rp.events)} replay steps; see them with: distviz replay {out_path}",
                      markup=False)
            out.print(rp.summary(), markup=False)
            out.print(agreement.get("text", ""), markup=False)
        for line in _real_lines(trace) + time_lines:
            out.print(line, markup=False)
        out.print(f"trace written to {out_path}", markup=False)
    return _exit_code(trace, rp, agreement)


def _real_lines(trace: Trace) -> list[str]:
    """What PyTorch's real backward did, in a few lines."""
    real = trace.real or {}
    outcome = real.get("outcome")
    if outcome is None:
        return []
    if outcome == "skipped":
        return [f"PyTorch: real backward skipped: {real.get('reason') or 'not requested'}"]
    lines = [f"PyTorch: real backward {outcome}" + (f": {real['error']}" if real.get("error")
                                                    else "")]
    for death in real.get("deaths") or []:
        lines.append(f"PyTorch: {death['message']}")
    ref = trace.reference or {}
    if ref.get("comparable"):
        rows = ref.get("comparison") or []
        bad = [r for r in rows if r.get("status") not in ("match", "zero_unused", "no_gradient")]
        zero = [r["var"] for r in rows if r.get("status") == "zero_unused"]
        text = (f"gradients: {len(rows) - len(bad)}/{len(rows)} leaves equal the single-process "
                "reference")
        if zero:
            text += f" (zeros from unused RPC outputs, as FAST mode gives: {', '.join(zero)})"
        if bad:
            text += "; differ: " + ", ".join(f"{r['var']} ({r['status']})" for r in bad)
        lines.append(text)
    return lines


@app.command()
@_guard
def check(
    scenario: ScenarioArg,
    sets: Sets = None,
) -> None:
    """Validate a scenario without starting any worker.

    Example:

      distviz check pipeline --set micro=200
    """
    from distviz.scenario import load_scenario
    from distviz.shipped import resolve_scenario
    sc = load_scenario(str(resolve_scenario(str(scenario))), _parse_sets(sets))
    _out().print(f"{scenario}: ok ({sc.name}: {len(sc.workers)} workers, "
                 f"{len(sc.passes)} backward pass{'es' if len(sc.passes) != 1 else ''})",
                 markup=False)


@app.command()
@_guard
def scenarios() -> None:
    """List the shipped scenarios; run one by name from any folder.

    Example:

      distviz scenarios
    """
    from rich.table import Table

    from distviz.scenario import load_scenario
    from distviz.shipped import scenario_dir, shipped_scenarios
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
    out = _out()
    out.print(table)
    out.print(f"run one with: distviz run NAME (the files are in {scenario_dir()})",
              markup=False)


@app.command()
@_guard
def replay(
    trace_file: Annotated[Path, typer.Argument(help="Trace JSON written by distviz run.")],
    as_json: Json = False,
    step: Step = False,
    mode: Mode = "fast",
    worker: WorkerOpt = None,
    start: FromOpt = None,
    end: ToOpt = None,
    graph: Annotated[bool, typer.Option("--graph", help="Show each worker's graph as a tree first.")] = False,
    what_if: WhatIfOpt = None,
) -> None:
    """Replay a saved trace (no torch, no workers) and print the step log, then where the real
    backward spent its time (or, with --what-if, how long it would take with the changes).

    Example:

      distviz replay design-note.trace.json --worker worker1
    """
    from distviz.render import terminal
    trace = _load_trace(trace_file)
    if not trace.passes:
        error = (trace.real or {}).get("error") or "no backward pass was recorded"
        if as_json:
            print(json.dumps({"trace": str(trace_file), "scenario": trace.scenario,
                              "workers": trace.workers, "replay": None, "real": trace.real,
                              "reference": trace.reference, "agreement": None}, indent=1))
        else:
            _out().print(f"{trace_file}: no graph to replay: the run stopped before recording "
                         f"it ({error})", markup=False)
        raise typer.Exit(EXIT_RUN_FAILED)
    rp = _replay(trace, mode)
    agreement = _agreement(trace, rp)
    from distviz.replay.whatif import time_report
    time_lines, timing = time_report(trace, what_if)
    if as_json:
        print(json.dumps(_report(trace, rp, agreement, str(trace_file), timing), indent=1))
    else:
        if graph:
            _out_unbounded().print(terminal.render_graph(trace))
        _show(trace, rp, agreement, step=step, worker=worker, start=start, end=end, log=True)
        for line in time_lines:
            _out().print(line, markup=False)
    raise typer.Exit(_exit_code(trace, rp, agreement))


@app.command()
@_guard
def export(
    trace_file: Annotated[Path, typer.Argument(help="Trace JSON written by distviz run.")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="svg, png, dot, html or perfetto.")] = "svg",
    output: Annotated[Path | None, typer.Option("-o", "--output", help="File to write.")] = None,
    step: Annotated[int | None, typer.Option("--step", help="Draw the state after replay step N.")] = None,
    frames: Annotated[Path | None, typer.Option("--frames", help="Write one picture per step into this folder.")] = None,
    full: Annotated[bool, typer.Option("--full", help="Draw every node even above the node budget.")] = False,
    mode: Mode = "fast",
) -> None:
    """Export a trace as a picture, an HTML step viewer or a Perfetto trace.

    Example:

      distviz export design-note.trace.json --format html -o design.html
    """
    _check_export_flags(fmt, step=step, frames=frames, output=output, full=full)
    trace = _load_trace(trace_file)
    rp = _replay(trace, mode)
    if step is not None and not (-1 <= step < len(rp.events)):
        raise UsageError(f"--step {step}: the replay has steps 0 to {len(rp.events) - 1}")
    if frames is not None:
        from distviz.render import dot as dotmod
        from distviz.render import graphviz_backend
        if frames.exists() and not frames.is_dir():
            raise UsageError(f"--frames {frames}: not a folder; give a folder to write one "
                             "file per step into")
        frames.mkdir(parents=True, exist_ok=True)
        n = 0
        for k, source in dotmod.frames(trace, rp, full=full):
            target = frames / f"step-{k:05d}.{fmt}"
            if fmt == "dot":
                write_atomic(target, source)
            else:
                write_atomic(target, graphviz_backend.render(source, fmt))
            n += 1
        _out().print(f"wrote {n} frames to {frames}", markup=False)
        return
    ext = {"perfetto": "json"}.get(fmt, fmt)
    target = output or trace_file.with_suffix("").with_suffix(f".{ext}")
    agreement = _agreement(trace, rp)
    _write_pictures(trace, rp, agreement, {fmt: target}, step=step, full=full)
    if _stdout_flags({"-o": target}):
        print(f"wrote {fmt} to standard output", file=sys.stderr)
    else:
        _out().print(f"wrote {target}", markup=False)


def _check_export_flags(fmt: str, *, step: int | None, frames: Path | None,
                        output: Path | None, full: bool) -> None:
    """``UsageError`` naming both flags when ``export`` was given a flag that the format or
    another flag would ignore."""
    formats = ("svg", "png", "dot", "html", "perfetto")
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
    if full and fmt == "perfetto":
        raise UsageError("--full cannot be used with --format perfetto; it applies to pictures "
                         "and the HTML viewer")


@app.command()
@_guard
def graph(
    trace_file: Annotated[Path, typer.Argument(help="Trace JSON written by distviz run.")],
    max_nodes: Annotated[int, typer.Option("--max-nodes", help="Above this, show a summary.")] = 200,
) -> None:
    """Show each worker's graph as a tree with dependency counts and send/recv pairs.

    Example:

      distviz graph design-note.trace.json
    """
    from distviz.render import terminal
    trace = _load_trace(trace_file)
    _out_unbounded().print(terminal.render_graph(trace, max_nodes=max_nodes))


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:
        print("error: interrupted by Ctrl-C", file=sys.stderr, flush=True)
        sys.exit(EXIT_INTERRUPTED)


if __name__ == "__main__":
    main()
