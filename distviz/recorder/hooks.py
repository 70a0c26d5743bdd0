"""Observing the real backward (torch side): hooks on every recorded node, and what they saw.

``install_hooks(context_id)`` puts a pre-hook and a post-hook on every node
``distviz.recorder.piece`` recorded for the context on this worker; each appends one tuple
(node id, native thread id, ``CLOCK_MONOTONIC`` ns), tagged with the running graph task when
several contexts may share nodes. ``collect(context_id)`` reads them back (with thread
names, gradient shapes and the post-hook times paired) together with what ``get_gradients``
holds here, by leaf id. ``remove_hooks`` takes them off again (``recorder.forget`` does too).
``--inject-delay`` slows the hooked backward down on purpose (``wait_until``).
"""

from __future__ import annotations

import ctypes
import functools
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc

from distviz.recorder import contexts
from distviz.recorder.contexts import WorkerRecord
from distviz.recorder.piece import node_kind
from distviz.trace.node import NodeKind

__all__ = ["SPIN_NS", "clock_sample", "collect", "install_hooks", "make_posthook",
           "make_prehook", "remove_hooks", "wait_until"]

_THREAD_NAMES: dict[int, str] = {}


def _thread_label(tid: int) -> str:
    """``<thread name>/<native id>`` of a thread of this process (``PTThreadPool/1234``)."""
    label = _THREAD_NAMES.get(tid)
    if label is None:
        try:
            with open(f"/proc/self/task/{tid}/comm", encoding="utf-8") as fh:
                comm = fh.read().strip()
        except OSError:
            comm = "thread"
        label = f"{comm}/{tid}"
        _THREAD_NAMES[tid] = label
    return label


def make_prehook(nid: str, events: list[Any], delay_ns: int = 0,
                 tagged: bool = False) -> Callable[[Any], None]:
    """The pre-hook distviz puts on a node: one tuple append, nothing else (it runs on every
    node of the real backward, so it must be cheap). Records ``(node id, native thread id,
    CLOCK_MONOTONIC ns)``; thread names and gradient shapes (the node's input metadata, recorded
    with the graph) are added later, in ``collect``. ``delay_ns > 0`` (``--inject-delay recv=``)
    then waits that long, so a ``RecvRpcBackward`` sends its gradient later. ``tagged`` adds
    the running graph task (PyTorch's ``_current_graph_task_id``), which tells concurrent
    contexts apart on the nodes they share (a parameter's ``AccumulateGrad``)."""
    append = events.append
    now = time.monotonic_ns
    tid = threading.get_native_id
    pinned = _PINNED
    task = torch._C._current_graph_task_id

    def pre(grads: Any) -> None:
        t = tid()
        if t not in pinned:
            _pin_thread_state(t)
        append((nid, t, now()))

    def pre_tagged(grads: Any) -> None:
        t = tid()
        if t not in pinned:
            _pin_thread_state(t)
        append((nid, t, now(), task()))
    if tagged:
        return pre_tagged

    def pre_delay(grads: Any) -> None:
        pre(grads)
        wait_until(now() + delay_ns)
    return pre_delay if delay_ns > 0 else pre


SPIN_NS = 100_000   # the last part of an injected delay is a busy loop: sleeps overshoot


def wait_until(t_ns: int) -> None:
    """Wait until ``CLOCK_MONOTONIC`` reaches ``t_ns``: sleep (the CPU stays free for the other
    workers, as on a machine of its own), then a busy loop for the last ``SPIN_NS``."""
    now = time.monotonic_ns
    left = t_ns - now()
    if left > 2 * SPIN_NS:
        time.sleep((left - SPIN_NS) / 1e9)
    while now() < t_ns:
        pass


