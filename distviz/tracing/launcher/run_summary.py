"""The end of a ``distviz trace`` run: ``index.json``, the summary table, the exit code
(pure, torch-free).

Each recorded context has one ``ContextRow`` (the last one logged for its trace file wins: with
``--on-hang continue`` a context is logged when the hang is predicted and again when PyTorch's
backward is seen to hang). ``entries`` orders them by initiator and context number and says how
each graph differs from the previous recorded context of the same initiator.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from distviz.limits import (
    EXIT_GRADIENT,
    EXIT_HANG,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    ExitCode,
    most_severe,
)
from distviz.tracing.shared.fold import Note, fold
from distviz.tracing.shared.journal import (
    ContextRow,
    Event,
    EventKind,
    VerdictStatus,
    fails_strict,
)
from distviz.words import duration, plural

if TYPE_CHECKING:  # pragma: no cover
    from rich.table import Table

    from distviz.tracing.launcher.command import Finished


@dataclass(frozen=True, slots=True)
class Entry:
    """One recorded context and how its graph differs from the previous one of its
    initiator (``change``: ``first recorded``, ``same shape`` or what changed)."""

    row: ContextRow
    change: str


#: ``Entry.change`` of a context whose graph has the node counts of the one before it.
SAME_SHAPE = "same shape"


def shape_change(before: dict[str, int] | None, after: dict[str, int]) -> str:
    """``same shape``, or the node counts that changed: ``+2 nodes (+2 trainer/AddBackward0)``,
    ``same node count (-1 ps/AddBackward0, +1 t/MulBackward0)``."""
    if before is None:
        return "first recorded"
    diffs: list[tuple[str, int]] = []
    for key in sorted(set(before) | set(after)):
        d = after.get(key, 0) - before.get(key, 0)
        if d:
            diffs.append((key, d))
    if not diffs:
        return SAME_SHAPE
    total = sum(after.values()) - sum(before.values())
    parts = ", ".join(f"{d:+d} {k}" for k, d in diffs[:4])
    more = f", {len(diffs) - 4} more kinds" if len(diffs) > 4 else ""
    return f"{total:+d} nodes ({parts}{more})" if total else f"same node count ({parts}{more})"


def entries(events: list[Event]) -> list[Entry]:
    """The recorded contexts in ``events``, by initiator then context number."""
    out: list[Entry] = []
    previous: dict[str, dict[str, int]] = {}
    for r in fold(events).rows:
        out.append(Entry(row=r, change=shape_change(previous.get(r.initiator), r.shape)))
        previous[r.initiator] = r.shape
    return out


def index_json(found: list[Entry], command: list[str], exit_code: int,
               notes: list[str]) -> dict[str, Any]:
    """The ``index.json`` object: the command, its exit code, notes, one object per context."""
    contexts = []
    for e in found:
        r = e.row
        contexts.append({
            "file": r.file, "initiator": r.initiator, "context": r.index,
            "context_id": r.context_id, "pid": r.pid, "workers": r.workers, "nodes": r.nodes,
            "messages": r.messages, "passes": r.passes, "outcome": r.outcome, "predicted": r.predicted,
            "real": r.real, "agreement": r.agreement, "agreement_text": r.agreement_text,
            "exit_code": r.exit_code, "category": r.category,
            "violations": r.violations, "explanation": r.explanation, "time": r.time,
            "change": e.change, "seconds": r.seconds, "test": r.test, "watched": r.watched})
    return {"format": "distviz-trace-index", "command": command, "exit_code": exit_code,
            "notes": notes, "contexts": contexts}


def run_cuts(events: list[Event]) -> dict[str, Any]:
    """``index.json``'s ``cuts``: each parameter named without a gradient with the cut that
    caused it, and every cut the processes logged (``distviz.cuts``)."""
    from distviz.cuts import cuts_json

    return cuts_json([ev.explained for ev in events
                      if ev.kind == EventKind.CUT and ev.explained is not None],
                     [ev.cut for ev in events if ev.kind == EventKind.CUT_SEEN and
                      ev.cut is not None])


def hang_cut_notes(found: list[Entry], events: list[Event]) -> list[str]:
    """A hang that comes from a cut: an RPC whose result the program cut (``.item()`` on the
    RPC's line) named in the hang's explanation, or a worker of the hanging context that cut
    the path of an RPC's arguments (a pipeline stage's ``.detach()``): the cut, its line and
    its fix."""
    from distviz.cuts import first_frame

    hangs = [e.row for e in found if e.row.outcome == "hang" and e.row.explanation]
    out: list[str] = []
    for ev in events:
        cut = ev.cut if ev.kind == EventKind.CUT_SEEN else None
        if cut is None:
            continue
        for r in hangs:
            said = any(b.site and first_frame(b.site) in (r.explanation or "")
                       for b in cut.behind)
            upstream = cut.upstream and cut.context_id == r.context_id and \
                cut.worker in r.workers
            if said or upstream:
                out.append(f"{r.initiator} context {r.index}: the hang comes from a cut on "
                           f"{cut.worker}: {cut.what()}{cut.where()}; fix: {cut.fix()}")
                break
    return list(dict.fromkeys(out))


def _columns(r: ContextRow) -> tuple[Any, ...]:
    """What the table shows of a context, but for its number and its change."""
    return (r.initiator, len(r.workers), r.nodes, r.messages, r.passes, r.outcome, r.agreement)


def runs(found: list[Entry]) -> list[list[Entry]]:
    """``found`` in runs: a context of the same shape as the one before it (same initiator,
    the next number) that shows the same in every column joins that context's run."""
    out: list[list[Entry]] = []
    for e in found:
        last = out[-1][-1] if out else None
        if (last is not None and e.change == SAME_SHAPE and e.row.index == last.row.index + 1
                and _columns(e.row) == _columns(last.row)):
            out[-1].append(e)
        else:
            out.append([e])
    return out


