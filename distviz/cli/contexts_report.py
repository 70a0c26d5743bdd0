"""What ``distviz run`` and ``replay`` show and write for a recording, and its exit code: one
context without training (a plain scenario's run, a version 1 file) as a trace, several
(training scenarios) as the table of contexts, with one context's log on ``--context N``. The
exit code is the most severe of the contexts' verdicts (``distviz.judge.verdict``)."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from distviz.cli.app import stdout_console, unbounded_console
from distviz.cli.options import View
from distviz.cli.output import (
    analysis_of,
    real_lines,
    real_report,
    show,
    show_short,
    write_pictures,
)
from distviz.cli.output import report as trace_report
from distviz.judge.verdict import ContextVerdict, context_verdicts, recording_exit_code
from distviz.limits import EXIT_RUN_FAILED, ExitCode
from distviz.outcome import Mode
from distviz.trace import Trace
from distviz.trace.contexts_file import Recording
from distviz.words import plural

if TYPE_CHECKING:  # pragma: no cover
    from distviz.judge.analysis import Analysis
    from distviz.outcome import Stop

__all__ = ["context_analyses", "context_reports", "finish_recording", "replay_file",
           "replay_recording", "replay_trace", "replay_unrecorded", "show_recording",
           "write_html"]

Reports = list[ContextVerdict]


def context_reports(recording: Recording, mode: Mode) -> Reports:
    """The replay and the verdict of every context (``(None, None)`` for one without a
    recorded pass)."""
    return context_verdicts(recording, mode)


def _shared(recording: Recording) -> list[Any]:
    """The workers where contexts of several trainers met (``analyses.contexts``)."""
    from distviz.analyses.concurrent import shared_workers
    its = [it for it in recording.iterations if it is not None]
    if len(its) != len(recording.contexts):
        return []
    return shared_workers(recording.contexts, [it.label for it in its],
                          [it.trainer for it in its])


def report(recording: Recording, reports: Reports, path: str) -> dict[str, Any]:
    """The ``--json`` report of a recording (docs/trace-format.md)."""
    contexts = []
    for i, (trace, cv) in enumerate(zip(recording.contexts, reports, strict=True)):
        rp, agreement = cv.replay, cv.agreement
        real = real_report(trace.real)
        it = recording.iterations[i]
        contexts.append({"context": i + 1, "context_id": trace.context_id,
                         "iteration": it.to_json() if it else None, "nodes": len(trace.nodes),
                         "replay": ({"outcome": rp.outcome, "summary": rp.summary()}
                                    if rp else None),
                         "real": real, "reference": trace.to_json()["reference"],
                         "agreement": agreement.to_json() if agreement else None})
    shared = [{"worker": s.worker, "contexts": list(s.contexts), "overlaps": s.overlaps,
               "calls": [{"context": c.context, "label": c.label, "first": c.first,
                          "nodes": c.nodes, "start_us": round(c.start_us, 3),
                          "end_us": round(c.end_us, 3)} for c in s.calls]}
              for s in _shared(recording)]
    return {"trace": path, "scenario": recording.to_json()["scenario"],
            "workers": recording.workers,
            "training": recording.training.to_json() if recording.training else None,
            "shared_workers": shared, "contexts": contexts}


def show_recording(recording: Recording, reports: Reports) -> None:
    """The iteration table, what went wrong in a context, the shared workers and the final
    parameters."""
    from distviz.render import iterations
    out = unbounded_console()
    n = len(recording.contexts)
    summary = recording.training
    total = f" of {summary.contexts_total}" if summary and summary.contexts_total else ""
    name = (recording.scenario.name if recording.scenario is not None else None) or ""
    out.print(f"{name}: {plural(n, 'context')} recorded{total} on "
              f"{plural(len(recording.workers), 'worker')} ({', '.join(recording.workers)})",
              markup=False)
    out.print(iterations.iteration_table(recording, [cv.verdict for cv in reports]))
    for i, (rp, _) in enumerate(reports):
        if rp is not None and rp.outcome != "completed":
            out.print(f"{recording.label(i)}: {rp.summary()}", markup=False)
    for shared in _shared(recording):
        out.print(shared.sentence, markup=False)
    for line in iterations.final_lines(summary):
        out.print(line, markup=False)


def show_context(recording: Recording, number: int, report_: ContextVerdict,
                 view: View) -> None:
    """One context as a single trace is shown: its summary, its step log ending with the
    iteration's events, and what PyTorch did."""
    from distviz.render import iterations, tree
    trace = recording.pick(number)
    rp, agreement = report_.replay, report_.agreement
    out = unbounded_console()
    out.print(f"-- {recording.label(number - 1)}", markup=False)
    out.print(tree.render_summary(trace))
    if rp is not None:
        show(trace, rp, agreement, step=view.step, worker=view.worker, start=view.start,
             end=view.end, log=True)
    it = recording.iterations[number - 1]
    if it is not None:
        first = len(rp.events) if rp is not None else 0
        for log_line in iterations.iteration_log(it, first, trace.workers):
            out.print(log_line)
    for line in real_lines(trace):
        out.print(line, markup=False)


