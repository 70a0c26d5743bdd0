"""What the watch says about a watched backward (pure, torch-free).

A watched context (``distviz.tracing.watch.watcher``) is recorded only when something happened in it
(``distviz.judge.watched``). Its verdict is the one judge's (``distviz.judge.verdict.judge``
with ``watched=``, which compares only the outcome); ``watched_row`` makes its row from that
verdict, as ``distviz.tracing.recording.report.row`` does for a recorded context, and ``deadline_lines``,
``returned_text`` and ``raised_text`` say what happened live and in the row's explanation.

Every backward counted, per initiator, is ``distviz.tracing.launcher.backward_counts``'s (the parent
reads only that: it never imports the replay for a run where nothing happened).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from distviz.judge.verdict import judge
from distviz.judge.watched import (
    Watched,
    answered_sends,
    returned_sentence,
    seconds_text,
    slow_text,
)
from distviz.torch_errors import classify
from distviz.trace import Trace
from distviz.tracing.shared.journal import ContextRow, RealState, VerdictStatus
from distviz.words import first_line

if TYPE_CHECKING:  # pragma: no cover
    from distviz.replay.result import Replay

def worker_gone(text: str) -> bool:
    """Whether PyTorch's error says a worker is gone or an RPC timed out."""
    return classify(text).worker_gone


def watched_meta(watched: Watched, trace: Trace) -> dict[str, Any]:
    """The trace's ``meta.traced.watched``: what a watched context can tell (``trace``'s
    gradients so far come from the watch's record)."""
    gradients = (trace.meta.traced or {}).get("watched", {}).get("gradients") or {}
    answered = answered_sends(trace)
    out: dict[str, Any] = {"state": watched.state, "hang_timeout_s": watched.timeout,
                           "recorded_after_s" if watched.state == "hang" else "seconds":
                               round(watched.seconds, 3),
                           "gradients": dict(sorted(gradients.items())),
                           "sends_answered": answered,
                           "order": "not observed: no hooks ran on a watched backward"}
    if watched.error is not None:
        out["error"] = watched.error
    return out


def deadline_lines(me: str, step: int, timeout: float, trace: Trace, replay: Replay) -> list[str]:
    """What the watch says live when a backward passes its deadline."""
    from distviz.tracing.recording import report

    head = f"{me} context {step}"
    if replay.outcome == "hang":
        return [f"{head}: PyTorch's backward has not returned after {timeout:g} s; the "
                f"replay of its graph, recorded now on {', '.join(trace.workers)}, predicts "
                "that it hangs (watched).", report.hang_text(trace, replay)]
    if replay.outcome == "error":
        return [f"{head}: PyTorch's backward has not returned after {timeout:g} s; the replay "
                f"of its graph, recorded now, raises: {report.predicted_error(trace, replay)} "
                "(the program goes on)"]
    return [f"{head}: {slow_text(trace, timeout)}; the program goes on"]


def returned_text(me: str, step: int, seconds: float, timeout: float, replay: Replay) -> str:
    """What the watch says when a backward it took at its deadline returns."""
    return f"{me} context {step}: {returned_sentence(seconds, timeout, replay)}"


def unrecorded_text(step: int, timeout: float, exc: BaseException, silent: str | None,
                    waited: float) -> str:
    """The watch could not record a backward past its deadline: worker ``silent`` did not
    answer within ``waited`` seconds (``recorder.gather.NoAnswer``), or ``exc`` says why."""
    head = f"context {step}: PyTorch's backward has not returned after {timeout:g} s"
    if silent is None:
        return f"{head}; its graph could not be recorded ({first_line(exc)}); the program goes on"
    return (f"{head}, and {silent} does not answer: distviz's recording of the graph got no "
            f"reply from {silent} within {waited:g} s (the process is "
            f"stopped, overloaded, or its RPC threads are all busy), so the backward may be "
            f"waiting for {silent}; the graph is not recorded and not called a hang; the "
            "program goes on")


def answered_text(me: str, step: int, seconds: float, timeout: float,
                  silent: str | None) -> str:
    """A backward whose graph could not be recorded at its deadline (``silent``: the worker
    that did not answer) returned."""
    after = f", after {silent} did not answer at the deadline" if silent else ""
    return (f"{me} context {step}: PyTorch's backward returned after {seconds_text(seconds)}, "
            f"later than --hang-timeout ({timeout:g} s){after}: slow, not a hang")


def raised_note(step: int, seconds: float, text: str, why: str | None = None) -> str:
    """The summary's note on a watched backward that raised and was not recorded."""
    because = f" ({why})" if why else " (a worker is gone, or the context with it)"
    return (f"context {step} was in flight: PyTorch's backward raised after "
            f"{seconds_text(seconds)}: {text}; its graph was not recorded{because}")


def budget_note(most: int) -> str:
    """Said once, when a process has written its ``most`` traces of slow or raised watched
    backwards (``limits.TRACE_WATCHED_WRITES``)."""
    return (f"{most} traces of watched backwards that were slow or raised are written; later "
            "ones are counted in the summary, not recorded (a hang is always recorded)")


def watched_row(row: ContextRow, trace: Trace, replay: Replay, watched: Watched) -> ContextRow:
    """``row`` (``report.row`` of the watch's trace, or its previous row) with the one judge's
    verdict on the watched context (``judge(..., watched=)``: only the outcome is compared, so
    nothing here ever differs) and its explanation."""
    v = judge(trace, replay, watched)
    if v.outcome == "hang" and replay.outcome == "hang":
        explanation: str | None = (replay.hang.summary if replay.hang is not None
                                   else "no worker can make progress")
    elif v.outcome == "hang":
        explanation = v.text     # the slow backward's: what the recording can tell
    elif v.outcome == "error":
        explanation = raised_text(trace, replay, watched.error or "an error")
    else:
        explanation = None
    return replace(row, watched=True, predicted=v.predicted, outcome=v.outcome,
                   real=RealState(v.real) if v.real else row.real,
                   agreement=VerdictStatus(v.status), agreement_text=v.text, explanation=explanation,
                   exit_code=v.exit_code, category=v.category)


def raised_text(trace: Trace, replay: Replay, error: str) -> str:
    """A watched backward that raised, and where the replay of its graph puts the error."""
    from distviz.tracing.recording import report

    if replay.outcome == "error":
        return (f"the backward raised: {error}; the replay of its graph, recorded after the "
                f"error, predicts it: {report.predicted_error(trace, replay)}")
    if replay.outcome == "hang":
        return (f"the backward raised: {error}; the replay of its graph, recorded after the "
                f"error, hangs: {replay.hang.summary if replay.hang is not None else ''}")
    return (f"the backward raised: {error}; the replay of its graph completes, so the error "
            "does not come from FAST mode's rules (the program's own code, or a worker)")
