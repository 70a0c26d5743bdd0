"""What the watch says about a watched backward, and every backward counted (pure,
torch-free).

A watched context (``distviz.tracing.watch``) is recorded only when something happened in it:
its backward passed ``--hang-timeout`` (``hang``), returned after that (``returned``) or
raised (``raised``). Its graph was recorded while (or after) PyTorch's backward ran, with no
hooks on it: the trace has no per-node order, only the graph, the gradients accumulated when
it was recorded and how PyTorch's backward ended. So the verdict compares only the outcome: a
hang both sides have agrees; a backward that returned late, while the replay completes, is
slow, not a hang, and is not compared, never "differs".

``backward_lines`` and ``backwards_json`` give, per initiator, every backward call the
processes handed over (``backward_stats``): for the summary and ``index.json``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

from distviz.replay.verdict import outcome_code, pytest_category
from distviz.trace import Trace, short_name
from distviz.tracing.backward_stats import BackwardStats
from distviz.tracing.journal import ContextRow, Event
from distviz.words import first_line, plural

#: What happened in a watched context: past its deadline, returned after it, or raised.
State = Literal["hang", "returned", "raised"]

#: Error texts that say a worker is gone: its graph cannot be recorded any more.
_GONE = ("RPCErr", "ran for more than set timeout", "Connection reset", "connection closed",
         "Connection closed", "shutdown", "EOF", "Broken pipe", "pipe closed",
         "Failed to respond", "unreachable")


def worker_gone(text: str) -> bool:
    """Whether PyTorch's error says a worker is gone or an RPC timed out."""
    return any(part in text for part in _GONE)


def _seconds(s: float) -> str:
    return f"{s:.1f} s" if s >= 1 else f"{s * 1000:.0f} ms"


def watched_meta(state: State, waited: float, timeout: float, gradients: dict[str, Any],
                 error: str | None) -> dict[str, Any]:
    """The trace's ``meta.traced.watched``: what a watched context can tell."""
    out: dict[str, Any] = {"state": state, "hang_timeout_s": timeout,
                           "recorded_after_s" if state == "hang" else "seconds":
                               round(waited, 3),
                           "gradients": dict(sorted(gradients.items())),
                           "order": "not observed: no hooks ran on a watched backward"}
    if error is not None:
        out["error"] = error
    return out


def _leaves(trace: Trace) -> tuple[list[str], list[str]]:
    """``(with a gradient so far, without)``: the leaves, by name, from the watch's record."""
    grads = (trace.meta.traced or {}).get("watched", {}).get("gradients") or {}
    have: list[str] = []
    lack: list[str] = []
    for n in trace.nodes:
        if n.kind == "accumulate_grad":
            (have if n.id in grads else lack).append(n.var or f"{short_name(n.name)} on "
                                                     f"{n.worker}")
    return have, lack


def _rpcs(trace: Trace, limit: int = 3) -> str:
    calls = [f"{c.api}({c.func})" + (f" at {c.site}" if c.site else "") for c in trace.rpc_calls]
    more = f" and {plural(len(calls) - limit, 'more')}" if len(calls) > limit else ""
    return "; ".join(calls[:limit]) + more if calls else "none recorded"


def slow_text(trace: Trace, timeout: float) -> str:
    """A backward past its deadline whose graph does not hang in FAST mode: what the watch's
    recording can tell."""
    have, lack = _leaves(trace)
    grads = (f"leaves with a gradient so far: {', '.join(have[:6]) or 'none'}; still without: "
             f"{', '.join(lack[:6]) or 'none'}")
    return (f"PyTorch's backward has not returned after {timeout:g} s, and the graph does not "
            "hang in FAST mode (the replay of its graph, recorded then, completes): a worker is "
            f"slow or a message is lost; workers: {', '.join(trace.workers)}; {grads}; its "
            f"RPCs, whose sends may still wait (no hooks ran, so which cannot be told): "
            f"{_rpcs(trace)}")


def deadline_lines(me: str, step: int, timeout: float, trace: Trace, replay: Any) -> list[str]:
    """What the watch says live when a backward passes its deadline."""
    from distviz.tracing import report

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


def returned_text(me: str, step: int, seconds: float, timeout: float, replay: Any) -> str:
    """What the watch says when a backward it took at its deadline returns."""
    if replay.outcome == "hang":
        return (f"{me} context {step}: PyTorch's backward returned after {_seconds(seconds)}, "
                "although the replay of its graph, recorded after the time-out, hangs; the "
                "graph was recorded while the backward ran (not compared)")
    return (f"{me} context {step}: PyTorch's backward returned after {_seconds(seconds)}, later "
            f"than --hang-timeout ({timeout:g} s): slow, not a hang")


def unrecorded_text(me: str, step: int, timeout: float, exc: BaseException) -> str:
    """The watch could not record a backward past its deadline."""
    return (f"{me} context {step}: PyTorch's backward has not returned after {timeout:g} s; "
            f"its graph could not be recorded ({first_line(exc)}); the program goes on")