def table(found: list[Entry]) -> Table:
    """The summary as a rich table at any width, one line per recorded context, where a run
    of contexts of the same shape and the same result is one line (its last column ends with
    ``contexts 2-150: the same``: a training loop's contexts; ``index.json`` has each): the
    columns never wrap, and the last, how the graph differs from the previous context, is cut
    with ``…`` to fit the console (a pipe gets it whole; ``index.json`` always has it)."""
    from rich.table import Table
    from rich.text import Text

    t = Table(box=None, pad_edge=False, header_style="bold", show_edge=False)
    numbers = ("ctx", "workers", "nodes", "msgs", "passes")
    for col in ("initiator", *numbers, "outcome", "agreement"):
        t.add_column(col, no_wrap=True, justify="right" if col in numbers else "left")
    t.add_column("graph vs previous", no_wrap=True, overflow="ellipsis", min_width=10)
    styles = {"completed": "green", "hang": "red", "error": "red", "unfinished": "red"}
    for run in runs(found):
        r = run[0].row
        agree = Text(r.agreement, style="green" if r.agreement == VerdictStatus.AGREES else
                     ("red" if r.agreement == VerdictStatus.DIFFERS else "yellow"))
        change = run[0].change
        if len(run) > 1:
            first, last = run[1].row.index, run[-1].row.index
            change += f"; context {first}: the same" if first == last else \
                f"; contexts {first}-{last}: the same"
        t.add_row(r.initiator, str(r.index), str(len(r.workers)), str(r.nodes),
                  str(r.messages), str(r.passes), Text(r.outcome, style=styles.get(r.outcome, "")), agree,
                  change)
    return t


#: Above this many contexts with a measured backward, the summary gives their timing as a
#: median, the slowest and the outliers; ``index.json`` keeps every context's.
TIMING_LINES_SHOWN = 10
#: A context whose backward takes more than this many times the median is an outlier.
OUTLIER_FACTOR = 2.0


def _who(e: Entry) -> str:
    return f"{e.row.initiator} context {e.row.index}"


