"""Runner, parent side: start one process per worker, drive the run, always tear down.

Workers are forked from a multiprocessing fork server that imports torch once (``import torch``
costs seconds; a fork costs milliseconds). Rendezvous goes through a file store in a private
temporary folder, and TensorPipe listens on the loopback interface only, so nothing binds
outside 127.0.0.1 and parallel runs never collide. The parent never imports torch.

Every run ends with every worker gone: on success, on error, on timeout and on Ctrl-C
(``finally``), and a worker whose parent dies exits by itself (its lifeline pipe closes).
Ctrl-C is held back while a process starts (``procs.ctrl_c_held``), so that nothing is half
made when it lands: multiprocessing's temporary folder, the fork server's pid, a worker not
yet in the run's list; the fork server and the workers start with SIGINT blocked.
"""

from __future__ import annotations

import multiprocessing as mp
import multiprocessing.connection as mpc
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing import forkserver, resource_tracker
from typing import Any

from distviz import limits
from distviz.errors import DistvizError, Interrupted, RunError, RunTimeout, ScenarioError
from distviz.outcome import Stop, StopKind
from distviz.runner.procs import ctrl_c_held, no_main_import, sigint_blocked
from distviz.runner.protocol import (
    Backward,
    ContextDone,
    Exited,
    FinalState,
    Finish,
    ForwardDone,
    PipeMessage,
    Ready,
    Result,
    TraceRecorded,
    TrainerDone,
    WorkerFailed,
    WorkerOptions,
    WorkerSpec,
    recv,
    send,
)
from distviz.runner.supervisor.collate import TrainingRun, scenario_info
from distviz.runner.worker.main import main as worker_main
from distviz.scenario import Scenario
from distviz.trace import Trace
from distviz.trace.contexts_file import Recording
from distviz.trace.sections import Real, Reference
from distviz.words import plural

PRELOAD = ["torch", "torch.distributed.rpc", "torch.distributed.autograd", "distviz.recorder.record_api",
           "distviz.runner.sandbox.rpc_proxy", "distviz.runner.worker.initiator",
           "distviz.runner.reference.plain", "distviz.runner.sandbox.namespace",
           "distviz.runner.gradients", "distviz.runner.sandbox.base",
           "distviz.runner.worker.session", "distviz.runner.worker.trainer",
           "distviz.runner.reference.local_training", "distviz.replay", "distviz.scenario"]

#: ``decide_backward(trace) -> (run, reason)``: whether to run the real backward.
Decide = Callable[[Trace], tuple[bool, str | None]]


@dataclass
class RunOptions:
    """How a scenario runs. Times are seconds; the defaults are in ``distviz.limits``."""

    interop_threads: int = 1
    hang_timeout: float = limits.HANG_TIMEOUT
    confirm_hang: bool = False
    startup_timeout: float = limits.STARTUP_TIMEOUT
    forward_timeout: float = limits.FORWARD_TIMEOUT
    shutdown_timeout: float = limits.SHUTDOWN_TIMEOUT
    rpc_timeout: float = limits.RPC_TIMEOUT
    max_numel: int = limits.DEFAULT_MAX_NUMEL
    max_steps: int = limits.DEFAULT_MAX_STEPS
    max_rpc_depth: int = limits.DEFAULT_MAX_RPC_DEPTH
    max_memory: int = limits.DEFAULT_MAX_MEMORY
    run_backward: bool = True
    reference: bool = True
    observe: bool = True
    keep_server: bool = False
    # slow the real backward down on purpose (``--inject-delay``): {"recv_s": seconds,
    # "slow": {worker: factor}}; see ``distviz.recorder.hooks.install_hooks``
    inject: dict[str, Any] = field(default_factory=dict)
    contexts: str = "all"

    def worker_options(self) -> WorkerOptions:
        """The part of the options every worker needs."""
        return WorkerOptions(hang_timeout=self.hang_timeout, rpc_timeout=self.rpc_timeout,
                             rpc_threads=limits.rpc_threads(self.max_rpc_depth),
                             max_numel=self.max_numel, max_steps=self.max_steps,
                             max_rpc_depth=self.max_rpc_depth, max_memory=self.max_memory,
                             reference=self.reference, observe=self.observe,
                             inject=self.inject, confirm_hang=self.confirm_hang,
                             contexts=self.contexts)