def make_posthook(nid: str, ends: list[Any], slow: float = 1.0,
                  tagged: bool = False) -> Callable[[Any, Any], None]:
    """The post-hook: ``(node id, native thread id, CLOCK_MONOTONIC ns)`` when the node returns.

    ``slow > 1`` (``--inject-delay worker1=3x``) first waits until the node has taken ``slow``
    times as long as it did, measured from its pre-hook on the same thread (the extra time
    comes after the node's own work: a message it sent has left); the recorded end is after
    that.
    """
    append = ends.append
    now = time.monotonic_ns
    tid = threading.get_native_id
    if tagged:
        task = torch._C._current_graph_task_id

        def post_tagged(grad_inputs: Any, grad_outputs: Any) -> None:
            append((nid, tid(), now(), task()))
        return post_tagged
    if slow <= 1.0:
        def post(grad_inputs: Any, grad_outputs: Any) -> None:
            append((nid, tid(), now()))
        return post
    extra = slow - 1.0
    starts = _STARTS

    def post_slow(grad_inputs: Any, grad_outputs: Any) -> None:
        t = tid()
        t_end = now()
        wait_until(t_end + int(extra * (t_end - starts.get(t, t_end))))
        append((nid, t, now()))
    return post_slow


_STARTS: dict[int, int] = {}   # native thread id -> start of the node it runs (slow injection)


def _mark_start(nid: str) -> Callable[[Any], None]:
    """A pre-hook that notes when a node starts on its thread (for ``make_posthook(slow=)``)."""
    now = time.monotonic_ns
    tid = threading.get_native_id
    starts = _STARTS

    def mark(grads: Any) -> None:
        starts[tid()] = now()
    return mark


_PINNED: set[int] = set()


def _pin_thread_state(tid: int) -> None:
    """Keep this engine thread's Python thread state alive between hook calls.

    The distributed engine runs nodes on inter-op pool threads that have no Python thread
    state; each hook call makes one (``gil_scoped_acquire``) and, when its counter falls back
    to zero, destroys it again: that costs more than the hook itself. One extra
    ``PyGILState_Ensure`` per pool thread (never released) keeps the counter above zero, so
    later hook calls on the thread only take the GIL.
    """
    _PINNED.add(tid)
    try:
        ctypes.pythonapi.PyGILState_Ensure()
    except Exception:  # noqa: BLE001 - an interpreter without the C API: hooks still work
        pass


def install_hooks(context_id: int, inject: Mapping[str, Any] | None = None,
                  concurrent: bool = False) -> int:
    """Put a pre-hook and a post-hook on every recorded node of ``context_id`` on this worker.

    Returns the number of nodes hooked. Events are read back with ``collect``. ``inject``
    slows the backward down on purpose (``distviz run --inject-delay``): ``{"recv_s": 0.002}``
    waits 2 ms in every ``RecvRpcBackward`` before it sends its gradient; ``{"slow":
    {"worker1": 3.0}}`` makes every node of worker1 take 3 times as long. ``concurrent``:
    other contexts may run backward passes at the same time through nodes this one shares
    (a parameter's ``AccumulateGrad``); the events are then tagged with their graph task and
    ``collect`` keeps this context's only (``inject`` is not applied then).
    """
    rec = contexts.recorded(context_id)
    inject = inject or {}
    recv_ns = int(float(inject.get("recv_s") or 0.0) * 1e9)
    slow = float((inject.get("slow") or {}).get(rec.worker, 1.0))
    for nid, fn in rec.nodes.items():
        if concurrent:
            rec.handles.append(fn.register_prehook(make_prehook(nid, rec.events, tagged=True)))
            rec.handles.append(fn.register_hook(make_posthook(nid, rec.ends, tagged=True)))
            continue
        delay = recv_ns if fn.name().endswith("RecvRpcBackward") else 0
        rec.handles.append(fn.register_prehook(make_prehook(nid, rec.events, delay)))
        if slow > 1.0:   # after the recv delay: only the node's own time is multiplied
            rec.handles.append(fn.register_prehook(_mark_start(nid)))
        rec.handles.append(fn.register_hook(make_posthook(nid, rec.ends, slow)))
    return len(rec.nodes)


def remove_hooks(context_id: int) -> None:
    """Remove the hooks installed by ``install_hooks``."""
    rec = contexts.record_of(context_id)
    if rec is None:
        return
    for h in rec.handles:
        h.remove()
    rec.handles.clear()


