"""The life cycle of a recorded context on one worker (torch side).

Each worker keeps, per context it recorded, a ``WorkerRecord``: the node objects by id (so
that hooks go on exactly those nodes for the real backward), the hook handles and what the
hooks saw. ``keep`` stores it at a recording, ``record_of`` reads it, ``forget`` drops it with
its hooks, and ``sweep`` forgets every context PyTorch no longer holds here. The RPCs a
worker made inside a context (``log_call``, the scenario runtime's) live as long.
``context_here`` asks PyTorch whether a context exists in this process, and ``BACKWARD`` is
PyTorch's own backward, which a traced process's patch never replaces.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed.autograd as dist_autograd

if TYPE_CHECKING:  # pragma: no cover - the trace model loads when a context is recorded
    from distviz.trace import RpcCall

#: PyTorch's ``dist_autograd.backward`` itself (the C++ function): what every observer runs,
#: whatever a traced process's patches put in ``torch.distributed.autograd``.
BACKWARD: Callable[..., Any] = torch._C._distributed_autograd.backward


@dataclass
class WorkerRecord:
    """What one worker keeps for one context: node objects by id, hooks, observed events."""

    worker: str
    ids: dict[Any, str] = field(default_factory=dict)       # node object -> id
    nodes: dict[str, Any] = field(default_factory=dict)     # id -> node object
    handles: list[Any] = field(default_factory=list)
    events: list[tuple[str, int, int]] = field(default_factory=list)   # pre-hooks
    ends: list[tuple[str, int, int]] = field(default_factory=list)     # post-hooks
    shapes: dict[str, list[list[int]] | None] = field(default_factory=dict)


_RECORDS: dict[int, WorkerRecord] = {}
_CALLS: dict[int, list[RpcCall]] = {}                 # context id -> RPC calls made on this worker


def keep(context_id: int, rec: WorkerRecord) -> None:
    """Keep ``rec`` as this worker's record of ``context_id`` (replacing an earlier one)."""
    _RECORDS[context_id] = rec


def record_of(context_id: int) -> WorkerRecord | None:
    """This worker's record of ``context_id``, or ``None`` when it recorded none."""
    return _RECORDS.get(context_id)


def recorded(context_id: int) -> WorkerRecord:
    """This worker's record of ``context_id``; raises ``KeyError`` when it recorded none."""
    return _RECORDS[context_id]


def recorded_contexts() -> list[int]:
    """The ids of the contexts this worker holds a record of."""
    return list(_RECORDS)


def log_call(context_id: int, call: RpcCall) -> None:
    """Remember an RPC made on this worker inside ``context_id`` (used by the scenario runtime)."""
    _CALLS.setdefault(context_id, []).append(call)


def calls_in(context_id: int) -> list[RpcCall]:
    """The RPCs logged on this worker inside ``context_id`` (``log_call``), in call order."""
    return list(_CALLS.get(context_id, []))


def nodes_of(context_id: int) -> dict[str, Any]:
    """The node objects recorded on this worker for ``context_id``, by node id (empty when
    nothing is recorded)."""
    rec = _RECORDS.get(context_id)
    return dict(rec.nodes) if rec is not None else {}


def forget(context_id: int) -> None:
    """Drop this worker's registry entries for ``context_id``, and the hooks
    ``distviz.recorder.hooks.install_hooks`` put on its nodes."""
    rec = _RECORDS.pop(context_id, None)
    if rec is not None:
        for h in rec.handles:
            h.remove()
        rec.handles.clear()
    _CALLS.pop(context_id, None)


def sweep() -> list[int]:
    """Forget every recorded context PyTorch no longer holds here (its initiator left it, and
    PyTorch's clean-up reached this worker); returns their ids. A traced program calls it at
    each recording, instead of a round to every worker when a context ends."""
    gone = [cid for cid in list(_RECORDS) if not context_here(cid)]
    for cid in gone:
        forget(cid)
    return gone


def context_here(context_id: int) -> bool:
    """Whether this process holds the dist autograd context ``context_id``."""
    return context_or_none(context_id) is not None


def context_or_none(context_id: int) -> Any:
    """PyTorch's context ``context_id`` in this process, or ``None``."""
    try:
        return dist_autograd._retrieve_context(context_id)
    except RuntimeError:
        return None


def known_ids(context_id: int) -> list[int]:
    """The worker ids ``context_id``'s context here has sent to or heard from (none when this
    worker has no such context: the local recording then raises PyTorch's error)."""
    ctx = context_or_none(context_id)
    return [] if ctx is None else [int(w) for w in ctx._known_worker_ids()]

