"""One recorded context, from ``dist_autograd.backward`` to its trace file (torch side).

For a context that ``--contexts`` selects (``distviz.tracing.hooks.dispatch.traced_backward``, which
replaces ``torch.distributed.autograd.backward`` in a traced process, hands it to
``record_and_observe``), this module:

1. records the whole distributed graph of the context (``assemble``: ``recorder.gather``
   reaches the other workers over the program's own RPC agent; each worker adds its module
   parameter names and the call sites of the RPCs it made, ``assemble.record_piece``);
2. replays FAST mode on it (pure Python) and, when the replay predicts a hang, prints why at
   once and stops the program (``--on-hang stop``) or lets the real backward run (the trace
   then has no ``real`` yet: it runs);
3. runs PyTorch's real backward in the program's thread with distviz's pre-hooks on every
   node of every worker of the context, a watchdog declaring it hung after ``--hang-timeout``
   (an observed hang stays the outcome; what PyTorch raises later, with ``--on-hang
   continue``, is kept as its consequence, ``real["after_hang"]``);
4. collects the hook events and ``get_gradients`` of every worker, compares them with the
   replay, writes the trace (atomically, to a file no other process writes) and a row for the
   session's summary, then returns or re-raises exactly what PyTorch did.

A later ``dist_autograd.backward`` in a recorded context (``retain_graph=True`` on the one
before, or the mistake of leaving it out) goes through the same steps (``record_again``): the
graph is recorded again as it is now (every node keeps its id; the workers keep their node
references from one pass to the next, until the context ends), the trace holds every pass so
far, the replay runs them all, and the real pass is observed and appended to ``real``. The
trace file is rewritten each time, so it ends with the context's last pass. Passes after one
that raised or hung run unrecorded (the replay stops at a failed pass; PyTorch's context
lives on), and the summary says so.

Every other backward is watched (``distviz.tracing.hooks.dispatch``); this module is imported at the
first context recorded in full.
"""

from __future__ import annotations

import os
import threading
import time
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from distviz import limits
from distviz.frames import own_frames, site_text
from distviz.outcome import RealOutcome
from distviz.recorder import contexts
from distviz.recorder.contexts import BACKWARD
from distviz.runner import observe_real
from distviz.runner.observe_real import Passes
from distviz.trace import NodeKind, Trace
from distviz.trace.sections import Real, RealEvent
from distviz.tracing import callsites
from distviz.tracing.config import TraceConfig, current_test
from distviz.tracing.recording import capture
from distviz.tracing.recording.assemble import record_trace
from distviz.tracing.shared import journal, process, writer
from distviz.tracing.shared.fanout import in_background, on_all
from distviz.tracing.shared.live import say
from distviz.tracing.shared.process import Process
from distviz.tracing.shared.stop import stop_program
from distviz.words import error_line, first_line

if TYPE_CHECKING:  # pragma: no cover
    from distviz.replay.result import Replay

# The replay and the verdict are imported at the first recorded context; this module itself is
# imported then too (``distviz.tracing.hooks.dispatch``): every process of a traced program is
# watched, few record anything in full. The real backward is observed by the runner's observer
# (``distviz.runner.observe_real``), the one ``distviz run`` uses.


def context_ended(proc: Process, context_id: int) -> None:
    """The program leaves ``with dist_autograd.context()``: drop the node references kept for
    the context's later passes (recorded contexts only), here at once and on the other
    workers at their next recording (``recorder.sweep``: PyTorch has released the context
    there by then), with no RPC round. An explicit round still goes, from the helper thread
    and without waiting for it, when no later recording may come (``--contexts first`` after
    the first) or when the last pass kept its graph (``retain_graph=True``: the nodes still
    hold the forward's saved tensors): nothing the program sees depends on when a worker lets
    go of nodes its context no longer holds, but memory does."""
    run = proc.runs.pop(context_id, None)
    proc.ended.pop(context_id, None)
    if run is None:
        return
    contexts.forget(context_id)
    if run.trace.passes[-1].retain_graph or not proc.records_later(run.index):
        in_background(_forget_quietly, run.trace, run.me)


