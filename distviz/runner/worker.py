"""Worker process main (child side of the runner).

One process per scenario worker, forked from a fork server that has already imported torch.
Talks to the parent only through JSON messages on a pipe (never pickle), and watches a second
"lifeline" pipe: when the parent dies, the worker exits at once.

Top-level imports are stdlib only: the parent imports this module to name ``main`` as the process
target and must not pay for ``import torch``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
import time
import traceback
import types
from typing import Any

EXIT_PARENT_GONE = 70


def send(conn: Any, msg: dict[str, Any]) -> None:
    """Send one JSON message to the parent."""
    conn.send_bytes(json.dumps(msg, separators=(",", ":")).encode("utf-8"))


def recv(conn: Any) -> dict[str, Any]:
    """Receive one JSON message from the parent."""
    return dict(json.loads(conn.recv_bytes().decode("utf-8")))


def _watch_lifeline(lifeline: Any) -> None:
    def watch() -> None:
        try:
            lifeline.recv_bytes()
            why = "lifeline: unexpected data"
        except (EOFError, OSError) as exc:
            why = f"lifeline closed: {exc!r}"
        print(f"distviz worker {os.getpid()}: {why}; the parent is gone, exiting", file=sys.stderr,
              flush=True)
        os._exit(EXIT_PARENT_GONE)
    threading.Thread(target=watch, name="distviz-lifeline", daemon=True).start()


def scenario_line(text: str, path: str) -> int | None:
    """Return the last line number of ``path`` mentioned in a (remote) traceback text."""
    pat = re.compile(r'File "' + re.escape(path) + r'", line (\d+)')
    found = pat.findall(text)
    return int(found[-1]) if found else None


_REMOTE = re.compile(r"On WorkerInfo\(id=(\d+), name=([^)]*)\):\n(.*)", re.S)


def remote_origin(exc: BaseException) -> str | None:
    """The worker a re-raised remote exception came from (innermost), if any."""
    found = _REMOTE.findall(str(exc))
    return found[-1][1] if found else None


def short_error(exc: BaseException) -> tuple[str, str]:
    """``(error type, one-line message)`` without PyTorch's remote traceback wrapping."""
    text = str(exc)
    kind = type(exc).__name__
    while True:
        m = _REMOTE.search(text)
        if not m:
            break
        body = m.group(3)
        first = body.splitlines()[0] if body.strip() else ""
        inner = re.match(r"^(\w+)\((['\"])(.*)\2\)$", first, re.S)
        if inner:
            kind = inner.group(1)
            text = inner.group(3).encode("utf-8").decode("unicode_escape", errors="replace")
        else:
            text = body
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    msg = lines[0] if lines else kind
    msg = re.sub(r"^(\w+Error): ", "", msg)
    return kind, msg


def build_namespace(scenario: Any, worker: str, rank: int, rpc_obj: Any, options: dict[str, Any],
                    reference: bool = False, target: dict[str, Any] | None = None) -> dict[str, Any]:
    """Make the module namespace of one worker: base names, ``rpc``, ``code`` functions, ``init``.

    Real runs register it as module ``distviz_scenario`` so functions pickle by reference.
    """

    from distviz.runner import sandbox
    from distviz.runner.rpc_proxy import SCENARIO_MODULE

    gen = sandbox.make_generator(scenario.seed, rank)
    proxy = sandbox.TorchProxy(gen, int(options.get("max_numel", 50_000_000)))
    made: list[tuple[Any, str]] = []
    counts: dict[str, int] = {}

    def on_leaf(t: Any, fn: str) -> None:
        k = counts.get(fn, 0)
        counts[fn] = k + 1
        made.append((t, f"{worker}.{fn}#{k}"))
        if not reference:
            from distviz import recorder
            recorder.auto_name(t, f"{worker}.{fn}#{k}")
    object.__setattr__(proxy, "on_leaf", on_leaf)
    budget = sandbox.Budget(int(options.get("max_steps", 1_000_000)))
    ns = target if target is not None else {}
    ns.update(sandbox.base_namespace(proxy, budget, dict(scenario.params)))
    if reference:
        # the reference runs inside the initiator: a crash must not kill it
        ns["crash_backward"] = lambda x: ns["fail_backward"](
            x, "crash_backward: the worker would die here")
    ns["rpc"] = rpc_obj
    ns["__name__"] = SCENARIO_MODULE
    ns["_dv_made"] = made  # leaves made by creation functions, in order (reference naming)
    if scenario.code is not None:
        exec(scenario.code.compile(), ns)  # validated and instrumented syntax tree
    init = scenario.worker_init.get(worker)
    if init is not None:
        exec(init.compile(), ns)
    return ns


