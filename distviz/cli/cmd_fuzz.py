"""``distviz fuzz``: random programs on real workers, checked against PyTorch (a thin shell over
``distviz.fuzz.runner``): its options, the progress bar, the summary or the JSON report, and
the findings written under ``-o DIR``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from distviz import limits
from distviz.cli.app import app, guard, stderr_console, stdout_console
from distviz.cli.options import HangTimeout, Json
from distviz.errors import UsageError
from distviz.files import write_atomic

__all__ = ["fuzz"]

Count = Annotated[int, typer.Option("--count", help="How many programs to generate.")]
Seed = Annotated[int, typer.Option("--seed", help="Seed of the run; a program depends only on it and its index.")]
Workers = Annotated[str, typer.Option("--workers", help="Workers per program: N or MIN-MAX.")]
FindingsDir = Annotated[Path, typer.Option("-o", "--output", help="Folder for the minimal scenario of each disagreement.")]
NoShrink = Annotated[bool, typer.Option("--no-shrink", help="Save disagreements as generated, without shrinking.")]
Training = Annotated[float, typer.Option("--training", help="Fraction (0-1) of the programs that are training programs: modules on a parameter server, 2-3 iterations.")]
ShrinkTries = Annotated[int, typer.Option("--max-shrink-tries", help="Runs the shrinker may spend on one disagreement.")]


def worker_range(text: str) -> tuple[int, int]:
    """``N`` or ``MIN-MAX`` as ``(min, max)``; ``UsageError`` outside 2..``MAX_WORKERS``."""
    lo, _, hi = text.partition("-")
    try:
        span = (int(lo), int(hi or lo))
    except ValueError:
        raise UsageError(f"--workers {text}: expected a count or a range, e.g. 2-6") from None
    if not 2 <= span[0] <= span[1] <= limits.MAX_WORKERS:
        raise UsageError(f"--workers {text}: expected 2 <= MIN <= MAX <= {limits.MAX_WORKERS}")
    return span


def _save_finding(result: Any, folder: Path, options: Any) -> dict[str, Any]:
    """Write a finding's minimal and original programs and its trace; return what to report."""
    from distviz.fuzz.runner import reproduce_command
    finding = result.finding
    path = folder / f"{result.name}.yaml"
    write_atomic(path, finding.minimal)
    write_atomic(folder / f"{result.name}.original.yaml", finding.original)
    if finding.trace is not None:
        finding.trace.save(folder / f"{result.name}.trace.json")
    what = (f"failed to run: {finding.error}" if finding.error else "disagrees on "
            + ", ".join(result.judged.disagreements if result.judged else ()))
    return {"name": result.name, "path": str(path), "what": what,
            "reproduced": finding.reproduced, "command": reproduce_command(path, options)}


def _with_bar(options: Any, keep: Any) -> Any:
    """Run the fuzz with a progress bar on stderr (a terminal): done / total, the tally, and
    the program being run or shrunk."""
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn
    from rich.progress import Progress as Bar

    from distviz.fuzz.runner import Progress, fuzz
    tally = {"agree": 0, "disagree": 0}
    with Bar(TextColumn("fuzz"), BarColumn(), MofNCompleteColumn(),
             TextColumn("{task.description}"), console=stderr_console(), transient=True) as bar:
        task = bar.add_task("", total=options.count)

        def show(p: Progress) -> None:
            keep(p)
            if p.result is not None:
                tally["agree" if p.result.agrees else "disagree"] += 1
            bar.update(task, completed=p.done, description=f"{tally['agree']} agree, "
                       f"{tally['disagree']} disagree · {p.text}")
        return fuzz(options, show)


@app.command()
@guard
def fuzz(
    count: Count = 20,
    seed: Seed = 0,
    workers: Workers = f"{limits.FUZZ_MIN_WORKERS}-{limits.FUZZ_MAX_WORKERS}",
    output: FindingsDir = Path("fuzz-out"),
    as_json: Json = False,
    hang_timeout: HangTimeout = limits.FUZZ_HANG_TIMEOUT,
    no_shrink: NoShrink = False,
    max_shrink_tries: ShrinkTries = limits.FUZZ_MAX_SHRINK_TRIES,
    training: Training = 0.0,
) -> None:
    """Generate random distributed programs, run each on real workers and check the replay.

    Every disagreement is saved in the output folder as a minimal scenario, with the command
    that reproduces it. Exit code 8 when any program disagrees.

    Example:

      distviz fuzz --count 30 --seed 1 --training 0.2
    """
    from distviz.fuzz.runner import FuzzOptions, Progress, summary_lines
    from distviz.fuzz.runner import fuzz as run_fuzz
    from distviz.runner.supervisor.torch_range import require_torch

    require_torch()
    lo, hi = worker_range(workers)
    for flag, value in (("--count", count), ("--hang-timeout", hang_timeout),
                        ("--max-shrink-tries", max_shrink_tries)):
        if value <= 0:
            raise UsageError(f"{flag} {value}: expected a positive number")
    if not 0 <= training <= 1:
        raise UsageError(f"--training {training}: expected a fraction from 0 to 1")
    opts = FuzzOptions(count=count, seed=seed, min_workers=lo, max_workers=hi,
                       hang_timeout=hang_timeout, shrink=not no_shrink,
                       max_shrink_tries=max_shrink_tries, training=training)
    saved: list[dict[str, Any]] = []

    def keep(p: Progress) -> None:
        if p.result is not None and p.result.finding is not None:
            saved.append(_save_finding(p.result, output, opts))

    on_terminal = stderr_console().is_terminal and not as_json
    report = _with_bar(opts, keep) if on_terminal else run_fuzz(opts, keep)
    summary = report.summary()
    if as_json:
        print(json.dumps(dict(report.to_json(), saved=saved), indent=1))
    else:
        out = stdout_console()
        for line in summary_lines(summary):
            out.print(line, markup=False)
        for item in saved:
            again = "" if item["reproduced"] else " (not again on a second run)"
            out.print(f"{item['name']} {item['what']}{again}: {item['path']}", markup=False)
            out.print(f"  reproduce: {item['command']}", markup=False)
    raise typer.Exit(report.exit_code)