def _forget_quietly(trace: Trace, me: str) -> None:
    try:
        _forget(trace, me)
    except Exception:  # noqa: BLE001 - RPC already shut down: nothing is left to drop
        pass




# -- the real backward -------------------------------------------------------------------------

@dataclass
class Run:
    """One context being observed: what the watchdog and the program's thread share."""

    config: TraceConfig
    trace: Trace
    replay: Replay
    path: Path | None
    index: int
    me: str
    seconds: dict[str, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    finished: bool = False
    hung: bool = False
    keep: bool = False       # follow the context's later passes (``distviz trace``)
    sites: list[str | None] = field(default_factory=list)   # where each pass was called
    passes: Passes = field(default_factory=Passes)       # the earlier passes, and the running one
    events: list[RealEvent] = field(default_factory=list)     # earlier passes'
    #: held while the trace is written; ``writes`` counts the writes done, ``queued`` the
    #: final writes given to the writer thread (``write_early``, ``write_soon``)
    write_lock: threading.Lock = field(default_factory=threading.Lock)
    writes: int = 0
    queued: int = 0

    def collect(self, passes: Passes) -> None:
        """Fill ``trace.real`` from every worker's hook events and gradients
        (``observe_real.collect``: the same section ``distviz run`` writes; times on the
        initiator's ``CLOCK_MONOTONIC``)."""
        keep = self.keep and passes.outcome == "completed"
        real = observe_real.collect(
            self.trace.context_id, self.trace.workers, self.me, passes, self.config.hang_timeout,
            {n.id for n in self.trace.nodes if n.kind == NodeKind.SEND}, earlier=self.events,
            forget=not keep, keep=keep, call=on_all, summarized=True)
        self.trace.real = Real.from_json(real.to_json())

    def write(self, detail: str | None = None) -> journal.ContextRow:
        """Compare with the replay, save the trace and log its row; returns the row.
        ``detail`` is the backward's full error text, when it raised."""
        with self.write_lock:
            return self._save(detail, self.seconds)

    def _save(self, detail: str | None, seconds: dict[str, float]) -> journal.ContextRow:
        """``write``, with ``write_lock`` held."""
        self._stamp(seconds)
        return self._written(self.trace, self.replay, self.path, seconds, detail)

    def _written(self, trace: Trace, replay: Replay, path: Path | None,
                 seconds: dict[str, float], detail: str | None = None,
                 test: str | None = None) -> journal.ContextRow:
        """``trace`` (stamped) judged, saved and its row logged, with ``write_lock`` held."""
        row = capture.row(trace, replay, path, self.index, seconds, detail)
        capture.save(self.config, trace, path, row, self.me, test=test)
        self.writes += 1
        return row

    def _stamp(self, seconds: dict[str, float]) -> None:
        sites = {"backward_sites": list(self.sites)} if len(self.trace.passes) > 1 else {}
        capture.stamp(self.trace, self.index, seconds, **sites)

    def write_early(self) -> None:
        """The graph saved before the backward runs, so that it is kept if the process dies
        in the backward: written by the writer thread while the program's thread is in
        PyTorch's backward (which waits on the other workers with the GIL released), not
        before it. It costs the program's thread about half of a context's CPU (the verdict
        row, the JSON, the file) when written there. A later write that comes first (the
        backward returned, or the watchdog's) makes it moot: it is then skipped."""
        writes, queued, seconds = self.writes, self.queued, dict(self.seconds)
        self._stamp(seconds)    # now: what is said before the backward reads ``meta.traced``

        def early() -> None:
            try:
                with self.write_lock:
                    if (self.writes, self.queued) == (writes, queued):   # nothing newer yet
                        self._save(None, seconds)
            except Exception as exc:  # noqa: BLE001 - the program's backward goes on
                say(f"{self.me} context {self.index}: the graph could not be saved before "
                    f"the backward: {type(exc).__name__}: {first_line(exc)}")
        writer.submit(early)

    def write_soon(self) -> None:
        """The write after a pass that completed in time, on the writer thread: the program's
        next step runs while the verdict, the JSON, the file and the journal's line are made
        (``distviz.tracing.shared.writer`` says when they are waited for). The trace, replay
        and seconds are this pass's, taken now; a ``differs`` is said from the writer. Only
        for the contexts ``distviz trace`` records on its own (``keep``): the Python API
        (``distviz.backward``) returns the trace, whose file its caller may read at once."""
        trace, replay, path, index = self.trace, self.replay, self.path, self.index
        seconds, test = dict(self.seconds), current_test()
        self._stamp(seconds)
        self.queued += 1

        def final() -> None:
            try:
                with self.write_lock:
                    row = self._written(trace, replay, path, seconds, test=test)
            except Exception as exc:  # noqa: BLE001 - the program goes on
                say(f"{self.me} context {index}: the trace could not be saved: "
                    f"{type(exc).__name__}: {first_line(exc)}")
                return
            if row.agreement == journal.VerdictStatus.DIFFERS:
                say(f"{self.me} context {index}: {row.explanation or row.agreement_text}")
                say(f"trace: {path}")
        writer.submit(final)

    def on_timeout(self) -> None:
        """The watchdog: the backward did not return within ``--hang-timeout``."""
        with self.lock:
            if self.finished:
                return
            self.hung = True
            timeout = self.config.hang_timeout
            self.collect(self.passes.running("hang", f"pass {len(self.trace.passes)}: "
                                             "dist_autograd.backward did not return within "
                                             f"{timeout:g} s"))
            row = self.write()
        stop = self.config.on_hang == "stop"
        waited = f"PyTorch's backward has not returned after {timeout:g} s"
        if self.replay.outcome == "hang":   # explained when it was predicted: said once
            said = f"{waited}: it hangs, as the replay predicts."
        else:   # the verdict's sentence: slow or hung, a time-out cannot tell
            said = row.explanation or f"{waited}."
        say(f"{self.me} context {self.index}: {said}")
        say(f"trace: {self.path}" + ("" if stop else
                                     "; the program keeps running (--on-hang continue)"))
        if stop:
            stop_program(self.config, f"{self.me} context {self.index} hangs", row.explanation)

    def after_hang(self, error: BaseException) -> None:
        """What PyTorch raised after the observed hang (its own RPC time-out, a worker gone):
        the consequence of the hang, kept in ``real["after_hang"]``; the outcome stays a hang."""
        text = error_line(error)
        assert self.trace.real is not None
        self.trace.real["after_hang"] = text
        self.write()
        _forget(self.trace, self.me)
        say(f"{self.me} context {self.index}: after the hang, PyTorch's backward raised: "
            f"{text}")


def _forget(trace: Trace, me: str) -> None:
    on_all(trace.workers, me, contexts.forget, trace.context_id)


def prepare(config: TraceConfig, context_id: int, roots: Any, retain_graph: bool, index: int,
            frame: types.FrameType | None, names: list[tuple[Any, Any]] | None = None,
            path: Path | None = None) -> Run | None:
    """Record ``context_id`` and replay it; ``None`` when it cannot be recorded (logged).

    ``path`` is the trace file (default: a new file in ``config.out_dir``).
    """
    from distviz.tracing.recording import report

    try:
        got = capture.capture(lambda: record_trace(
            context_id, [roots] if isinstance(roots, torch.Tensor) else list(roots),
            retain_graph, frame, names), file=path or capture.Claim(config, index), catch=True)
    except Exception as exc:  # noqa: BLE001 - bad roots or no context: PyTorch says it best
        callsites.drop(context_id)
        journal.append(config.session_dir, journal.Event(
            kind=journal.EventKind.NOT_RECORDED, pid=os.getpid(),
            worker=process.PROCESS.worker if process.PROCESS else None,
            message=report.not_recorded(context_id, exc)))
        return None
    if got.error is not None:   # a bug in the replay, not the program's: raised
        raise got.error
    assert got.replay is not None and got.path is not None
    return Run(config=config, trace=got.trace, replay=got.replay, path=got.path, index=index,
                me=got.trace.initiator, seconds=got.seconds,
                sites=[site_text(own_frames(frame, 1))])



def record_again(run: Run, roots: Any, retain_graph: bool, frame: types.FrameType | None
                 ) -> None:
    """A later backward of a recorded context: record the graph again (the program may have
    run more of the forward since), replay every pass so far, then observe this one and
    rewrite the context's trace (``run_backward``). Raises what PyTorch raised."""
    from distviz.tracing.recording import report

    n = len(run.trace.passes) + 1
    root_list = [roots] if isinstance(roots, torch.Tensor) else list(roots)
    why: str | None = None
    trace = run.trace
    got: capture.Captured | None = None
    if n > limits.TRACE_MAX_PASSES:
        why = (f"distviz records at most {limits.TRACE_MAX_PASSES} passes of a context (each "
               "pass replays all the earlier ones); the later ones run unrecorded")
    else:
        new: list[str | None] = []

        def same_rpcs(again: Trace) -> bool:
            new.append(report.new_rpcs(run.trace, again))
            return new[0] is None

        try:
            got = capture.capture(lambda: record_trace(
                run.trace.context_id, root_list, retain_graph, frame, earlier=run.trace.passes),
                seconds=run.seconds, replay=same_rpcs)
        except Exception as exc:  # noqa: BLE001 - bad roots: PyTorch says it best
            why = first_line(str(exc))
        else:
            trace, why = got.trace, new[0]
    if why is not None or got is None or got.replay is None:
        _stop_following(run, "")
        _note(run, f"context {run.index}: pass {n} was not recorded: {why}")
        _forget(trace, run.me)
        BACKWARD(run.trace.context_id, roots, retain_graph=retain_graph)
        return
    run.trace, run.replay = got.trace, got.replay
    run.sites.append(site_text(own_frames(frame, 1)))
    run.finished = run.hung = False
    run_backward(run, roots, retain_graph)


def _note(run: Run, message: str) -> None:
    journal.append(run.config.session_dir, journal.Event(
        kind=journal.EventKind.NOT_RECORDED, pid=os.getpid(), worker=run.me, message=message))


def _stop_following(run: Run, why: str) -> None:
    """Later passes of ``run``'s context run unrecorded; the first of them logs ``why``."""
    proc = process.PROCESS
    if proc is not None and run.keep:
        proc.runs.pop(run.trace.context_id, None)
        proc.ended[run.trace.context_id] = why


def _after_pass(run: Run, outcome: RealOutcome) -> None:
    """Keep following ``run``'s context after a completed pass; else say why not."""
    proc = process.PROCESS
    if not run.keep or proc is None:
        return
    cid, n = run.trace.context_id, len(run.trace.passes)
    if outcome != "completed":
        what = {"error": "raised", "hang": "hung", "skipped": "was predicted to hang"}
        _stop_following(run, f"context {run.index}: the passes after pass {n} were not "
                             f"recorded: pass {n} {what.get(outcome, outcome)}, and the replay "
                             "stops at a failed pass")
        return
    run.events = run.trace.real.observed() if run.trace.real is not None else []
    proc.runs[cid] = run


def run_backward(run: Run, roots: Any, retain_graph: bool) -> Trace:
    """Explain a predicted hang (and stop, or raise ``HangPredicted``), else save the graph;
    then observe the real backward. Returns the trace; raises what PyTorch raised."""
    from distviz.tracing.recording import report

    trace, rp, me = run.trace, run.replay, run.me
    if rp.outcome == "hang":
        say(f"{me} context {run.index}: the replay predicts that this backward hangs.")
        say(report.hang_text(trace, rp))
        _stop_following(run, "")
        if run.config.on_hang == "stop":
            trace.real = Real.skipped("the replay predicts a FAST-mode hang")
            row = run.write()
            say(f"trace: {run.path}")
            _forget(trace, me)
            stop_program(run.config, f"{me} context {run.index}: the replay predicts a hang",
                         row.explanation)
        trace.real = None   # running: the graph is kept even if the process dies in it
        run.write()
        say(f"trace: {run.path}")
        say("--on-hang continue: running PyTorch's backward anyway")
    else:
        run.write_early()     # the graph is kept even if the process dies in the backward
        if rp.outcome == "error":
            say(f"{me} context {run.index}: the replay predicts that "
                f"{_which_pass(trace)} raises: {report.predicted_error(trace, rp)}")
    _observe(run, roots, retain_graph)
    return trace


def record_and_observe(config: TraceConfig, context_id: int, roots: Any, retain_graph: bool,
                       index: int, frame: types.FrameType | None) -> Trace | None:
    """Record, predict, observe and save one context; see the module docstring.

    Returns the trace (with ``real``), or ``None`` when the context could not be recorded (the
    backward then ran as PyTorch's own). Raises what PyTorch's backward raised, and
    ``HangPredicted`` for a predicted hang when there is no ``distviz trace`` to stop the
    program.
    """
    run = prepare(config, context_id, roots, retain_graph, index, frame)
    if run is None:
        BACKWARD(context_id, roots, retain_graph=retain_graph)
        return None
    run.keep = True
    return run_backward(run, roots, retain_graph)


def _which_pass(trace: Trace) -> str:
    return "this backward" if len(trace.passes) == 1 else f"pass {len(trace.passes)}"


def _observe(run: Run, roots: Any, retain_graph: bool) -> None:
    """Run the real backward in the program's thread, with hooks everywhere and a watchdog
    (``observe_real.watch``); save; re-raise."""
    trace, me = run.trace, run.me
    t = time.perf_counter()
    error = capture.timed(run.seconds, "backward", lambda: observe_real.watch(
        lambda: BACKWARD(trace.context_id, roots, retain_graph=retain_graph),
        run.config.hang_timeout, run.on_timeout, run.passes))
    with run.lock:
        run.finished = True
        if run.hung and error is not None:
            run.after_hang(error)
            _after_pass(run, "hang")
            raise error
        if run.hung:
            say(f"{me} context {run.index}: PyTorch's backward returned after "
                f"{time.perf_counter() - t:.1f} s, later than --hang-timeout: not a hang")
        run.collect(run.passes)
        row = None
        if error is None and not run.hung and run.keep:     # ``distviz trace``'s own contexts
            run.write_soon()
        else:
            row = run.write(str(error) if error is not None else None)
        _after_pass(run, run.passes.outcome)
    if row is not None and (row.outcome == "error"
                            or row.agreement == journal.VerdictStatus.DIFFERS):
        say(f"{me} context {run.index}: {row.explanation or row.agreement_text}")
        say(f"trace: {run.path}")
    if error is None:
        _zero_gradients(run)
    if error is not None:
        raise error


def _zero_gradients(run: Run) -> None:
    """After a completed backward: name the leaves PyTorch's context holds all-zero gradients
    for (``report.zero_notes``, ``journal.ZERO_GRADIENT``) and the parameters on its workers
    it holds none for (``report.absent_notes``, ``journal.NO_GRADIENT``), with ``distviz
    why``'s answer, live and in the session's log."""
    from distviz.tracing.recording import report

    if run.trace.real is None or run.trace.real.outcome != "completed":
        return
    try:
        found = [(journal.ZERO_GRADIENT, t) for t in report.zero_notes(run.trace, run.replay)]
        found += [(journal.NO_GRADIENT, t) for t in report.absent_notes(run.trace)]
    except Exception as exc:  # noqa: BLE001 - the program goes on regardless
        say(f"{run.me} context {run.index}: could not explain its gradients: "
            f"{type(exc).__name__}: {exc}")
        return
    for kind, text in found:
        said = f"context {run.index}: {text}"
        say(f"{run.me}: {said}")
        journal.append(run.config.session_dir, journal.Event(
            kind=kind, pid=os.getpid(), worker=run.me, message=said))
