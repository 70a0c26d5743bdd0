"""Training in the terminal: one row per recorded context, the end of each iteration's log, and
the final parameters against the reference (pure; values, never printed here).

``iteration_table`` is a rich ``Table``; ``iteration_events`` the events that end an
iteration's step log (what ``get_gradients`` holds on each worker, each optimizer step), as
log lines with ``iteration_log``; ``final_lines`` the comparison of the parameters after
training.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.table import Table
from rich.text import Text

from distviz.judge.verdict import AGREE, NOT_COMPARED, Verdict
from distviz.trace.contexts_file import Recording
from distviz.trace.iteration import Iteration, TrainingSummary
from distviz.trace.sections import RowStatus
from distviz.words import plural

__all__ = ["IterationEvent", "final_lines", "iteration_events", "iteration_log", "losses_text",
           "iteration_table", "yes_no"]


def yes_no(value: bool | None) -> str:
    """``yes``, ``NO`` or ``-`` (not compared)."""
    return "-" if value is None else ("yes" if value else "NO")


def losses_text(values: Sequence[float], digits: int = 6, shown: int = 3) -> str:
    """The losses of a context's backward passes: all of them when there are ``shown`` or
    fewer, else ``8.1528 ×20`` (all the same) or ``first, second … last (N passes)``."""
    texts = [f"{v:.{digits}g}" for v in values]
    if len(texts) <= shown:
        return ", ".join(texts) or "-"
    if len(set(texts)) == 1:
        return f"{texts[0]} ×{len(texts)}"
    return f"{texts[0]}, {texts[1]} … {texts[-1]} ({len(texts)} passes)"


def _grads(it: Iteration) -> str:
    return " ".join(f"{w}:{len(es)}" for w, es in sorted(it.gradients.items())) or "-"


def _largest(it: Iteration) -> str:
    moved = [u for s in it.steps for u in s.updates]
    if not moved:
        return "-"
    return f"{max(u.norm for u in moved):.3g}"


def iteration_table(recording: Recording, verdicts: Sequence[Verdict | None]) -> Table:
    """One row per recorded context: its number (``ctx``), trainer and context number, nodes,
    loss (and the reference's), how many tensors ``get_gradients`` held per worker, the norm
    of the largest parameter update (``update``), whether the replay agrees with PyTorch's real
    backward (``replay``: the context's verdict, ``distviz.judge.verdict``) and whether the gradients equal the reference (``grads``): ``yes``, ``NO``
    or ``-`` (not compared)."""
    table = Table(box=None, pad_edge=False, title_justify="left")
    labels = [it.label for it in recording.iterations if it is not None] or ["-"]
    for name, justify, width in (("ctx", "right", 3), ("trainer", "left", max(map(len, labels))),
                                 ("nodes", "right", 5), ("loss", "right", 8),
                                 ("ref loss", "right", 8), ("get_gradients", "left", 13),
                                 ("update", "right", 7), ("replay", "left", 6),
                                 ("grads", "left", 5)):
        table.add_column(name, justify=justify, no_wrap=True,  # type: ignore[arg-type]
                         min_width=width)
    for i, (trace, it) in enumerate(zip(recording.contexts, recording.iterations, strict=True)):
        verdict = verdicts[i] if i < len(verdicts) else None
        ref_ok = trace.reference.ok if trace.reference is not None else None
        same = _agrees(verdict)
        if it is None:
            table.add_row(str(i + 1), "-", str(len(trace.nodes)), "-", "-", "-", "-",
                          yes_no(same), yes_no(ref_ok))
            continue
        check = it.reference
        table.add_row(str(i + 1), it.label, str(len(trace.nodes)), losses_text(it.loss, 5),
                      losses_text(check.loss, 5) if check and check.comparable else "-", _grads(it),
                      _largest(it), yes_no(same), yes_no(ref_ok))
    return table


def _agrees(verdict: Verdict | None) -> bool | None:
    if verdict is None or verdict.status == NOT_COMPARED:
        return None
    return verdict.status == AGREE


@dataclass(frozen=True)
class IterationEvent:
    """One event at the end of an iteration's step log, after the replay's own: ``action`` is
    ``gradients`` (what ``get_gradients`` holds on ``worker``), ``optimizer`` (a step) or
    ``reference`` (the iteration against the reference)."""

    worker: str
    action: str
    text: str


def iteration_events(it: Iteration) -> list[IterationEvent]:
    """The events that end an iteration's step log: ``get_gradients`` on each worker (by
    parameter name, with shape and norm), each optimizer step and how far it moved the
    parameters, and the comparison with the reference."""
    out: list[IterationEvent] = []
    for worker in sorted(it.gradients):
        entries = it.gradients[worker]
        listed = ", ".join(f"{e.name} {list(e.shape)} norm {e.norm:.4g}" for e in entries[:6])
        more = f", and {len(entries) - 6} more" if len(entries) > 6 else ""
        out.append(IterationEvent(worker, "gradients", (
            f"get_gradients(context) on {worker} returns {plural(len(entries), 'tensor')}: "
            f"{listed}{more} (in the context, not in .grad)")))
    for step in it.steps:
        moved = sorted(step.updates, key=lambda u: -u.norm)
        listed = ", ".join(f"{u.name} by {u.norm:.4g}" for u in moved[:6])
        more = f", and {len(moved) - 6} more" if len(moved) > 6 else ""
        owners = sorted({u.worker for u in moved})
        out.append(IterationEvent(it.trainer, "optimizer", (
            f"{step.optimizer}.step(context) through DistributedOptimizer updates "
            f"{plural(len(moved), 'parameter')} on {', '.join(owners) or 'no worker'}"
            f"{': ' + listed if listed else ''}{more}")))
    if it.reference is not None and it.reference.comparable:
        out.append(IterationEvent(it.trainer, "reference", (
            f"loss {losses_text(it.loss)} (reference {losses_text(it.reference.loss)}); the updates equal "
            f"the reference's: {yes_no(it.reference.ok)}")))
    return out


def iteration_log(it: Iteration, first_step: int, workers: Sequence[str]) -> list[Text]:
    """The iteration's events as more lines of the step log (``distviz.render.terminal
    .render_log``), numbered from ``first_step``."""
    step_w = max(4, len(str(first_step + 8)))
    worker_w = max((len(w) for w in workers), default=6)
    tag_w = max(len(a) for a in ("gradients", "optimizer", "reference"))
    lines = [Text(""), Text(f"after the backward ({it.label})", style="bold")]
    for k, ev in enumerate(iteration_events(it)):
        line = Text(f"{first_step + k:>{step_w}} ", style="dim")
        line.append(f"{ev.worker:<{worker_w}}", style="bold")
        line.append(f"  {ev.action:<{tag_w}}  ", style="magenta")
        line.append(ev.text)
        lines.append(line)
    return lines


def final_lines(summary: TrainingSummary | None) -> list[str]:
    """The run-level lines: contexts recorded of how many, the order trainers met in, and the
    parameters after training against the single-process reference."""
    if summary is None:
        return []
    lines = []
    if len(summary.trainers) > 1:
        overlap = ("their contexts overlapped in time" if summary.overlapped
                   else "their contexts did not overlap")
        if summary.shared_updates:
            overlap += (", and each updated parameters the others' contexts used ("
                        f"{', '.join(summary.shared_updates[:4])})")
        lines.append(f"trainers: {', '.join(summary.trainers)}; {overlap}")
    if summary.reference_outcome is None:
        lines.append("final parameters: no reference run")
        return lines
    if summary.reference_outcome != "completed":
        lines.append(f"final parameters: the reference run failed: {summary.reference_error}")
        return lines
    compared = [c for c in summary.final if c.status != RowStatus.NOT_COMPARED]
    if not compared:
        why = next((c.reason for c in summary.final if c.reason), "nothing to compare")
        lines.append(f"final parameters: not compared ({why})")
        return lines
    bad = [c for c in compared if c.status != RowStatus.MATCH]
    text = (f"final parameters: {len(compared) - len(bad)}/{len(compared)} equal the "
            "single-process reference training")
    if bad:
        text += "; differ: " + ", ".join(f"{c.name} ({c.status})" for c in bad[:5])
    lines.append(text)
    return lines