@dataclass
class RunResult:
    """What a run produced: a ``recording``, which may be partial (no real results) when
    ``error`` is set, and ``None`` when nothing was recorded.

    A plain scenario (a ``backward:`` key) gives a recording of one context
    (``Recording.single``: a version 1 trace on disk); a training scenario one context per
    recorded iteration, and ``stopped`` then says why distviz stopped the training early (a
    predicted or observed hang, a backward that raised), if it did."""

    recording: Recording | None = None
    error: DistvizError | None = None
    skipped_reason: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    exit_codes: dict[str, int | None] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)
    deaths: list[dict[str, Any]] = field(default_factory=list)
    abort_workers: bool = False
    tmpdir: str | None = None
    stopped: Stop | None = None

    @property
    def trace(self) -> Trace | None:
        """The recording's first context (a plain scenario's one trace), or ``None``."""
        rec = self.recording
        return rec.contexts[0] if rec is not None and rec.contexts else None


def _context() -> Any:
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def stop_server() -> None:
    """Stop the fork server (it is restarted by the next run)."""
    try:
        forkserver._forkserver._stop()  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - nothing to stop
        pass


def _kill_server() -> None:
    """Kill the fork server now (Ctrl-C while a worker starts; the next run starts another)."""
    pid = getattr(forkserver._forkserver, "_forkserver_pid", None)
    if pid:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def run_scenario(scenario: Scenario, options: RunOptions | None = None,
                 decide_backward: Decide | None = None,
                 progress: Callable[[str], None] | None = None) -> RunResult:
    """Run ``scenario`` (a validated ``distviz.scenario.Scenario``) on real RPC workers.

    Each worker gets the scenario value itself, never its path. ``decide_backward(trace) ->
    (run, reason)`` is asked after recording whether to run the real backward (the CLI skips
    it when the replay predicts a hang). Returns a ``RunResult``; run-time failures come back
    in ``RunResult.error`` (``RunError``, ``RunTimeout``, ``ScenarioError`` for bad roots,
    ``Interrupted`` for Ctrl-C), always after every worker is gone; ``recording`` then holds
    what was recorded before the failure, if anything.
    """
    options = options or RunOptions()
    result = RunResult()
    run = _ScenarioRun(scenario, options, result, decide_backward, progress or (lambda _msg: None))
    aborted = interrupted = False
    ctx = _context()
    try:
        with ctrl_c_held():  # the folder is made and known to the ``finally`` at once
            result.tmpdir = tmp = tempfile.mkdtemp(prefix="distviz-run-")
        run.start(ctx, "file://" + os.path.join(tmp, "rendezvous"))
        run.drive()
        _note_deaths(run.procs, run.workers, result)
        if run.training is not None:
            from distviz.runner.supervisor.reference_run import finish_training
            finish_training(ctx, scenario, options, run.training, result, run.say)
    except KeyboardInterrupt:
        interrupted = True
        result.error = Interrupted("interrupted by Ctrl-C; every worker was stopped")
        if run.training is not None:     # nothing recorded is lost: the contexts so far
            from distviz.runner.supervisor.reference_run import keep_partial
            keep_partial(scenario, run.training, result, run.drain)
    except BaseException:
        aborted = True
        raise
    finally:
        _teardown(run.procs, run.conns, run.lifelines, options, result, aborted)
        if result.tmpdir is not None:
            shutil.rmtree(result.tmpdir, ignore_errors=True)
        if not options.keep_server:
            if interrupted:
                _kill_server()  # it may be importing torch yet, with SIGINT blocked
            stop_server()
    result.timings["total"] = time.monotonic() - run.t_start
    return result


_DURING = {"start-up": "start-up", "forward": "the forward pass", "backward": "the backward pass",
           "done": "shutdown"}