def raised_note(step: int, seconds: float, text: str, why: str | None = None) -> str:
    """The summary's note on a watched backward that raised and was not recorded."""
    because = f" ({why})" if why else " (a worker is gone, or the context with it)"
    return (f"context {step} was in flight: PyTorch's backward raised after {_seconds(seconds)}: "
            f"{text}; its graph was not recorded{because}")


def watched_row(row: ContextRow, trace: Trace, replay: Any, state: State, waited: float,
                timeout: float, error: str | None) -> ContextRow:
    """``row`` (``report.row`` of the watch's trace, or its previous row) worded for
    ``state``, with the exit code and the pytest category of its outcome: only the outcome is
    compared (see the module docstring), so nothing here ever differs."""
    out = _worded(row, trace, replay, state, waited, timeout, error)
    return replace(out, exit_code=outcome_code(out.outcome),
                   category=pytest_category(out.agreement, out.outcome, out.predicted, out.real))


def _worded(row: ContextRow, trace: Trace, replay: Any, state: State, waited: float,
            timeout: float, error: str | None) -> ContextRow:
    base = replace(row, watched=True, predicted=replay.outcome)
    if state == "hang" and replay.outcome == "hang":
        return replace(base, outcome="hang", real="hang", agreement="agrees",
                       agreement_text=(f"PyTorch's backward had not returned after {timeout:g} "
                                       "s and the replay of its graph, recorded then, hangs "
                                       "(watched: no per-node order to compare)"),
                       explanation=replay.hang.summary if replay.hang is not None
                       else "no worker can make progress")
    if state == "hang":
        text = slow_text(trace, timeout)
        return replace(base, outcome="hang", real="hang", agreement="not compared",
                       agreement_text=text, explanation=text)
    if state == "returned":
        text = returned_text(trace.initiator, row.index, waited, timeout, replay).split(": ", 1)[1]
        return replace(base, outcome="completed", real="completed", agreement="not compared",
                       agreement_text=f"{text} (watched: nothing compared)", explanation=None)
    if row.watched and row.real == "hang" and replay.outcome == "hang":   # PyTorch's time-out
        return replace(base, agreement_text=f"{row.agreement_text}; after the hang PyTorch "
                       f"raised: {error} (a consequence of the hang, not a different outcome)")
    return replace(base, outcome="error", real="error", agreement="not compared",
                   agreement_text="watched: PyTorch's backward raised; nothing else compared",
                   explanation=raised_text(trace, replay, error or "an error"))


def raised_text(trace: Trace, replay: Any, error: str) -> str:
    """A watched backward that raised, and where the replay of its graph puts the error."""
    from distviz.tracing import report

    if replay.outcome == "error":
        return (f"the backward raised: {error}; the replay of its graph, recorded after the "
                f"error, predicts it: {report.predicted_error(trace, replay)}")
    if replay.outcome == "hang":
        return (f"the backward raised: {error}; the replay of its graph, recorded after the "
                f"error, hangs: {replay.hang.summary if replay.hang is not None else ''}")
    return (f"the backward raised: {error}; the replay of its graph completes, so the error "
            "does not come from FAST mode's rules (the program's own code, or a worker)")


# -- every backward, counted -------------------------------------------------------------------

def initiators(events: list[Event]) -> dict[str, BackwardStats]:
    """Every process's ``backwards`` statistics, merged by initiator name."""
    out: dict[str, BackwardStats] = {}
    for ev in events:
        if ev.kind != "backwards" or ev.stats is None:
            continue
        try:
            stats = BackwardStats.from_json(ev.stats)
        except (KeyError, ValueError, TypeError):
            continue
        name = stats.worker or ev.worker or f"pid {ev.pid}"
        if name in out:
            out[name].merge(stats)
        else:
            out[name] = stats
    return dict(sorted(out.items()))


def backwards_json(events: list[Event]) -> dict[str, Any]:
    """``index.json``'s ``backwards``: per initiator, ``BackwardStats.summary``."""
    return {name: s.summary() for name, s in initiators(events).items()}


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    return f"{seconds * 1000:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def backward_lines(events: list[Event]) -> list[str]:
    """The summary's lines: one per initiator, then the backwards that raised."""
    out: list[str] = []
    for name, s in initiators(events).items():
        worst = sorted(s.slowest, reverse=True)
        slow = ", ".join(f"{step} ({_ms(sec)})" for sec, step in worst)
        out.append(f"{name}: {plural(s.calls, 'backward call')}: median {_ms(s.quantile(0.5))}, "
                   f"95th percentile {_ms(s.quantile(0.95))}, max {_ms(s.max_s)}; slowest by "
                   f"step: {slow}")
        if s.raised:
            first = "; ".join(f"step {step}: {text}" for step, text in s.errors)
            out.append(f"{name}: {plural(s.raised, 'backward')} raised ({first})")
    return out
