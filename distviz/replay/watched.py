"""What a watched context is, and the sentences the judge says of it (pure, torch-free).

A watched context (``distviz.tracing.watch``) is recorded only when something happened in it:
its backward passed ``--hang-timeout`` (``hang``), returned after that (``returned``) or
raised (``raised``). Its graph was recorded while (or after) PyTorch's backward ran, with no
hooks on it: the trace has no per-node order, only the graph, the gradients accumulated when
it was recorded (``meta.traced.watched.gradients``) and how PyTorch's backward ended
(``Watched``). The judge (``distviz.replay.verdict.judge`` with ``watched=``) compares only the
outcome; the sentences it needs from the trace and the replay are here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from distviz.replay.result import Replay
from distviz.trace import Trace, short_name
from distviz.words import plural

__all__ = ["Watched", "WatchedState", "returned_sentence", "seconds_text", "slow_text"]

#: What happened in a watched context: past its deadline, returned after it, or raised.
WatchedState = Literal["hang", "returned", "raised"]


@dataclass(frozen=True, slots=True)
class Watched:
    """How PyTorch's backward of a watched context ended, as the watch saw it: ``state``;
    ``seconds`` it had run when recorded (``hang``) or when it ended; ``timeout``, the
    ``--hang-timeout``; ``error``, PyTorch's error text (``raised``); ``hung``: the watch had
    recorded it as a hang before it raised (an RPC time-out after the hang)."""

    state: WatchedState
    seconds: float
    timeout: float
    error: str | None = None
    hung: bool = False


def seconds_text(s: float) -> str:
    """``2.5 s``, or ``400 ms`` under a second."""
    return f"{s:.1f} s" if s >= 1 else f"{s * 1000:.0f} ms"


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


def returned_sentence(seconds: float, timeout: float, replay: Replay) -> str:
    """A backward the watch took at its deadline returned: slow, not a hang (or a hang some
    worker got out of, said as it is)."""
    if replay.outcome == "hang":
        return (f"PyTorch's backward returned after {seconds_text(seconds)}, although the replay "
                "of its graph, recorded after the time-out, hangs; the graph was recorded while "
                "the backward ran (not compared)")
    return (f"PyTorch's backward returned after {seconds_text(seconds)}, later than "
            f"--hang-timeout ({timeout:g} s): slow, not a hang")