class _ScenarioRun:
    """The parent's side of one run: the worker processes and their pipes, the phase
    (``start-up``, ``forward``, ``backward``, ``done``) and the deadline of that phase."""

    def __init__(self, scenario: Scenario, options: RunOptions, result: RunResult,
                 decide: Decide | None, say: Callable[[str], None]) -> None:
        self.scenario = scenario
        self.options = options
        self.result = result
        self.decide = decide
        self.say = say
        self.workers: list[str] = list(scenario.workers)
        self.procs: list[Any] = []
        self.conns: list[Any] = []
        self.lifelines: list[Any] = []
        self.t_start = time.monotonic()
        self.phase = "start-up"
        self.deadline = self.t_start + options.startup_timeout
        self.ready: set[int] = set()
        self.exited: set[int] = set()
        self.dead: set[int] = set()
        self.training: TrainingRun | None = (
            TrainingRun(trainers=scenario.trainers) if scenario.training else None)

    def start(self, ctx: Any, init_method: str) -> None:
        """Start one process per worker, each with its own pipe and lifeline.

        Ctrl-C is held back while a worker starts and is put in the run's lists (see
        ``ctrl_c_held``); it kills the fork server, which may be importing torch for seconds
        yet, so that the start ends at once."""
        self.say(f"starting {plural(len(self.workers), 'worker')}")
        worker_options = self.options.worker_options()
        with ctrl_c_held():
            # the fork server, and the workers it forks, start with SIGINT blocked (the
            # resource tracker, which unblocks SIGINT once it is started, first)
            resource_tracker.ensure_running()
            with sigint_blocked():
                forkserver.ensure_running()
        for rank, name in enumerate(self.workers):
            spec = WorkerSpec(rank=rank, workers=self.workers, scenario=self.scenario,
                              init_method=init_method,
                              interop_threads=self.options.interop_threads,
                              options=worker_options)
            with ctrl_c_held(then=_kill_server):
                parent_conn, child_conn = ctx.Pipe(duplex=True)
                life_r, life_w = ctx.Pipe(duplex=False)
                p = ctx.Process(target=worker_main, args=(child_conn, life_r, spec),
                                name=f"distviz-{name}", daemon=False)
                with no_main_import():
                    p.start()
                self.result.pids[name] = int(p.pid)
                child_conn.close()
                life_r.close()
                self.procs.append(p)
                self.conns.append(parent_conn)
                self.lifelines.append(life_w)

    def drive(self) -> None:
        """Handle messages and deaths until every worker is gone after the results, or the run
        fails (``result.error``), or a phase runs out of time."""
        conn_rank = {id(c): i for i, c in enumerate(self.conns)}
        sentinel_rank = {p.sentinel: i for i, p in enumerate(self.procs)}
        while not (self.phase == "done" and len(self.exited | self.dead) == len(self.procs)):
            waitables = [c for i, c in enumerate(self.conns) if i not in self.dead] + \
                [p.sentinel for i, p in enumerate(self.procs) if i not in self.dead]
            ready = mpc.wait(waitables, timeout=max(0.0, self.deadline - time.monotonic()))
            if not ready:
                self.timed_out()
                return
            for obj in ready:
                if obj in sentinel_rank:
                    stop = self.on_death(sentinel_rank[obj])
                else:
                    try:
                        msg = recv(obj)
                    except (EOFError, OSError):
                        continue
                    stop = self.on_message(conn_rank[id(obj)], msg)
                if stop:
                    return

    def drain(self) -> None:
        """Handle the messages the workers have sent already (after Ctrl-C: contexts they
        finished before it), without waiting for more."""
        for rank, conn in enumerate(self.conns):
            while rank not in self.dead and conn.poll(0):
                try:
                    msg = recv(conn)
                except Exception:  # noqa: BLE001 - gone, or a message Ctrl-C cut in two
                    break
                if isinstance(msg, ContextDone):
                    self.on_training(msg)

    def timed_out(self) -> None:
        if self.phase == "done":
            return  # shutdown took too long: teardown kills what is left
        what = {"start-up": "starting the workers"}.get(self.phase, _DURING[self.phase])
        text = f"timed out during {what}"
        if self.phase == "start-up":
            text += f" after {self.deadline - self.t_start:.0f} s"
        self.result.error = RunTimeout(text + "; every worker was stopped",
                                       path=self.scenario.path)

    def on_death(self, rank: int) -> bool:
        """A worker process ended: read what it said last, then judge; True: stop the run."""
        if rank in self.dead:
            return False
        conn = self.conns[rank]
        while rank not in self.exited and conn.poll(0):
            try:
                msg = recv(conn)
            except (EOFError, OSError):
                break
            if self.on_message(rank, msg):
                return True
        self.dead.add(rank)
        self.procs[rank].join(0.1)
        code = self.procs[rank].exitcode
        name = self.workers[rank]
        self.result.exit_codes[name] = code
        if rank in self.exited:
            return False
        if self.phase in ("backward", "done") and rank != 0:
            # the initiator sees the failure through PyTorch and reports it
            _add_death(self.result, name, code)
            return False
        if self.result.error is None:
            self.result.error = RunError(f"worker {name} died during {_DURING[self.phase]} "
                                         f"({_how(code)})", path=self.scenario.path)
        return True

    def on_message(self, rank: int, msg: PipeMessage) -> bool:
        """Handle one worker message; return True when the run must stop now."""
        if isinstance(msg, Ready):
            self.on_ready(rank, msg)
        elif isinstance(msg, Exited):
            self.exited.add(rank)
        elif isinstance(msg, WorkerFailed):
            self.result.error = _failure(msg, self.scenario.path)
            return True
        elif isinstance(msg, ForwardDone):
            self.result.timings["forward"] = msg.seconds
            self.say("recording the graph")
        elif isinstance(msg, TraceRecorded):
            self.on_recorded(msg)
        elif isinstance(msg, Result):
            return self.on_result(msg)
        elif isinstance(msg, (ContextDone, TrainerDone, FinalState)):
            return self.on_training(msg)
        return False

    def on_training(self, msg: ContextDone | TrainerDone | FinalState) -> bool:
        """A training run's messages; True when the run must stop now (a trainer stopped)."""
        tr = self.training
        assert tr is not None
        if isinstance(msg, FinalState):
            tr.final[msg.worker] = msg.params
            tr.served[msg.worker] = msg.served
            return False
        if isinstance(msg, ContextDone):
            tr.contexts.append((msg.trace, msg.info, msg.values))
            self.deadline = time.monotonic() + self.options.forward_timeout
            self.say(f"recorded context {len(tr.contexts)} ({msg.worker}, its context "
                     f"{msg.index})")
            return False
        tr.windows[msg.worker] = msg.windows
        tr.points[msg.worker] = msg.points
        tr.counts[msg.worker] = msg.contexts
        if msg.stop is not None:
            self.result.stopped = Stop(StopKind(msg.stop), msg.error or f"{msg.worker} stopped")
            self.result.abort_workers = True
            self.phase = "done"
            return True  # a hung backward never returns: tear down now
        if msg.error is not None and self.result.error is None:
            self.result.error = RunError(f"{msg.worker} failed: {msg.error}",
                                         path=self.scenario.path)
            return True
        if len(tr.windows) == len(tr.trainers):
            self.phase = "done"
            self.deadline = time.monotonic() + self.options.shutdown_timeout
            self.say("every trainer is done; collecting the final parameters")
            for rank, conn in enumerate(self.conns):
                if rank not in self.dead:
                    send(conn, Finish())
        return False

    def on_ready(self, rank: int, msg: Ready) -> None:
        self.ready.add(rank)
        self.say(f"{msg.worker} ready ({len(self.ready)}/{len(self.workers)})")
        if len(self.ready) == len(self.workers) and self.phase == "start-up":
            # (the initiator may already be further on: messages from different workers
            # arrive in any order)
            self.phase = "forward"
            self.result.timings["startup"] = time.monotonic() - self.t_start
            self.deadline = time.monotonic() + self.options.forward_timeout
            self.say("running the forward pass")

    def on_recorded(self, msg: TraceRecorded) -> None:
        opts = self.options
        self.phase = "backward"
        self.deadline = time.monotonic() + opts.hang_timeout * max(
            1, len(self.scenario.passes)) + opts.rpc_timeout + limits.BACKWARD_SLACK
        trace = Trace.from_json(msg.trace, source="<recorder>")
        trace.scenario = scenario_info(self.scenario)
        self.result.recording = Recording.single(trace)
        run, reason = (True, None) if self.decide is None else self.decide(trace)
        if not opts.run_backward:
            run, reason = False, "the real backward was turned off (--no-backward)"
        self.result.skipped_reason = None if run else reason
        if run:
            self.say("running the real dist_autograd.backward")
        send(self.conns[0], Backward(run=run))

    def on_result(self, msg: Result) -> bool:
        self.phase = "done"
        self.deadline = time.monotonic() + self.options.shutdown_timeout
        result = self.result
        trace = result.trace
        assert trace is not None
        real = (Real.from_json(msg.real) if msg.real is not None
                else Real.skipped(result.skipped_reason))
        if result.deaths:
            real["deaths"] = list(result.deaths)
        trace.real = real
        trace.reference = (Reference.from_json(msg.reference)
                           if msg.reference is not None else None)
        if real.outcome == "hang" or not msg.graceful:
            result.abort_workers = True
            return True  # a hang never unblocks, a dead peer never answers: tear down now
        self.say("shutting down")
        return False


