"""The one capture pipeline: a context's graph from the workers to its trace file and its row.

``capture(record, ...)`` is the pipeline's first half, the one function a context recorded in
full (``observe``), a watched one past its deadline or raised (``distviz.tracing.watch.late``)
and a snapshot (``distviz.tracing.snapshot.take``) call; their options say what differs:

1. record the graph (``record()``), timed into ``seconds["record"]``; what it raises is
   raised (PyTorch's error: no such context, a worker that does not answer);
2. ``write_first``: a snapshot claims its file and writes the trace before it replays it (the
   graph is kept even when the replay fails);
3. replay it, timed into ``seconds["replay"]`` (``replay``: no, or only for a trace a test
   accepts, such as one with a pass or one with no new RPC; ``catch``: what the replay raises is
   ``Captured.error``, not raised);
4. ``file``: the trace file, a ``Path`` or a ``Claim`` of one no other process writes, claimed
   after a replay that did not raise (a watched context claims when its budget lets it write:
   ``claim``).

The rest follows what happened to the context, so each caller takes it when it knows:
``stamp(trace, index, seconds, ...)`` (``meta.traced``), ``row(...)`` (the context's row, from
the one verdict: ``report.row``), ``save(config, trace, path, row, worker)`` (the verdict's words
into ``meta.traced``, the file written atomically, the row in the session's journal).

Light: the replay and the verdict are imported at the first replay or ``row`` (a watched
process imports this module only when a backward is late or raised).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from distviz.tracing.config import TraceConfig, current_test
from distviz.tracing.shared import journal

if TYPE_CHECKING:  # pragma: no cover
    from distviz.replay.result import Replay
    from distviz.trace import Trace

T = TypeVar("T")


def timed(seconds: dict[str, float], key: str, fn: Callable[[], T]) -> T:
    """``fn()``, its time in seconds added to ``seconds[key]`` (rounded to 0.1 ms) when it
    returns; raises what ``fn`` raised."""
    t = time.perf_counter()
    out = fn()
    seconds[key] = round(seconds.get(key, 0.0) + time.perf_counter() - t, 4)
    return out


@dataclass(frozen=True)
class Claim:
    """A trace file to claim in ``config``'s output folder for ``initiator``'s context
    ``index`` (default: the trace's initiator), no other process writing it."""

    config: TraceConfig
    index: int
    initiator: str | None = None


class Captured(NamedTuple):
    """A captured context: its trace, its replay (``None``: not replayed, or the replay
    raised ``error``), its trace file (``None``: not claimed yet) and each step's seconds."""

    trace: Trace
    replay: Replay | None
    path: Path | None
    seconds: dict[str, float]
    error: Exception | None = None


def capture(record: Callable[[], Trace], *, seconds: dict[str, float] | None = None,
            file: Path | Claim | None = None, write_first: bool = False,
            replay: bool | Callable[[Trace], bool] = True, catch: bool = False) -> Captured:
    """Record a context's graph, replay it and find its trace file, in the pipeline's order
    (the module docstring). ``seconds`` gets each step's time (a new dict by default).
    Raises what ``record`` raises, and what the replay raises unless ``catch``."""
    times: dict[str, float] = {} if seconds is None else seconds
    trace = timed(times, "record", record)
    path = None if file is None or isinstance(file, Claim) else file
    if write_first:
        path = path or _claim(file, trace)
        write(path, trace)
    made: Replay | None = None
    error: Exception | None = None
    if replay if isinstance(replay, bool) else replay(trace):
        try:
            made = _replayed(trace, times)
        except Exception as exc:
            if not catch:
                raise
            error = exc
    if path is None and file is not None and error is None:
        path = _claim(file, trace)
    return Captured(trace, made, path, times, error)


def _claim(file: Path | Claim | None, trace: Trace) -> Path:
    assert isinstance(file, Claim), "write_first needs a file"
    return claim(file.config, file.initiator or trace.initiator, file.index)


def _replayed(trace: Trace, seconds: dict[str, float]) -> Replay:
    """The replay of ``trace``, its time added to ``seconds["replay"]``."""
    from distviz.replay import replay

    return timed(seconds, "replay", lambda: replay(trace))


def claim(config: TraceConfig, initiator: str, index: int) -> Path:
    """A trace file for ``initiator``'s context ``index`` that no other process writes
    (``journal.claim``)."""
    return journal.claim(config.out_dir, config.session_dir, initiator, index)


def stamp(trace: Trace, index: int, seconds: dict[str, float], **extra: Any) -> dict[str, Any]:
    """Set and return ``meta.traced``: this process, its command line, the context's number,
    what each step took, ``extra`` (a context's pass sites, a watched one's findings), and
    the pytest node id of the running test (``tracing.pytest_plugin``)."""
    traced: dict[str, Any] = {"pid": os.getpid(), "argv": list(sys.argv), "context": index,
                              "seconds": seconds, **extra}
    if current_test() is not None:
        traced["test"] = current_test()
    trace.meta["traced"] = traced
    return traced


def row(trace: Trace, replay: Replay, path: Path | None, index: int, seconds: dict[str, float],
        detail: str | None = None) -> journal.ContextRow:
    """The context's row from the one verdict (``report.row``); ``detail`` is the backward's
    full error text, when it raised."""
    from distviz.tracing.recording import report

    return report.row(trace, replay, str(path or ""), index, os.getpid(), seconds, detail)


def write(path: Path, trace: Trace) -> None:
    """``trace`` written to ``path`` atomically (``journal.write_trace``)."""
    journal.write_trace(path, trace.dumps())


def save(config: TraceConfig, trace: Trace, path: Path | None, row: journal.ContextRow,
         worker: str, test: str | None = None) -> None:
    """The verdict's words into ``meta.traced``, the trace written to ``path`` (none: not
    written) and ``row`` appended to the session's journal; ``test``: the pytest node id the
    row belongs to, when it is written after that test (default: the running test's)."""
    traced = trace.meta.traced
    assert traced is not None, "stamp the trace before it is saved"
    traced["agreement"] = row.agreement_text
    if path is not None:
        write(path, trace)
    if test is not None:
        row.test = test
    journal.append(config.session_dir, journal.Event(
        kind=journal.EventKind.CONTEXT, pid=os.getpid(), worker=worker, row=row, test=test))
