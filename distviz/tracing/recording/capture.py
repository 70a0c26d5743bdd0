"""The one capture pipeline: a context's graph from the workers to its trace file and its row.

Its steps, in order; a context recorded in full (``observe``), a watched one past its deadline
or raised (``distviz.tracing.watch.late``) and a snapshot (``distviz.tracing.snapshot.take``)
each go through them:

1. ``timed(seconds, "record", ...)``: record the graph, timed;
2. ``replayed(trace, seconds)``: replay it, timed;
3. ``claim(config, initiator, index)``: a trace file no other process writes (a snapshot names
   its own, in its snapshot's folder);
4. ``stamp(trace, index, seconds, ...)``: ``meta.traced``, what the trace says of the process
   that made it (a snapshot writes ``meta.snapshot`` instead);
5. ``row(...)``: the context's row for the summary, from the one verdict (``report.row``);
6. ``save(config, trace, path, row, worker)``: the verdict's words into ``meta.traced``, the
   file written atomically (``write``), the row in the session's journal (a snapshot only
   ``write``s its trace, before it replays it, and logs no row).

Light: the replay and the verdict are imported at the first ``replayed`` or ``row`` (a watched
process imports this module only when a backward is late or raised).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

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


def replayed(trace: Trace, seconds: dict[str, float] | None = None) -> Replay:
    """The replay of ``trace`` (its time added to ``seconds["replay"]``)."""
    from distviz.replay import replay

    return timed(seconds if seconds is not None else {}, "replay", lambda: replay(trace))


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
         worker: str) -> None:
    """The verdict's words into ``meta.traced``, the trace written to ``path`` (none: not
    written) and ``row`` appended to the session's journal."""
    traced = trace.meta.traced
    assert traced is not None, "stamp the trace before it is saved"
    traced["agreement"] = row.agreement_text
    if path is not None:
        write(path, trace)
    journal.append(config.session_dir, journal.Event(
        kind=journal.EventKind.CONTEXT, pid=os.getpid(), worker=worker, row=row))