def _failure(msg: WorkerFailed, path: str) -> DistvizError:
    """The error a ``WorkerFailed`` message stands for: the scenario's fault (a bad root, a
    limit of the scenario language), or a failed run (a run-time limit of the worker: RPC
    nesting, memory; or anything else that raised)."""
    if msg.error == "RootError":
        return ScenarioError(msg.message, path=path, line=msg.line, key="backward")
    if msg.error == "SandboxError":
        return ScenarioError(f"{msg.worker}: {msg.message}", path=path, line=msg.line)
    if msg.error in ("RpcDepthError", "MemoryLimitError"):
        return RunError(f"{msg.worker}: {msg.message}", path=path, line=msg.line)
    label = {"forward": "in the forward pass", "init": "in its init code",
             "rendezvous": "while connecting", "start-up": "while starting"}.get(
        msg.phase, f"during {msg.phase}")
    return RunError(f"{msg.worker} failed {label}: {msg.error}: {msg.message}", path=path,
                    line=msg.line)


def _how(code: int | None) -> str:
    """How a worker process ended, in words (``exit code 17: crash_backward``)."""
    if code is None:
        return "unknown"
    how = f"exit code {code}" if code >= 0 else f"signal {signal.Signals(-code).name}"
    return how + (": crash_backward" if code == limits.WorkerStatus.CRASHED else "")


