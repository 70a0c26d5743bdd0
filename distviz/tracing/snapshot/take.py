"""What a traced process writes and answers for ``distviz snapshot`` (torch side; runs in the
listener thread of ``distviz.tracing.snapshot.listener``, never in the program's).

``take(folder)`` reads every thread's Python stack first (``sys._current_frames()``: the
moment the snapshot was asked for), writes them in full to ``<worker>.stacks.txt``, then, for
each live context this process entered (``snapshot_listener.OPEN``) or whose backward runs
here (``inflight.TABLE``):

* records its graph as a full recording does, over the program's RPC agent
  (``recorder.gather`` with ``snapshot_piece`` on every worker: parameter names, the call
  sites known so far; nothing is consumed or hooked, so the context's own trace is unchanged),
  from a thread of its own (``limits.SNAPSHOT_GRAPH_TIMEOUT`` seconds for all the graphs);
* for a backward in flight, replays it from its real roots; for an open forward, from the
  program's newest tensors of the context (its variables, in the thread that entered the
  context: those of the context's graph that no other such variable uses), which says what
  a backward called now would do;
* saves it as ``<worker>.ctx<N>.trace.json`` (``distviz replay`` reads it; ``meta.snapshot``
  says what it is) with the replay's one-line outcome, and a predicted hang's explanation
  (``report.hang_text``).
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
import types
from pathlib import Path
from typing import Any

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc

from distviz import limits
from distviz.frames import display, is_own, outwards, site_text
from distviz.recorder import contexts
from distviz.recorder.gather import gather
from distviz.recorder.merge import build_trace
from distviz.recorder.piece import record_local, root_nrs
from distviz.recorder.side_thread import in_threads
from distviz.recorder.walk import reachable
from distviz.trace import BackwardPass, Trace
from distviz.tracing import callsites
from distviz.tracing.recording import capture, report
from distviz.tracing.shared import naming, process
from distviz.tracing.shared.inflight import TABLE, InFlight
from distviz.tracing.snapshot.client import ContextState, ProcessSnapshot, ThreadStack
from distviz.tracing.snapshot.listener import OPEN
from distviz.words import first_line

#: Frames shown per thread in the answer (the innermost, then the program's own).
SUMMARY_FRAMES = 4


def take(folder: str) -> ProcessSnapshot:
    """Write this process's snapshot files under ``folder`` and return the answer."""
    frames = sys._current_frames()
    me = threading.get_ident()
    names = {t.ident: t.name for t in threading.enumerate()}
    proc = process.PROCESS
    worker = proc.worker if proc is not None else None
    stem = worker or f"pid{os.getpid()}"
    out = Path(folder)
    threads: list[ThreadStack] = []
    full: list[str] = []
    for ident, frame in sorted(frames.items(), key=lambda kv: _thread_order(kv[0], names)):
        if ident == me:
            continue
        name = names.get(ident) or f"thread {ident:#x}"
        threads.append(ThreadStack(name=name, frames=_summary(frame)))
        full.append(f"{name} (ident {ident:#x}), most recent call last:\n"
                    + "".join(traceback.format_stack(frame)))
    stacks = _claim(out, stem, ".stacks.txt")
    stacks.write_text(f"pid {os.getpid()} {stem}: {' '.join(sys.argv)}\n\n" + "\n".join(full),
                      encoding="utf-8")
    contexts: list[ContextState] = []
    deadline = time.monotonic() + limits.SNAPSHOT_GRAPH_TIMEOUT    # for all the graphs
    backward = TABLE.by_context()
    serving = {cid: ident for cid, ident in callsites.waiting_contexts(frames).items()
               if cid not in OPEN and cid not in backward}
    for cid in sorted(set(OPEN) | set(backward) | set(serving)):
        if cid in serving:
            contexts.append(_serving(cid, serving[cid], names, frames))
            continue
        opened, inflight = OPEN.get(cid), backward.get(cid)
        number = opened.number if opened is not None else 0
        since = inflight.since if inflight is not None else opened.since if opened else 0.0
        ident = inflight.thread if inflight is not None else opened.thread if opened else 0
        state = ContextState(number=number, context_id=cid,
                             state="backward" if inflight is not None else "forward",
                             seconds=round(time.monotonic() - since, 1),
                             thread=names.get(ident) or f"thread {ident:#x}",
                             waiting=_waiting(cid, frames))
        _graph(state, inflight, frames.get(ident), worker, out / f"{stem}.ctx{number}",
               deadline)
        contexts.append(state)
    return ProcessSnapshot(pid=os.getpid(), worker=worker, argv=list(sys.argv),
                           contexts=contexts, threads=threads, stacks_file=str(stacks))