def finish_recording(recording: Recording, reports: Reports, out_path: Path,
                     context: int | None, stopped: Stop | None, view: View) -> None:
    """The end of ``distviz run`` for a recording that is not one trace (``show_run``, after
    the recording was saved), from every context's replay and verdict (``reports``): write
    pictures of one context (the HTML viewer of every context, or of ``--context N``), print
    the table (and ``--context N``'s log) or the JSON report."""
    number = context or 1
    pictures = dict(view.pictures)
    html_path = pictures.pop("html", None)
    wanted = [number] if any(pictures.values()) else []
    if html_path is not None:
        wanted = list(range(1, len(recording.contexts) + 1)) if context is None else [context]
    found = context_analyses(recording, reports, wanted)   # each context's, made once
    if html_path is not None:
        write_html(recording, found, html_path)
    if number in found:
        write_pictures(found[number], pictures)
    if view.as_json:
        print(json.dumps(report(recording, reports, str(out_path)), indent=1))
        return
    with contextlib.redirect_stdout(sys.stderr if view.report_to_stderr else sys.stdout):
        show_recording(recording, reports)
        if context is not None:
            show_context(recording, context, reports[context - 1], view)
        out = unbounded_console()
        if stopped:
            out.print(f"training stopped: {stopped.words}", markup=False)
        hint = "" if context is not None else \
            f"; see one context with: distviz replay {out_path} --context N"
        out.print(f"recording written to {out_path}{hint}", markup=False)


def context_analyses(recording: Recording, reports: Reports, numbers: list[int] | None = None
                     ) -> dict[int, Analysis]:
    """The analysis (``distviz.judge.analysis``) of each context ``numbers`` (from 1; default:
    all) that has a replay, by number, from its replay and verdict in ``reports``."""
    from distviz.judge.analysis import analysis_from
    out: dict[int, Analysis] = {}
    for number in numbers if numbers is not None else range(1, len(recording.contexts) + 1):
        cv = reports[number - 1]
        if cv.replay is not None and cv.verdict is not None:
            out[number] = analysis_from(recording.pick(number), cv.replay, cv.verdict)
    return out


def write_html(recording: Recording, found: dict[int, Analysis], path: Path) -> None:
    """The HTML step viewer of the contexts in ``found`` (their analyses by number, from
    ``context_analyses``), with a context picker (``distviz.render.html.contexts_page``)."""
    from distviz.files import write_atomic
    from distviz.render.html.contexts_page import ContextPage, to_html_contexts
    pages = [ContextPage(label=recording.label(number - 1), analysis=one,
                         iteration=recording.iterations[number - 1])
             for number, one in found.items()]
    name = (recording.scenario.name if recording.scenario is not None else None) or "training"
    write_atomic(path, to_html_contexts(pages, name))


def replay_file(recording: Recording, path: str, mode: Mode, view: View, context: int | None,
                graph: bool = False, what_if: str | None = None) -> ExitCode:
    """``distviz replay`` of a loaded file, the way ``distviz run`` shows a run: one context
    without training as a trace (``replay_trace``), several as the table of contexts
    (``replay_recording``); returns the exit code, the most severe of the contexts' verdicts
    (a trace without a recorded pass: the run's failure)."""
    recording.pick(context)
    trace = recording.single_trace
    if trace is not None and not trace.passes:
        return replay_unrecorded(trace, path, view.as_json)
    if trace is not None:
        reports = replay_trace(trace, path, mode, view, graph, what_if)
    else:
        reports = replay_recording(recording, path, context, mode, view)
    return recording_exit_code(recording, reports)


def replay_unrecorded(trace: Trace, path: str, as_json: bool) -> ExitCode:
    """A trace saved by a run that stopped before recording its graph: the run's error (or the
    JSON report without a replay); returns the exit code of a failed run."""
    error = (trace.real.error if trace.real is not None else None) or \
        "no backward pass was recorded"
    if as_json:
        print(json.dumps({"trace": path, "scenario": trace.to_json()["scenario"],
                          "workers": trace.workers, "replay": None,
                          "real": trace.to_json()["real"],
                          "reference": trace.to_json()["reference"], "agreement": None},
                         indent=1))
    else:
        stdout_console().print(f"{path}: no graph to replay: the run stopped before recording "
                               f"it ({error})", markup=False)
    return EXIT_RUN_FAILED


def replay_trace(trace: Trace, path: str, mode: Mode, view: View, graph: bool,
                 what_if: str | None) -> Reports:
    """``distviz replay`` of one trace: the step log (``--graph``: each worker's graph first),
    then where the real backward spent its time (``--what-if``: how long it would take with
    the changes), or the JSON report; returns its replay and verdict."""
    from distviz.analyses.whatif import time_report
    from distviz.render import tree
    found = analysis_of(trace, mode)   # the replay, the verdict and the timing, made once
    rp, verdict, agreement = found.replay, found.verdict, found.agreement
    time_lines, timing = time_report(trace, what_if, timing=found.timing)
    if view.as_json:
        print(json.dumps(trace_report(trace, rp, verdict, path, timing), indent=1))
        return [ContextVerdict(rp, verdict)]
    if graph:
        unbounded_console().print(tree.render_graph(trace))
    show(trace, rp, agreement, step=view.step, worker=view.worker, start=view.start,
         end=view.end, log=view.log is not False)
    if view.log is False and not view.step:
        show_short(rp, agreement, f"{plural(len(rp.events), 'replay step')} (--no-log)")
    for line in time_lines:
        stdout_console().print(line, markup=False)
    return [ContextVerdict(rp, verdict)]


def replay_recording(recording: Recording, path: str, context: int | None, mode: Mode,
                     view: View) -> Reports:
    """``distviz replay`` of a recording of several contexts: the table of every context, or
    with ``--context N`` that context's step log; returns every context's replay and verdict.
    """
    reports = context_reports(recording, mode)
    if view.as_json:
        full = report(recording, reports, path)
        print(json.dumps(full if context is None else full["contexts"][context - 1], indent=1))
    elif context is None:
        show_recording(recording, reports)
    else:
        show_context(recording, context, reports[context - 1], view)
    return reports