def state_names(scenario: Any, worker: str, ns: dict[str, Any]) -> list[tuple[str, Any]]:
    """Names of the worker-state variables set by its ``init`` (``ps.w``)."""
    init = scenario.worker_init.get(worker)
    if init is None:
        return []
    import ast
    out: list[tuple[str, Any]] = []
    names: list[str] = []
    for node in ast.walk(init.tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id not in names:
            names.append(node.id)
    for n in names:
        if n in ns:
            out.append((f"{worker}.{n}", ns[n]))
    return out


def main(conn: Any, lifeline: Any, spec: dict[str, Any]) -> None:
    """Process target: run one worker of a scenario. ``spec`` is JSON-able."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent owns Ctrl-C and tears us down
    log = os.environ.get("DISTVIZ_WORKER_LOG")  # a path prefix: <prefix>.<worker>.log
    target = f"{log}.{spec['workers'][int(spec['rank'])]}.log" if log else os.devnull
    try:
        if log:
            os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError:
        fd = os.open(os.devnull, os.O_WRONLY)
    os.dup2(fd, 2)  # PyTorch's C++ warnings (TensorPipe EOFs after a crash) stay out of the UI
    os.close(fd)
    if log:
        import faulthandler
        faulthandler.register(signal.SIGUSR1, all_threads=True)  # stacks on demand
    _watch_lifeline(lifeline)
    rank = int(spec["rank"])
    phase = "start-up"
    worker = spec["workers"][rank]
    try:
        os.environ["TP_SOCKET_IFNAME"] = "lo"
        import warnings
        warnings.filterwarnings("ignore", category=UserWarning)
        import torch
        torch.set_num_interop_threads(int(spec["interop_threads"]))
        torch.set_num_threads(1)
        import torch.distributed.rpc as rpc

        from distviz.runner.rpc_proxy import SCENARIO_MODULE, ScenarioRpc
        from distviz.scenario import load_scenario

        scenario = load_scenario(spec["scenario_path"], spec.get("overrides") or {})
        options = spec["options"]
        phase = "init"
        module = types.ModuleType(SCENARIO_MODULE)
        sys.modules[SCENARIO_MODULE] = module
        ns = build_namespace(scenario, worker, rank, ScenarioRpc(worker), options,
                             target=module.__dict__)
        from distviz import recorder
        for label, value in state_names(scenario, worker, ns):
            for t, lab in recorder._expand(label, value):
                recorder.name(t, lab)
        phase = "rendezvous"
        opts = rpc.TensorPipeRpcBackendOptions(
            init_method=spec["init_method"], rpc_timeout=float(options.get("rpc_timeout", 60.0)),
            _transports=["uv"], num_worker_threads=int(options.get("rpc_threads", 16)))
        rpc.init_rpc(worker, rank=rank, world_size=len(spec["workers"]),
                     rpc_backend_options=opts)
        send(conn, {"type": "ready", "rank": rank, "worker": worker})
        if rank != 0:
            phase = "serving"
            rpc.shutdown()  # serves requests until every worker has joined the shutdown
            send(conn, {"type": "exited", "rank": rank})
            return
        from distviz.runner.initiator import run_initiator
        phase = "forward"
        graceful = run_initiator(conn, scenario, ns, spec)
        phase = "shutdown"
        rpc.shutdown(graceful=graceful)
        send(conn, {"type": "exited", "rank": rank})
    except BaseException as exc:  # report everything to the parent as one line, then exit
        text = str(exc) if not isinstance(exc, SystemExit) else "exit"
        kind, message = short_error(exc)
        line = getattr(exc, "line", None)
        if not isinstance(line, int):
            line = scenario_line(traceback.format_exc() + text, spec["scenario_path"])
        try:
            send(conn, {"type": "error", "rank": rank, "worker": remote_origin(exc) or worker,
                        "phase": getattr(exc, "phase", phase), "error": kind,
                        "message": message, "line": line,
                        "detail": traceback.format_exc()[-4000:]})
        except Exception:
            pass
        time.sleep(0.05)
        os._exit(3)