def _serving(context_id: int, ident: int, names: dict[int | None, str],
             frames: dict[int, types.FrameType]) -> ContextState:
    """A context entered on another worker, one of whose RPCs a thread here serves and
    waits in an RPC of its own (the graph is recorded by the worker that entered it)."""
    origin = next((i.name for i in rpc._get_current_rpc_agent().get_worker_infos()
                   if int(i.id) == context_id >> 48), f"worker id {context_id >> 48}")
    return ContextState(number=0, context_id=context_id, state="serving", seconds=0.0,
                        thread=names.get(ident) or f"thread {ident:#x}",
                        waiting=_waiting(context_id, frames),
                        outcome=f"entered on {origin}: its graph is in {origin}'s part of the "
                                "snapshot")


def _waiting(context_id: int, frames: dict[int, types.FrameType]) -> list[str]:
    """The context's RPCs that a thread here is inside now, as the program wrote them."""
    out = []
    for call in callsites.waiting(context_id, frames):
        site = site_text(call.frames)
        out.append(f"{call.api}({call.label()[0]}) to {call.callee_name()}"
                   + (f" at {site}" if site else ""))
    return out


def _thread_order(ident: int, names: dict[int | None, str]) -> tuple[int, str]:
    name = names.get(ident) or ""
    return (0 if name == "MainThread" else 1 if not name.startswith("distviz") else 2, name)


def _summary(frame: types.FrameType | None) -> list[str]:
    """The innermost frame and the program's own frames under it (innermost first)."""
    out: list[str] = []
    for f in outwards(frame, None):
        if len(out) == SUMMARY_FRAMES:
            break
        path = f.f_code.co_filename
        if not out or is_own(path):
            where = display(path) if is_own(path) else \
                os.path.basename(path)
            out.append(f"{where}:{f.f_lineno} in {f.f_code.co_name}")
    return out


def _claim(folder: Path, stem: str, suffix: str) -> Path:
    """A new file ``<stem><suffix>`` in ``folder`` (``<stem>-<pid><suffix>`` when taken:
    two processes of one job may share a worker name)."""
    path = folder / f"{stem}{suffix}"
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        return path
    except FileExistsError:
        return folder / f"{stem}-{os.getpid()}{suffix}"


def _graph(state: ContextState, inflight: InFlight | None, frame: types.FrameType | None,
           worker: str | None, stem: Path, deadline: float) -> None:
    """Record, replay and save one context's graph into ``state`` (or say why not), by
    ``deadline`` (``time.monotonic``)."""
    if worker is None:
        state.outcome = "graph not recorded: RPC is not running in this process"
        return
    if not contexts.context_here(state.context_id):
        state.outcome = "graph not recorded: PyTorch no longer holds this context here"
        return
    (ran,) = in_threads([lambda: _record(state.context_id, inflight, frame, worker)],
                        max(0.0, deadline - time.monotonic()), "distviz-snapshot-graph")
    if not ran.done:
        state.outcome = (f"graph not recorded within {limits.SNAPSHOT_GRAPH_TIMEOUT:g} s (a "
                         "worker of the context does not answer over RPC)")
        return
    if ran.error is not None:
        got = ran.error
        state.outcome = f"graph not recorded: {first_line(str(got)) or type(got).__name__}"
        return
    assert ran.value is not None
    trace, root_vars = ran.value
    # the graph is written before it is replayed: kept even when the replay fails
    kept = capture.capture(lambda: trace, file=_claim(stem.parent, stem.name, ".trace.json"),
                           write_first=True, replay=lambda t: bool(t.passes), catch=True)
    state.trace, state.nodes = str(kept.path), len(trace.nodes)
    state.workers = sorted({n.worker for n in trace.nodes}, key=trace.workers.index)
    try:
        state.outcome, state.detail = _replayed(kept, root_vars, state.state)
    except Exception as exc:  # noqa: BLE001 - the graph is saved; say why it did not replay
        state.outcome = f"not replayed: {type(exc).__name__}: {first_line(str(exc))}"


