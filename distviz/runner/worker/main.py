"""Worker process main (child side of the runner).

One process per scenario worker, forked from a fork server that has already imported torch.
Started with a ``WorkerSpec`` (the validated scenario value, never a path to re-read); talks
to the parent only through the JSON messages of ``distviz.runner.protocol``, and watches a
second "lifeline" pipe: when the parent dies, the worker exits at once.

Top-level imports are torch-free: the parent imports this module to name ``main`` as the
process target and must not pay for ``import torch``; the torch side is imported in ``main``.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import traceback
import types
from typing import Any

from distviz import limits, torch_errors
from distviz.runner.procs import redirect_stderr as _redirect_stderr
from distviz.runner.procs import watch_lifeline as _watch_lifeline
from distviz.runner.protocol import Exited, Ready, WorkerFailed, WorkerSpec, send
from distviz.torch_errors import ErrorKind, TorchError


def scenario_line(text: str, path: str) -> int | None:
    """Return the last line number of ``path`` mentioned in a (remote) traceback text."""
    found = [line for file, line, _ in torch_errors.remote_frames(text) if file == path]
    return found[-1] if found else None


def main(conn: Any, lifeline: Any, spec: WorkerSpec) -> None:
    """Process target: run one worker of a scenario; always ends the process.

    Reports any exception as one ``WorkerFailed`` message and exits with
    ``limits.WorkerStatus.REPORTED_ERROR``.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent owns Ctrl-C and tears us down
    os.dup2(2, 1)  # print() in a scenario reaches the terminal, never the report on stdout
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    _redirect_stderr(spec.worker)
    _watch_lifeline(lifeline)
    state = {"phase": "start-up"}
    try:
        limit_memory(spec.options.max_memory)
        _run(conn, spec, state)
    except BaseException as exc:  # report everything to the parent as one line, then exit
        _report(conn, spec, state["phase"], exc)
        time.sleep(0.05)
        os._exit(limits.WorkerStatus.REPORTED_ERROR)


def limit_memory(max_bytes: int) -> None:
    """Limit this process's private writable memory (``RLIMIT_DATA``: heap, tensors, thread
    stacks) to ``max_bytes``, or to the hard limit when that is lower.

    An allocation beyond it then fails at once (``MemoryError``; torch's "can't allocate
    memory"), which the worker reports, instead of growing until the kernel's OOM killer ends
    some process. ``RLIMIT_DATA`` rather than ``RLIMIT_AS``: the address space of an idle
    worker is mostly mapped libraries and malloc's reserved arenas (about 2 GiB here, and it
    grows with the torch build and the number of cores), while its data is about 0.55 GiB.
    """
    import resource
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    limit = max_bytes if hard == resource.RLIM_INFINITY else min(max_bytes, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))


def out_of_memory(error: TorchError, max_bytes: int) -> str | None:
    """The message for an error that says the worker ran out of memory, else ``None``."""
    if error.kind is not ErrorKind.OUT_OF_MEMORY:
        return None
    if error.python_memory_error:
        what = "Python raised MemoryError"
    elif error.requested_bytes is not None:
        what = f"an operation asked for {limits.format_size(error.requested_bytes)}"
    else:
        what = error.message
    return (f"out of memory: {what}; each worker may use {limits.format_size(max_bytes)} "
            "(raise the limit with --max-memory)")


def reference_entry(conn: Any, lifeline: Any, spec: Any) -> None:
    """Process target of a training run's reference (torch is imported here, not in the
    parent): ``distviz.runner.reference.local_training.reference_main``."""
    from distviz.runner.reference.local_training import reference_main
    reference_main(conn, lifeline, spec)


