"""What commands show and write: the replay and its verdict (``distviz.judge.verdict``: the
agreement with PyTorch and the exit code it implies), the JSON report, the step log, pictures."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from distviz.cli.app import stdout_console
from distviz.cli.options import check_steps
from distviz.errors import UsageError
from distviz.files import is_stream, write_atomic
from distviz.limits import LOG_STEPS_SHOWN
from distviz.outcome import Mode
from distviz.trace import Trace
from distviz.trace.sections import RowStatus
from distviz.words import plural, word_for

if TYPE_CHECKING:
    from distviz.judge.analysis import Analysis
    from distviz.judge.findings import Agreement
    from distviz.judge.verdict import Verdict
    from distviz.replay.result import Replay
    from distviz.trace.sections import Real, Section
    from distviz.views import ViewSpec


def load_trace(path: Path, context: int | None = None) -> Trace:
    """The trace in ``path``; in a recording of several contexts, context ``context`` (from 1;
    default: the first)."""
    from distviz.trace.contexts_file import load_recording
    return load_recording(path).pick(context)


def check_mode(mode: str) -> Mode:
    """``--mode``'s word as a ``Mode``; ``UsageError`` unless it is ``fast`` or ``smart``."""
    if mode not in tuple(Mode):
        raise UsageError(f"--mode {mode}: expected fast or smart")
    return Mode(mode)


def replay_of(trace: Trace, mode: Mode) -> Replay:
    """The replay of ``trace`` in ``mode``."""
    from distviz.replay import replay
    return replay(trace, mode=mode)


def analysis_of(trace: Trace, mode: Mode, made: Replay | None = None) -> Analysis:
    """The one analysis of ``trace`` in ``mode``: its replay (``made`` when it is
    one of ``trace`` in ``mode``), verdict and timing, made once per command and handed to
    every renderer (``distviz.judge.analysis``)."""
    from distviz.judge.analysis import analysis
    return analysis(trace, mode, made)


def _json(section: Section | None) -> dict[str, Any] | None:
    return section.to_json() if section is not None else None


def real_report(real: Real | None) -> dict[str, Any]:
    """The ``real`` of a JSON report: the section without ``events``, with ``events_count``."""
    out: dict[str, Any] = real.to_json() if real is not None else {"outcome": "skipped"}
    events: list[Any] = out.pop("events", None) or []
    out["events_count"] = len(events)
    return out


def report(trace: Trace, rp: Replay, verdict: Verdict, trace_path: str | None,
           timing: dict[str, Any]) -> dict[str, Any]:
    return {"trace": trace_path, "scenario": _json(trace.scenario), "workers": trace.workers,
            "replay": rp.to_json(), "real": real_report(trace.real),
            "reference": _json(trace.reference),
            "agreement": verdict.agreement.to_json(), "verdict": verdict.to_json(), **timing}


