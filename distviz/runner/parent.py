"""Runner, parent side: start one process per worker, drive the run, always tear down.

Workers are forked from a multiprocessing fork server that imports torch once (``import torch``
costs seconds; a fork costs milliseconds). Rendezvous goes through a file store in a private
temporary folder, and TensorPipe listens on the loopback interface only, so nothing binds
outside 127.0.0.1 and parallel runs never collide. The parent never imports torch.

Every run ends with every worker gone: on success, on error, on timeout and on Ctrl-C
(``finally``), and a worker whose parent dies exits by itself (its lifeline pipe closes).
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
from typing import Any

from distviz.errors import Interrupted, RunError, RunTimeout, ScenarioError
from distviz.runner.worker import main as worker_main
from distviz.runner.worker import recv, send
from distviz.trace import Trace

PRELOAD = ["torch", "torch.distributed.rpc", "torch.distributed.autograd", "distviz.recorder",
           "distviz.runner.rpc_proxy", "distviz.runner.initiator", "distviz.runner.reference",
           "distviz.runner.sandbox", "distviz.scenario"]


@dataclass
class RunOptions:
    """How a scenario runs. Times are seconds."""

    interop_threads: int = 1
    hang_timeout: float = 5.0
    confirm_hang: bool = False
    startup_timeout: float = 90.0
    forward_timeout: float = 300.0
    shutdown_timeout: float = 20.0
    rpc_timeout: float = 60.0
    max_numel: int = 50_000_000
    max_steps: int = 1_000_000
    run_backward: bool = True
    reference: bool = True
    observe: bool = True
    keep_server: bool = False

    def worker_options(self) -> dict[str, Any]:
        return {"hang_timeout": self.hang_timeout, "rpc_timeout": self.rpc_timeout,
                "max_numel": self.max_numel, "max_steps": self.max_steps,
                "reference": self.reference, "observe": self.observe}


@dataclass
class RunResult:
    """What a run produced. ``trace`` may be partial (no real results) when ``error`` is set."""

    trace: Trace | None
    error: Exception | None = None
    skipped_reason: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    exit_codes: dict[str, int | None] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)
    deaths: list[dict[str, Any]] = field(default_factory=list)
    abort_workers: bool = False
    tmpdir: str | None = None


def _context() -> Any:
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


class _NoMainImport:
    """Start workers without re-importing the caller's ``__main__`` in them.

    multiprocessing normally re-runs the parent's main script in each child (``__mp_main__``);
    workers need nothing from it, and for a REPL, a notebook or ``python -`` it does not exist.
    """

    def __enter__(self) -> None:
        from multiprocessing import spawn
        self._orig = spawn.get_preparation_data

        def prep(name: str) -> dict[str, Any]:
            data = dict(self._orig(name))
            data.pop("init_main_from_path", None)
            data.pop("init_main_from_name", None)
            return data
        spawn.get_preparation_data = prep

    def __exit__(self, *exc: object) -> None:
        from multiprocessing import spawn
        spawn.get_preparation_data = self._orig


def stop_server() -> None:
    """Stop the fork server (it is restarted by the next run)."""
    try:
        from multiprocessing import forkserver
        forkserver._forkserver._stop()  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - nothing to stop
        pass


def run_scenario(scenario: Any, options: RunOptions | None = None,
                 decide_backward: Callable[[Trace], tuple[bool, str | None]] | None = None,
                 progress: Callable[[str], None] | None = None,
                 overrides: dict[str, str] | None = None) -> RunResult:
    """Run ``scenario`` (a validated ``distviz.scenario.Scenario``) on real RPC workers.

    ``decide_backward(trace) -> (run, reason)`` is asked after recording whether to run the real
    backward (the CLI skips it when the replay predicts a hang). Returns a ``RunResult``; run-time
    failures come back in ``RunResult.error`` (``RunError``, ``RunTimeout``, ``ScenarioError`` for
    bad roots, ``Interrupted`` for Ctrl-C), always after every worker is gone; ``trace`` then
    holds what was recorded before the failure, if anything.
    """
    options = options or RunOptions()
    say = progress or (lambda _msg: None)
    ctx = _context()
    tmp = tempfile.mkdtemp(prefix="distviz-run-")
    workers: list[str] = list(scenario.workers)
    spec_base = {"workers": workers, "scenario_path": scenario.path,
                 "overrides": overrides or {}, "interop_threads": options.interop_threads,
                 "init_method": "file://" + os.path.join(tmp, "rendezvous"),
                 "options": options.worker_options()}
    procs: list[Any] = []
    conns: list[Any] = []
    lifelines: list[Any] = []
    result = RunResult(trace=None, tmpdir=tmp)
    aborted = False
    t_start = time.monotonic()
    try:
        say(f"starting {len(workers)} workers")
        for rank in range(len(workers)):
            parent_conn, child_conn = ctx.Pipe(duplex=True)
            life_r, life_w = ctx.Pipe(duplex=False)
            spec = dict(spec_base, rank=rank)
            p = ctx.Process(target=worker_main, args=(child_conn, life_r, spec),
                            name=f"distviz-{workers[rank]}", daemon=False)
            with _NoMainImport():
                p.start()
            result.pids[workers[rank]] = int(p.pid)
            child_conn.close()
            life_r.close()
            procs.append(p)
            conns.append(parent_conn)
            lifelines.append(life_w)
        _drive(scenario, options, procs, conns, workers, result, decide_backward, say, t_start)
        _note_deaths(procs, workers, result)
    except KeyboardInterrupt:
        result.error = Interrupted("interrupted by Ctrl-C; every worker was stopped")
    except BaseException:
        aborted = True
        raise
    finally:
        _teardown(procs, conns, lifelines, options, result, aborted)
        shutil.rmtree(tmp, ignore_errors=True)
        if not options.keep_server:
            stop_server()
    result.timings["total"] = time.monotonic() - t_start
    return result


def _drive(scenario: Any, options: RunOptions, procs: list[Any], conns: list[Any],
           workers: list[str], result: RunResult,
           decide_backward: Callable[[Trace], tuple[bool, str | None]] | None,
           say: Callable[[str], None], t_start: float) -> None:
    ready: set[int] = set()
    exited: set[int] = set()
    phase = "start-up"
    deadline = t_start + options.startup_timeout
    conn_rank = {id(c): i for i, c in enumerate(conns)}
    sentinel_rank = {p.sentinel: i for i, p in enumerate(procs)}
    dead: set[int] = set()
    while True:
        if phase == "done" and len(exited | dead) == len(procs):
            return
        timeout = max(0.0, deadline - time.monotonic())
        waitables = [c for i, c in enumerate(conns) if i not in dead] + \
            [p.sentinel for i, p in enumerate(procs) if i not in dead]
        ready_objs = mpc.wait(waitables, timeout=timeout)
        if not ready_objs:
            if phase == "done":
                return  # shutdown took too long: teardown kills what is left
            what = {"start-up": "starting the workers", "forward": "the forward pass",
                    "backward": "the backward pass"}.get(phase, phase)
            limit = deadline - t_start if phase == "start-up" else None
            raise_msg = f"timed out during {what}"
            if limit is not None:
                raise_msg += f" after {limit:.0f} s"
            result.error = RunTimeout(raise_msg + "; every worker was stopped",
                                      path=scenario.path)
            return
        for obj in ready_objs:
            if obj in sentinel_rank:
                rank = sentinel_rank[obj]
                if rank in dead:
                    continue
                # drain a last message first
                c = conns[rank]
                while rank not in exited and c.poll(0):
                    try:
                        msg = recv(c)
                    except (EOFError, OSError):
                        break
                    if _handle(msg, rank, scenario, options, conns, workers, result,
                               decide_backward, say, exited):
                        return
                dead.add(rank)
                procs[rank].join(0.1)
                code = procs[rank].exitcode
                result.exit_codes[workers[rank]] = code
                if rank in exited:
                    continue
                if phase in ("backward", "done") and rank != 0:
                    # the initiator sees the failure through PyTorch and reports it
                    _add_death(result, workers[rank], code)
                    continue
                if result.error is None:
                    during = {"start-up": "start-up", "forward": "the forward pass",
                              "backward": "the backward pass", "done": "shutdown"}[phase]
                    result.error = RunError(f"worker {workers[rank]} died during {during} "
                                            f"({_how(code)})", path=scenario.path)
                return
            rank = conn_rank[id(obj)]
            try:
                msg = recv(obj)
            except (EOFError, OSError):
                continue
            if msg["type"] == "ready":
                ready.add(rank)
                say(f"{msg['worker']} ready ({len(ready)}/{len(workers)})")
                if len(ready) == len(workers) and phase == "start-up":
                    # (the initiator may already be further on: messages from different
                    # workers arrive in any order)
                    phase = "forward"
                    result.timings["startup"] = time.monotonic() - t_start
                    deadline = time.monotonic() + options.forward_timeout
                    say("running the forward pass")
                continue
            if msg["type"] == "recorded":
                phase = "backward"
                deadline = time.monotonic() + options.hang_timeout * max(
                    1, len(scenario.passes)) + options.rpc_timeout + 120.0
            if msg["type"] == "result":
                phase = "done"
                deadline = time.monotonic() + options.shutdown_timeout
            if _handle(msg, rank, scenario, options, conns, workers, result, decide_backward,
                       say, exited):
                return


def _how(code: int | None) -> str:
    """How a worker process ended, in words (``exit code 17: crash_backward``)."""
    if code is None:
        return "unknown"
    how = f"exit code {code}" if code >= 0 else f"signal {signal.Signals(-code).name}"
    return how + (": crash_backward" if code == 17 else "")


def _add_death(result: RunResult, worker: str, code: int | None) -> None:
    """Record that ``worker`` died during the backward (kept with the trace's real results)."""
    death = {"worker": worker, "phase": "backward", "exit_code": code,
             "message": f"{worker} died during the backward pass ({_how(code)})"}
    result.deaths.append(death)
    if result.trace is not None and result.trace.real is not None:
        result.trace.real.setdefault("deaths", []).append(death)


def _note_deaths(procs: list[Any], workers: list[str], result: RunResult) -> None:
    """Record workers that died by themselves during the backward but were not reported yet."""
    if result.trace is None or result.trace.real is None:
        return
    known = {d["worker"] for d in result.deaths}
    for rank, p in enumerate(procs):
        if rank == 0 or workers[rank] in known:
            continue
        p.join(0.05)
        if p.exitcode not in (None, 0):
            _add_death(result, workers[rank], p.exitcode)


def _handle(msg: dict[str, Any], rank: int, scenario: Any, options: RunOptions,
            conns: list[Any], workers: list[str], result: RunResult,
            decide_backward: Callable[[Trace], tuple[bool, str | None]] | None,
            say: Callable[[str], None], exited: set[int]) -> bool:
    """Handle one worker message; return True when the run must stop now."""
    kind = msg["type"]
    if kind == "exited":
        exited.add(rank)
        return False
    if kind == "error":
        where = msg.get("phase")
        line = msg.get("line")
        text = f"{msg['worker']}: {msg['error']}: {msg['message']}" if msg["error"] not in (
            "RootError",) else msg["message"]
        if msg["error"] == "RootError":
            result.error = ScenarioError(text, path=scenario.path, line=line, key="backward")
        elif msg["error"] == "SandboxError":
            result.error = ScenarioError(f"{msg['worker']}: {msg['message']}",
                                         path=scenario.path, line=line)
        else:
            label = {"forward": "in the forward pass", "init": "in its init code",
                     "rendezvous": "while connecting", "start-up": "while starting"}.get(
                where or "", f"during {where}")
            result.error = RunError(f"{msg['worker']} failed {label}: {msg['error']}: "
                                    f"{msg['message']}", path=scenario.path, line=line)
        return True
    if kind == "forward_done":
        result.timings["forward"] = float(msg.get("seconds", 0.0))
        say("recording the graph")
        return False
    if kind == "recorded":
        trace = Trace.from_json(msg["trace"], source="<recorder>")
        trace.scenario = {"name": scenario.name, "description": scenario.description,
                          "path": scenario.path, "params": dict(scenario.params),
                          "seed": scenario.seed}
        result.trace = trace
        run, reason = (True, None) if decide_backward is None else decide_backward(trace)
        if not options.run_backward:
            run, reason = False, "the real backward was turned off (--no-backward)"
        result.skipped_reason = None if run else reason
        if run:
            say("running the real dist_autograd.backward")
        send(conns[0], {"type": "backward", "run": run})
        return False
    if kind == "result":
        assert result.trace is not None
        real = msg.get("real")
        if real is None:
            real = {"outcome": "skipped", "error": None, "reason": result.skipped_reason,
                    "events": [], "gradients": {}}
        if result.deaths:
            real["deaths"] = list(result.deaths)
        result.trace.real = real
        result.trace.reference = msg.get("reference")
        if real.get("outcome") == "hang" or msg.get("graceful") is False:
            result.abort_workers = True
            return True  # a hang never unblocks, a dead peer never answers: tear down now
        say("shutting down")
        return False
    return False


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