def timing_lines(found: list[Entry], shown: int = TIMING_LINES_SHOWN) -> list[str]:
    """Where each completed backward spent its time: a line per context (``trainer context
    1: backward 2.9 ms (measured); critical path ...``) for up to ``shown`` of them; for more,
    the median and the slowest backward, then each outlier (over ``OUTLIER_FACTOR`` times the
    median) with its critical path, which says why, and where the rest is."""
    timed = [e for e in found if e.row.time]
    if len(timed) <= shown:
        return [f"{_who(e)}: {e.row.time}" for e in timed]
    measured = sorted((e.row.seconds["backward"], i) for i, e in enumerate(timed)
                      if "backward" in e.row.seconds)
    if not measured:
        return [f"timing of {plural(len(timed), 'context')}: see index.json"]
    n = len(measured)
    median = (measured[(n - 1) // 2][0] + measured[n // 2][0]) / 2
    slow_s, slow_i = measured[-1]
    out = [f"backward time over {plural(n, 'context')}: median {duration(median)}, slowest "
           f"{duration(slow_s)} ({_who(timed[slow_i])}); every context's critical path is in "
           "index.json"]
    outliers = [(sec, i) for sec, i in reversed(measured) if sec > OUTLIER_FACTOR * median]
    if not outliers:
        out.append(f"no outliers: every backward took at most {OUTLIER_FACTOR:g} times the "
                   "median")
    for sec, i in outliers[:5]:
        out.append(f"outlier {_who(timed[i])} ({sec / median:.1f}x the median): "
                   f"{timed[i].row.time}")
    if len(outliers) > 5:
        out.append(f"and {plural(len(outliers) - 5, 'more outlier')} (index.json)")
    return out


def contexts_code(found: list[Entry]) -> ExitCode:
    """The exit code the recorded contexts give when the program itself succeeded: the most
    severe of their verdicts' (``distviz.limits.most_severe``, as for a recording's
    contexts)."""
    return most_severe(e.row.exit_code for e in found)


def program_status(returncode: int) -> int:
    """A shell's view of a child's status: ``128 + N`` when signal ``N`` killed it."""
    return 128 - returncode if returncode < 0 else returncode


def is_pytest_run(finished: Finished) -> bool:
    """Whether the program was pytest with distviz's plugin (which keeps pytest's status)."""
    return any(ev.kind == EventKind.TESTS for ev in finished.events) and not finished.interrupted


class StatusFrom(Enum):
    """What ``distviz trace``'s exit status comes from (``status_from``)."""

    PYTEST = "pytest"            # pytest's own status, in a pytest run with the plugin
    INTERRUPTED = "interrupted"  # 130 after Ctrl-C, 143 after SIGTERM
    HANG = "hang"                # 6: distviz stopped the program for a hang
    PROGRAM = "program"          # the program's own status: it failed
    CONTEXTS = "contexts"        # the most severe of the contexts' verdicts
    STRICT = "strict"            # 9: --strict, and a note says a gradient went wrong


def strict_notes(events: list[Event]) -> list[Note]:
    """The notes that fail a run under ``--strict`` (``journal.fails_strict``)."""
    return [n for n in fold(events).notes if fails_strict(n.kind)]


def status_from(finished: Finished, found: list[Entry] | None = None,
                strict: bool = False) -> StatusFrom:
    """The one precedence of ``distviz trace``'s exit status: a pytest run with the plugin
    (each test's contexts are in pytest's report; under ``--strict`` the plugin fails the
    tests), then an interruption, a hang that stopped the program, the program's own failure,
    then the recorded contexts when a verdict is not OK, then ``--strict``'s notes (a gradient
    missing, all zeros, left in ``.grad`` or never applied), else the contexts (OK)."""
    if is_pytest_run(finished):
        return StatusFrom.PYTEST
    if finished.interrupted:
        return StatusFrom.INTERRUPTED
    if finished.stopped_for_hang:
        return StatusFrom.HANG
    if finished.returncode != 0:
        return StatusFrom.PROGRAM
    if strict and contexts_code(found or []) == EXIT_OK and strict_notes(finished.events):
        return StatusFrom.STRICT
    return StatusFrom.CONTEXTS


def own_status(finished: Finished) -> bool:
    """Whether ``distviz trace`` exits with the program's own status (``status_from``)."""
    return status_from(finished) in (StatusFrom.PYTEST, StatusFrom.PROGRAM)


def exit_code(finished: Finished, found: list[Entry], strict: bool = False) -> int:
    """``distviz trace``'s exit status, from what ``status_from`` says it comes from: an
    ``ExitCode``, or the program's own status (any number), passed on."""
    source = status_from(finished, found, strict)
    if source in (StatusFrom.PYTEST, StatusFrom.PROGRAM):
        return program_status(finished.returncode)
    if source is StatusFrom.INTERRUPTED:
        return EXIT_TERMINATED if finished.terminated else EXIT_INTERRUPTED
    if source is StatusFrom.HANG:
        return EXIT_HANG
    if source is StatusFrom.STRICT:
        return EXIT_GRADIENT
    return contexts_code(found)


def notes(finished: Finished, found: list[Entry], strict: bool = False) -> list[str]:
    """Sentences about the run as a whole, for the summary and ``index.json``."""
    out = [note.text for note in fold(finished.events).notes]
    out += hang_cut_notes(found, finished.events)
    if status_from(finished, found, strict) is StatusFrom.STRICT:
        n = len(strict_notes(finished.events))
        out.append(f"--strict: {plural(n, 'note')} above {'says' if n == 1 else 'say'} a "
                   "gradient went wrong; distviz exits with status "
                   f"{int(EXIT_GRADIENT)} (the program itself exited with 0)")
    if finished.interrupted:
        out.append("interrupted: the program was stopped; the traces written so far are kept")
    elif finished.returncode != 0 and own_status(finished):
        status = program_status(finished.returncode)
        how = (f"was killed by signal {-finished.returncode}" if finished.returncode < 0
               else f"exited with status {status}")
        out.append(f"the program {how}; distviz exits with the same status")
    if finished.leftovers:
        out.append(f"the program left {plural(finished.leftovers, 'process', 'processes')} "
                   "running; distviz stopped them")
    if not found and not finished.interrupted and not finished.stopped_for_hang:
        out.append("no context was recorded: no process called "
                   "torch.distributed.autograd.backward in a context --contexts selects")
    return out