def _add_death(result: RunResult, worker: str, code: int | None) -> None:
    """Record that ``worker`` died during the backward (kept with the trace's real results)."""
    death = {"worker": worker, "phase": "backward", "exit_code": code,
             "message": f"{worker} died during the backward pass ({_how(code)})"}
    result.deaths.append(death)
    trace = result.trace
    if trace is not None and trace.real is not None:
        trace.real.deaths.append(death)


def _note_deaths(procs: list[Any], workers: list[str], result: RunResult) -> None:
    """Record workers that died by themselves during the backward but were not reported yet."""
    trace = result.trace
    if trace is None or trace.real is None:
        return
    known = {d["worker"] for d in result.deaths}
    for rank, p in enumerate(procs):
        if rank == 0 or workers[rank] in known:
            continue
        p.join(0.05)
        if p.exitcode not in (None, 0):
            _add_death(result, workers[rank], p.exitcode)


def _teardown(procs: list[Any], conns: list[Any], lifelines: list[Any], options: RunOptions,
              result: RunResult, aborted: bool = False) -> None:
    """Stop every worker: wait briefly for clean exits, then SIGKILL what is left."""
    clean = result.error is None and not result.abort_workers and not aborted
    deadline = time.monotonic() + (options.shutdown_timeout if clean else 0.0)
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
    for p in procs:
        if p.is_alive():
            try:
                p.kill()
            except Exception:  # noqa: BLE001 - already gone
                pass
    for p in procs:
        p.join(5.0)
        try:
            p.close()
        except Exception:  # noqa: BLE001
            pass
    for c in conns + lifelines:
        try:
            c.close()
        except Exception:  # noqa: BLE001
            pass
