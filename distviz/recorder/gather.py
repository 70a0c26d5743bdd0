"""The cross-worker gather (torch side): every worker's piece of a context, from the initiator.

``gather(context_id, roots, names)`` records this worker (``record_local``, or the caller's
``record_fn``) and reaches every other worker of the context through the known-worker ids and
the senders of the messages each worker received, over RPC, from the ``distviz-gather`` side
thread: the dist autograd context is thread-local, so the recording RPCs are made outside the
context and add no message ids or known workers. It records again until every request the
forward pass left on its way has reached its callee.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import torch
import torch.distributed.rpc as rpc
from torch.distributed.rpc.constants import UNSET_RPC_TIMEOUT

from distviz import limits, torch_errors
from distviz.recorder.contexts import known_ids
from distviz.recorder.names import names_list
from distviz.recorder.piece import record_local
from distviz.recorder.side_thread import SideThread
from distviz.torch_errors import ErrorKind
from distviz.trace.node import NodeKind


class NoAnswer(RuntimeError):
    """A worker did not answer a recording RPC within ``seconds`` (``gather(timeout=)``): it
    is stopped, overloaded, or its RPC threads are all busy."""

    def __init__(self, worker: str, seconds: float) -> None:
        super().__init__(f"{worker} did not answer within {seconds:g} s")
        self.worker, self.seconds = worker, seconds


#: The side thread the recording RPCs go from (one per process).
GATHER_THREAD = SideThread("distviz-gather")

_BEFORE_GATHER: list[Callable[[int], None]] = []


def before_gather(hook: Callable[[int], None]) -> None:
    """Call ``hook(context_id)`` at the start of each ``gather`` of a context (once per hook):
    the runner waits there for the replies to the calls a program made in the context and did
    not wait for (``rpc_proxy.wait_replies``), so their callees hold their part of the graph."""
    if hook not in _BEFORE_GATHER:
        _BEFORE_GATHER.append(hook)


#: ``direct(worker, fn, args, timeout)``: ``fn(*args)`` started on ``worker`` without RPC, as
#: an object whose ``wait()`` gives its value, or ``None`` where that worker cannot be asked so
#: (``distviz.tracing.shared.local_calls``).
Direct = Callable[[str, Callable[..., Any], tuple[Any, ...], float], Any]


def gather(context_id: int, roots: Iterable[Any], names: Any = None,
           inspect_saved: bool = True, record_fn: Callable[..., dict[str, Any]] | None = None,
           timeout: float | None = None, direct: Direct | None = None
           ) -> tuple[list[str], list[dict[str, Any]]]:
    """Record this worker and every worker reachable through known worker ids.

    ``record_fn`` records one worker (default ``record_local``; it is called over RPC on the
    others, so it must be a module-level function they can import). Returns ``(worker names by
    rank, pieces)``.

    The forward pass may have left requests on their way (an ``rpc.remote`` or ``rpc_async``
    nobody waited for): their callee has no recv function for them yet, or no context at all
    ("Could not find autograd context"). The ``before_gather`` hooks wait for the replies to
    such calls where their futures are known (a scenario's calls); otherwise, until every
    request has its recv, or for at most ``limits.RECORD_SETTLE_TIMEOUT`` seconds, every
    worker is recorded again; after that a worker that still has no context raises PyTorch's
    ``RuntimeError``.

    ``timeout``: how long each worker may take to answer (default: the RPC agent's); a worker
    that does not answer in time raises ``NoAnswer``. ``direct``: how a worker is asked
    without RPC, from this thread (``Direct``); the others are asked over RPC from the side
    thread.
    """
    for hook in _BEFORE_GATHER:
        hook(context_id)
    local = record_fn or record_local
    root_fns = [r.grad_fn for r in roots if isinstance(r, torch.Tensor)]
    named = names_list(names)
    deadline = time.monotonic() + limits.RECORD_SETTLE_TIMEOUT
    while True:
        workers, pieces, pending = _gather_once(context_id, local, root_fns, named, inspect_saved,
                                                timeout, direct)
        if not pending and _settled(pieces):
            return workers, pieces
        if time.monotonic() >= deadline:
            if pending:
                raise pending[0]
            return workers, pieces
        time.sleep(0.02)


def _reached(piece: dict[str, Any]) -> list[int]:
    """The worker ids a piece leads to: those its context knows (sent to), and those it only
    received from (``heard``)."""
    return list(piece["known"]) + list(piece.get("heard") or [])


def _gather_once(context_id: int, local: Callable[..., dict[str, Any]], root_fns: list[Any],
                 named: list[tuple[Any, str]], inspect_saved: bool, timeout: float | None,
                 direct: Direct | None
                 ) -> tuple[list[str], list[dict[str, Any]], list[RuntimeError]]:
    """One recording of every reachable worker: ``(workers, pieces, errors)``, where errors
    are those of workers that do not know the context yet.

    The workers this one's context already knows are asked first, from the side thread, and
    record their pieces while this worker records its own; the workers those pieces name are
    asked next, until none is new."""
    infos = rpc._get_current_rpc_agent().get_worker_infos()
    by_id = {int(i.id): i.name for i in infos}
    workers = [by_id[k] for k in sorted(by_id)]
    me = rpc.get_worker_info()
    seen = {int(me.id)}
    pending: list[RuntimeError] = []

    wait = UNSET_RPC_TIMEOUT if timeout is None else timeout
    direct_limit = rpc.get_rpc_timeout() if timeout is None else timeout

    def send(batch: list[int]) -> list[tuple[int, Any]]:
        out: list[tuple[int, Any]] = []
        for wid in batch:
            try:
                out.append((wid, rpc.rpc_async(by_id[wid], local,
                                               args=(context_id, (), (), inspect_saved),
                                               timeout=wait)))
            except RuntimeError as exc:
                out.append((wid, exc))
        return out

    def receive(wid: int, fut: Any) -> dict[str, Any] | RuntimeError:
        try:
            if isinstance(fut, RuntimeError):
                raise fut
            return fut.wait()
        except TimeoutError as exc:     # a direct call's (``Direct``)
            raise NoAnswer(by_id[wid], direct_limit) from exc
        except RuntimeError as exc:
            kind = torch_errors.classify(exc).kind
            if timeout is not None and kind is ErrorKind.RPC_TIMEOUT:
                raise NoAnswer(by_id[wid], timeout) from exc
            if kind is not ErrorKind.NO_CONTEXT:
                raise
            return exc

    def ask(batch: list[int]) -> list[tuple[int, Any]]:
        """The requests to ``batch``: directly from here where ``direct`` can, the others
        from the side thread (outside the context); the answers are waited for here, after
        this worker's own piece is recorded."""
        seen.update(batch)
        asked: list[tuple[int, Any]] = []
        rest: list[int] = []
        for w in batch:
            call = None if direct is None else direct(
                by_id[w], local, (context_id, (), (), inspect_saved), direct_limit)
            if call is None:
                rest.append(w)
            else:
                asked.append((w, call))
        return asked + (GATHER_THREAD.run(send, rest) if rest else [])

    asked = ask(sorted(set(known_ids(context_id)) - seen))
    pieces = [local(context_id, root_fns, named, inspect_saved)]
    frontier = [w for w in _reached(pieces[0]) if w not in seen]
    while True:
        for wid, fut in asked:
            piece = receive(wid, fut)
            if isinstance(piece, RuntimeError):
                pending.append(piece)
                continue
            pieces.append(piece)
            frontier.extend(w for w in _reached(piece) if w not in seen)
        if not frontier:
            return workers, pieces, pending
        asked = ask(sorted(set(frontier) - seen))
        frontier = []


def _settled(pieces: list[dict[str, Any]]) -> bool:
    """Whether the callee of every RPC the program made read its request: each message a
    call sent from its caller has its recv. (A response may have no recv for good: one that
    arrived under ``torch.no_grad()``.)"""
    sends: dict[str, set[int]] = {}
    recvs: set[int] = set()
    for p in pieces:
        for n in p["nodes"]:
            if n.get("msg_id") is None:
                continue
            if n["kind"] == NodeKind.SEND:
                sends.setdefault(p["worker"], set()).add(n["msg_id"])
            elif n["kind"] == NodeKind.RECV:
                recvs.add(n["msg_id"])
    return all(m in recvs for p in pieces for c in p["calls"] for m in c["msg_ids"]
               if m in sends.get(c["caller"], set()))

