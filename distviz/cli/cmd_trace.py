"""``distviz trace -- COMMAND...``: the user's own program, unchanged, recorded, checked and
explained (the work is in ``distviz.tracing``; this module prints and picks the exit status)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from distviz import limits
from distviz.cli.app import app, guard, stdout_console, unbounded_console
from distviz.cli.options import (
    Contexts,
    HangTimeout,
    MaxContexts,
    OnHang,
    TraceCommand,
    TraceDir,
    TraceInterop,
    TraceStrict,
)
from distviz.words import plural


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
@guard
def trace(
    command: TraceCommand,
    output: TraceDir = Path("distviz-traces"),
    contexts: Contexts = "first",
    max_contexts: MaxContexts = None,
    on_hang: OnHang = "stop",
    hang_timeout: HangTimeout = limits.TRACE_HANG_TIMEOUT,
    interop_threads: TraceInterop = None,
    strict: TraceStrict = False,
) -> None:
    """Run your own RPC program unchanged; record, check and explain its distributed backward.

    Every Python process the command starts loads distviz's hooks. Each selected
    dist_autograd.backward is recorded on every worker of its context, replayed first (a
    predicted hang is explained at once), observed, and compared with the replay; every other
    backward is watched (one past --hang-timeout is recorded then, and explained). Exit status:
    the program's own when it fails, else 0/6/7/8 as for run (a bug in distviz is 70, never 1);
    with --strict, 9 when a parameter's gradient went wrong (missing, all zeros, left in .grad
    or never applied by a local optimizer) in a run that is otherwise 0.

    Example:

      distviz trace -o traces --contexts all -- python train.py
    """
    from distviz.runner.supervisor.torch_range import require_torch
    from distviz.tracing.config import TraceConfig, check_options
    from distviz.tracing.launcher.command import run as run_command

    require_torch()
    check_options(contexts, max_contexts, on_hang, hang_timeout, interop_threads)
    config = TraceConfig(out_dir=str(output), contexts=contexts, max_contexts=max_contexts,
                         on_hang=on_hang, hang_timeout=hang_timeout,
                         interop_threads=interop_threads, strict=strict)

    def say(msg: str) -> None:
        print(f"distviz: {msg}", file=sys.stderr, flush=True)
    say(f"tracing {' '.join(command)} (contexts: {contexts}; traces go to {output}/)")
    finished = run_command(list(command), config, say)
    from distviz.files import write_atomic
    from distviz.tracing.launcher import backward_counts, run_summary

    found = run_summary.entries(finished.events)
    code = run_summary.exit_code(finished, found, strict)
    notes = run_summary.notes(finished, found, strict) + [s.text() for s in finished.in_flight]
    tests = run_summary.is_pytest_run(finished)
    if tests:   # pytest with distviz's plugin: never stopped, pytest's status and report
        notes.append("a pytest run: each test's contexts are in pytest's report; distviz "
                     "exits with pytest's status")
    index = output / "index.json"
    index_obj = run_summary.index_json(found, list(command), code, notes)
    index_obj["backwards"] = backward_counts.backwards_json(finished.events)
    index_obj["cuts"] = run_summary.run_cuts(finished.events)
    write_atomic(index, json.dumps(index_obj, indent=1) + "\n")
    out = stdout_console()
    files = f": {output}/<initiator>.ctx<N>.trace.json, " if found else "; "
    out.print(f"distviz trace: {plural(len(found), 'context')} recorded "
              f"in {finished.seconds:.1f} s{files}index {index}", markup=False)
    if found:
        unbounded_console().print(run_summary.table(found))
    for e in found:
        if e.row.explanation:
            out.print(f"{e.row.initiator} context {e.row.index}: {e.row.explanation}")
    for line in run_summary.timing_lines(found):
        out.print(line)
    for line in backward_counts.backward_lines(finished.events):
        out.print(line, markup=False)
    for note in notes:
        out.print(note, markup=False)
    own = run_summary.own_status(finished)
    meaning = "the program's own exit status" if own else limits.EXIT_CODES.get(code, "")
    if code == limits.EXIT_OK and not found:
        meaning = "the program succeeded; no context was recorded to check"
    out.print(f"exit status {code}: {meaning}", markup=False)
    raise typer.Exit(code)