def _run(conn: Any, spec: WorkerSpec, state: dict[str, str]) -> None:
    """Import torch, build the namespace, join RPC, then serve or (rank 0) run the initiator.
    ``state["phase"]`` says how far it got, for the error message."""
    os.environ["TP_SOCKET_IFNAME"] = "lo"
    import warnings
    warnings.filterwarnings("ignore", category=UserWarning)
    import torch
    torch.set_num_interop_threads(spec.interop_threads)
    torch.set_num_threads(1)
    import torch.distributed.rpc as rpc

    from distviz.recorder.names import expand, name
    from distviz.runner.sandbox import modules
    from distviz.runner.sandbox.namespace import build_namespace, state_names
    from distviz.runner.sandbox.rpc_proxy import SCENARIO_MODULE, ScenarioRpc
    from distviz.runner.worker.session import TrainingSession, install_namers

    scenario, options, worker, rank = spec.scenario, spec.options, spec.worker, spec.rank
    state["phase"] = "init"
    module = types.ModuleType(SCENARIO_MODULE)
    sys.modules[SCENARIO_MODULE] = module
    modules.set_worker(worker)
    lock = threading.Lock()

    def tell(msg: Any) -> None:
        with lock:
            send(conn, msg)
    session = TrainingSession(worker, options, tell)
    scenario_rpc = ScenarioRpc(worker, options.max_rpc_depth)
    scenario_rpc.clock = session.point
    ns = build_namespace(scenario, worker, rank, scenario_rpc, options, target=module.__dict__,
                         extras=session.names())
    state_pairs = state_names(scenario, worker, ns)
    for label, value in state_pairs:
        for t, lab in expand(label, value):
            name(t, lab)
    install_namers(worker, state_pairs, lambda: session.main_ns)
    if scenario.training:
        from distviz.runner.sandbox import served
        # before any trainer can reach this worker
        served.watch(scenario.trainers, ns["torch"].generator, ns["_dv_made"])
    state["phase"] = "rendezvous"
    opts = rpc.TensorPipeRpcBackendOptions(
        init_method=spec.init_method, rpc_timeout=options.rpc_timeout, _transports=["uv"],
        num_worker_threads=options.rpc_threads)
    rpc.init_rpc(worker, rank=rank, world_size=len(spec.workers), rpc_backend_options=opts)
    send(conn, Ready(rank=rank, worker=worker))
    if scenario.training:
        from distviz.runner.worker.trainer import run_training
        state["phase"] = "training"
        graceful = run_training(conn, tell, scenario, worker, ns, session, state)
        state["phase"] = "shutdown"
        rpc.shutdown(graceful=graceful)
        send(conn, Exited(rank=rank))
        return
    if rank != 0:
        state["phase"] = "serving"
        rpc.shutdown()  # serves requests until every worker has joined the shutdown
        send(conn, Exited(rank=rank))
        return
    from distviz.runner.worker.initiator import run_initiator
    state["phase"] = "forward"
    graceful = run_initiator(conn, scenario, ns, options)
    state["phase"] = "shutdown"
    rpc.shutdown(graceful=graceful)
    send(conn, Exited(rank=rank))


def _report(conn: Any, spec: WorkerSpec, phase: str, exc: BaseException) -> None:
    """Send ``exc`` to the parent as one ``WorkerFailed`` message (best effort)."""
    text = str(exc) if not isinstance(exc, SystemExit) else "exit"
    error = torch_errors.classify(exc)
    kind, message = error.type_name, error.message
    memory = out_of_memory(error, spec.options.max_memory)
    if memory is not None:
        kind, message = "MemoryLimitError", memory
    line = getattr(exc, "line", None)
    if not isinstance(line, int):
        line = scenario_line(traceback.format_exc() + text, spec.scenario.path)
    try:
        send(conn, WorkerFailed(rank=spec.rank, worker=error.worker or spec.worker,
                                phase=str(getattr(exc, "phase", phase)), error=kind,
                                message=message, line=line,
                                detail=traceback.format_exc()[-4000:]))
    except Exception:  # noqa: BLE001 - the parent is gone: nothing to tell
        pass