def _replayed(got: capture.Captured, root_vars: list[str], state: str
              ) -> tuple[str, str | None]:
    """The replay's one line for a snapshot's trace, and a predicted hang's explanation;
    raises what the replay raised."""
    trace, rp = got.trace, got.replay
    if got.error is not None:
        raise got.error
    if rp is None:
        return ("not replayed: no variable of the program holds a tensor computed from this "
                "context's RPCs yet", None)
    if state == "backward":
        head = "the running backward, replayed: "
    else:
        froms = ", ".join(f"`{v}`" for v in root_vars) or "the program's newest tensors"
        head = f"if dist_autograd.backward ran now from {froms}: "
    if rp.outcome != "hang":
        return head + rp.summary(), None
    why = report.hang_text(trace, rp).split("\n", 1)    # its first line is in the summary
    return head + rp.summary(), why[1] if len(why) > 1 else None


def _record(context_id: int, inflight: InFlight | None, frame: types.FrameType | None,
            me: str) -> tuple[Trace, list[str]]:
    """The trace of ``context_id`` so far, with one pass from the running backward's roots
    or the program's newest tensors of the context (none when it has none yet), and the
    roots' variable names."""
    named = naming.frame_names(frame)
    if inflight is not None:
        roots = _tensors(inflight.roots)
        named = naming.in_graph(named, roots)
    else:
        roots, named = _newest(named, context_id)
    workers, pieces = gather(context_id, roots, named, inspect_saved=inflight is None,
                             record_fn=snapshot_piece, timeout=limits.LATE_RECORD_TIMEOUT)
    mine = next(p for p in pieces if p["worker"] == me)
    root_vars = naming.root_names(roots, list(named))
    ids = list(mine["roots"])
    nrs = root_nrs(roots) if len(ids) == len(roots) else []    # a leaf root has no node
    passes = [BackwardPass(roots=ids, retain_graph=bool(inflight and inflight.retain_graph),
                           root_vars=root_vars, root_nrs=nrs)] if ids else []
    trace = build_trace(workers, me, context_id, pieces, passes)
    trace.meta["snapshot"] = {"pid": os.getpid(), "argv": list(sys.argv),
                              "state": "backward" if inflight is not None else "forward",
                              "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    return trace, root_vars


def _tensors(roots: Any) -> list[torch.Tensor]:
    if isinstance(roots, torch.Tensor):
        return [roots]
    return [r for r in roots or [] if isinstance(r, torch.Tensor)]


def _newest(named: list[tuple[str, Any]], context_id: int
            ) -> tuple[list[torch.Tensor], list[tuple[str, Any]]]:
    """``(roots, names)`` for an open forward: the program's tensors computed from this
    context's RPCs that no other such tensor uses (the newest), and the names of those tensors
    and of the leaves (a variable of an earlier context's graph is left out)."""
    ctx = dist_autograd._retrieve_context(context_id)
    rpc_fns = set(ctx._send_functions().values()) | set(ctx._recv_functions().values())
    leaves: list[tuple[str, Any]] = []
    found: list[tuple[str, torch.Tensor, set[Any]]] = []
    for name, value in named:
        tensors = [v for v in (value if isinstance(value, (list, tuple)) else [value])
                   if isinstance(v, torch.Tensor)]
        if all(t.grad_fn is None for t in tensors):
            leaves.append((name, value))
            continue
        for t in tensors:
            reach = set(reachable([t.grad_fn]))
            if reach & rpc_fns:
                found.append((name, t, reach))
    roots: list[torch.Tensor] = []
    for _, t, _ in found:
        used = any(t.grad_fn in reach and t.grad_fn is not u.grad_fn for _, u, reach in found)
        if not used and all(t.grad_fn is not r.grad_fn for r in roots):
            roots.append(t)
    return roots, leaves + [(name, t) for name, t, _ in found]


def snapshot_piece(context_id: int, roots: Any, names: Any, inspect_saved: bool
                   ) -> dict[str, Any]:
    """This worker's part of ``context_id`` for a snapshot (``recorder.gather`` calls it here
    and over RPC on the others): its parameter names and the call sites so far, with nothing
    kept, hooked or taken."""
    worker = rpc.get_worker_info().name
    naming.ensure()
    named = naming.parameter_names(worker) + list(names)
    piece = record_local(context_id, roots, named, inspect_saved, keep=False)
    piece["calls"] = list(piece["calls"]) + [c.to_json() for c in callsites.peek(context_id)]
    return piece