def show(trace: Trace, rp: Replay, agreement: Agreement | None, *, step: bool,
          worker: str | None, start: int | None, end: int | None, log: bool) -> None:
    from distviz.render import terminal
    out = stdout_console()
    if worker is not None and worker not in trace.workers:
        import difflib
        near = difflib.get_close_matches(worker, trace.workers, n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise UsageError(f"--worker {worker}: no such worker{hint}; workers: "
                         f"{', '.join(trace.workers)}")
    check_steps(start, end, len(rp.events))
    if step and sys.stdin.isatty() and sys.stdout.isatty():
        from distviz.render.stepper import step_through
        step_through(trace, rp, out, agreement=agreement)
        return
    if log:
        # one event per line, never wrapped or cropped, so the log greps well in a pipe
        width = out.width if out.is_terminal else None
        limit = LOG_STEPS_SHOWN if start is None and end is None else None
        for line in terminal.render_log(trace, rp, worker=worker, start=start, end=end,
                                        agreement=agreement, width=width, limit=limit):
            out.print(line, crop=False, overflow="ignore")


def show_short(rp: Replay, agreement: Agreement | None, steps_line: str) -> None:
    """What ``--no-log`` (or a log too long to print) leaves of the step log: how many steps
    and where to see them, the replay's outcome, and the agreement with the real run, worded
    as at the end of the log."""
    from distviz.render.explain import agreement_lines
    out = stdout_console()
    for line in (steps_line, rp.summary()):
        out.print(line, markup=False, crop=False, overflow="ignore")
    if agreement is not None:
        for text in agreement_lines(agreement, None):
            out.print(text, crop=False, overflow="ignore")


@dataclass
class Written:
    """What ``write_pictures`` wrote: the paths, a line per picture saying its view (and how to
    get the others), and warnings (Graphviz's, a bitmap shrunk) for standard error."""

    paths: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def write_pictures(found: Analysis, targets: dict[str, Path | None], step: int | None = None,
                   full: bool = False, spec: ViewSpec | None = None) -> Written:
    """Write each wanted format of one run's analysis (``distviz.judge.analysis``: the trace,
    its replay and graph, the verdict's agreement, the timing; nothing is replayed or analysed
    again); pictures show the view ``spec`` asks for (a ``ViewSpec``; by default the most
    detailed readable one, chosen once for all of them)."""
    from distviz.errors import RenderError
    from distviz.render import graphviz_backend
    from distviz.render.pictures import choose_view, draw_picture, other_views
    from distviz.views import ViewSpec
    trace, rp, graph = found.trace, found.replay, found.replay.graph
    out = Written()
    wanted = {k: v for k, v in targets.items() if v is not None}
    if not wanted:
        return out
    spec = spec if spec is not None else ViewSpec(detail="full" if full else None)
    choice = None
    if any(k in wanted for k in ("dot", "svg", "png")):
        choice = choose_view(trace, rp, spec, step, graph,
                             measure=bool(graphviz_backend.available_backends()),
                             timing=found.timing)
    for fmt, path in wanted.items():
        assert path is not None
        if fmt in ("dot", "svg", "png"):
            assert choice is not None
            try:
                pic = draw_picture(trace, rp, fmt, spec, step, graph, choice)
            except RenderError as exc:
                if is_stream(path):  # no file to put the DOT source beside
                    raise
                dot_path = path.with_suffix(".dot")
                write_atomic(dot_path, choice.dot.source)
                raise RenderError(f"{exc.message}; the DOT source was written to {dot_path}",
                                  path=str(path)) from None
            write_atomic(path, pic.data)
            out.lines.append(f"{path}: {choice.sentence()}")
            out.warnings.extend(f"{path}: {w}" for w in pic.warnings)
        elif fmt == "html":
            from distviz.render.html.page import to_html
            write_atomic(path, to_html(found, spec=spec))
        elif fmt == "perfetto":
            from distviz.render.perfetto import to_perfetto
            write_atomic(path, json.dumps(to_perfetto(found)))
        out.paths.append(str(path))
    if choice is not None and (choice.dot.detail != "full" or choice.passed_over):
        out.lines.append("other views: " + ", ".join(other_views(trace, choice)))
    return out


def write_frames(found: Analysis, fmt: str, folder: Path, spec: ViewSpec) -> int:
    """One picture per replay step of the analysis's replay into ``folder``, all in the view
    chosen for the last step (or the one ``spec`` asks for); return how many were written."""
    from distviz.render import graphviz_backend
    from distviz.render.dot.draw import build_dot
    from distviz.render.pictures import choose_view
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--frames {folder}: not a folder; give a folder to write one file per "
                         "step into")
    folder.mkdir(parents=True, exist_ok=True)
    trace, rp, graph = found.trace, found.replay, found.replay.graph
    choice = choose_view(trace, rp, spec, len(rp.events) - 1 if rp.events else None, graph,
                         measure=bool(graphviz_backend.available_backends()),
                         timing=found.timing)
    n = 0
    for k in range(len(rp.events)):
        source = build_dot(trace, rp, k, detail=choice.dot.detail, scope=choice.scope,
                           graph=graph, timing=found.timing).source
        target = folder / f"step-{k:05d}.{fmt}"
        write_atomic(target, source if fmt == "dot" else graphviz_backend.render(source, fmt))
        n += 1
    return n


def real_lines(trace: Trace) -> list[str]:
    """What PyTorch's real backward did, in a few lines."""
    real = trace.real
    if real is None:
        return []
    outcome = real.outcome
    if outcome == "skipped":
        return [f"PyTorch: real backward skipped: {real.reason or 'not requested'}"]
    lines = [f"PyTorch: real backward {outcome}" + (f": {real.error}" if real.error else "")]
    for death in real.deaths:
        lines.append(f"PyTorch: {death['message']}")
    ref = trace.reference
    if ref is not None and ref.comparable:
        rows = ref.rows
        bad = [r for r in rows if not r.ok]
        zero = [r.var for r in rows if r.status == RowStatus.ZERO_UNUSED]
        text = (f"gradients: {len(rows) - len(bad)}/{plural(len(rows), 'leaf', 'leaves')} "
                f"{word_for(len(rows), 'equals', 'equal')} the single-process reference")
        if zero:
            text += f" (zeros from unused RPC outputs, as FAST mode gives: {', '.join(zero)})"
        if bad:
            text += "; differ: " + ", ".join(f"{r.var} ({r.status})" for r in bad)
        lines.append(text)
    return lines