def _own_events(rec: WorkerRecord, events: list[tuple[Any, ...]], ends: list[tuple[Any, ...]]
                ) -> tuple[list[tuple[str, int, int]], list[tuple[str, int, int]]]:
    """Events tagged with their graph task (``install_hooks(concurrent=True)``): keep this
    context's. Every node but a leaf's ``AccumulateGrad`` belongs to this context's graph only,
    so the graph tasks its events ran in are this context's on this worker."""
    def plain(e: tuple[Any, ...]) -> tuple[str, int, int]:
        return (str(e[0]), int(e[1]), int(e[2]))
    if not events or len(events[0]) < 4:
        return [plain(e) for e in events], [plain(e) for e in ends]
    shared = {nid for nid, fn in rec.nodes.items()
              if node_kind(fn.name()) == NodeKind.ACCUMULATE_GRAD}
    own = {e[3] for e in events if e[0] not in shared}
    return ([plain(e) for e in events if not own or e[3] in own],
            [plain(e) for e in ends if not own or e[3] in own])


def _pair_ends(events: list[tuple[str, int, int]],
               ends: list[tuple[str, int, int]]) -> list[int | None]:
    """For each pre-hook event, the time of its post-hook (``None`` when the node raised).

    Nodes on one thread never overlap, so the post-hook of a node is the next one on the same
    thread with the same node id before that thread's next pre-hook.
    """
    merged = sorted([(t, 0, k, tid, nid) for k, (nid, tid, t) in enumerate(events)]
                    + [(t, 1, k, tid, nid) for k, (nid, tid, t) in enumerate(ends)])
    out: list[int | None] = [None] * len(events)
    open_on: dict[int, tuple[int, str]] = {}
    for t, is_end, k, tid, nid in merged:
        if not is_end:
            open_on[tid] = (k, nid)
            continue
        cur = open_on.pop(tid, None)
        if cur is not None and cur[1] == nid:
            out[cur[0]] = t
    return out


def clock_sample() -> tuple[str, int]:
    """This host's boot id and its ``CLOCK_MONOTONIC`` now, in ns (for the clock offsets).

    Processes on one host (one boot id) share ``CLOCK_MONOTONIC``; across hosts the initiator
    estimates the offset from round trips of this call.
    """
    return _boot_id(), time.monotonic_ns()


@functools.cache
def _boot_id() -> str:
    """This host's boot id (read once per process: it changes only with a reboot)."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def collect(context_id: int, with_gradients: bool = True, copy: bool = True) -> dict[str, Any]:
    """Return this worker's observed hook events and (optionally) its ``get_gradients`` by leaf id.

    Events: ``[node id, thread label, start ns, grad shapes, end ns or None]`` in the order
    they started (``CLOCK_MONOTONIC``). Gradients: ``{leaf node id: tensor}``, copies unless
    ``copy`` is false (a caller that only reads them at once: the context's own tensors).
    """
    rec = contexts.record_of(context_id)
    out: dict[str, Any] = {"worker": rpc.get_worker_info().name, "events": [], "grads": {}}
    if rec is None:
        return out
    events, raw_ends = _own_events(rec, list(rec.events), list(rec.ends))
    ends = _pair_ends(events, raw_ends)
    out["events"] = [[nid, _thread_label(tid), t, rec.shapes.get(nid), end]
                     for (nid, tid, t), end in zip(events, ends, strict=True)]
    if with_gradients:
        try:
            grads = dist_autograd.get_gradients(context_id)
        except RuntimeError:
            grads = {}
        by_var: dict[int, str] = {}
        for leaf_id, fn in rec.nodes.items():
            if leaf_id.split("/", 1)[1].startswith("AccumulateGrad"):
                by_var[id(fn.variable)] = leaf_id
        for tensor, grad in grads.items():
            found = by_var.get(id(tensor))
            if found is not None:
                out["grads"][found] = grad.detach().clone() if copy else grad.detach()
    return out
