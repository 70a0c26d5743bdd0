"""The public recording API (torch side): ``distviz.record`` and ``distviz.name``'s checks.

``record(context_id, roots, names)`` runs on the initiator inside a ``dist_autograd``
context: it gathers every worker's piece (``distviz.recorder.gather``), checks that the
graph can be recorded (a context that exists, whose backward has not run, whose RPCs belong to
it), merges the pieces into a ``Trace`` and drops the node references on every worker again.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed.rpc as rpc

from distviz.errors import RecordError
from distviz.recorder.contexts import context_here, forget
from distviz.recorder.gather import GATHER_THREAD, gather
from distviz.recorder.merge import build_trace
from distviz.recorder.names import names_list
from distviz.recorder.piece import root_ids, root_nrs
from distviz.trace import BackwardPass, NodeKind, Trace
from distviz.words import plural

__all__ = ["record"]


_WHEN = ("call distviz.record inside `with dist_autograd.context() as context_id:`, after "
         "the forward pass and before dist_autograd.backward")


def record(context_id: int, roots: Any, names: Any = None) -> Trace:
    """Public API: see ``distviz.record``. Call on the initiator inside the context.

    Raises ``RecordError`` when there is no such context here, when its backward pass has
    already run, or when the roots' graph was not built in it (it holds no RPC, or RPCs of
    another context)."""
    if isinstance(roots, torch.Tensor):
        roots = [roots]
    roots = list(roots)
    me = rpc.get_worker_info().name
    if not context_here(context_id):
        raise RecordError(f"distviz.record: there is no distributed autograd context "
                          f"{context_id} on {me} (a context ends with its with block); "
                          f"{_WHEN}")
    workers, pieces = gather(context_id, roots, names)
    try:
        _check_recordable(context_id, pieces)
        ids = root_ids(context_id, roots)
        root_vars: list[str] = []
        for r in roots:
            label = next((lab for t, lab in names_list(names) if t is r), None)
            if label:
                root_vars.append(label)
        passes = [BackwardPass(roots=ids, retain_graph=False, root_vars=root_vars,
                               root_nrs=root_nrs(roots))]
        return build_trace(workers, me, context_id, pieces, passes)
    finally:
        # the API records only: drop the node references on every worker, so that the graph
        # can be freed when the user's context ends
        others = [p["worker"] for p in pieces if p["worker"] != me]
        forget(context_id)
        GATHER_THREAD.run(lambda ws: [rpc.rpc_sync(w, forget, args=(context_id,)) for w in ws],
                          others)


def _check_recordable(context_id: int, pieces: list[dict[str, Any]]) -> None:
    """``RecordError`` unless ``pieces`` (from ``gather``) hold a graph whose backward has not
    run yet and whose RPCs belong to ``context_id``."""
    done = [(p["worker"], p.get("grads", 0)) for p in pieces if p.get("grads")]
    if done:
        worker, n = done[0]
        raise RecordError(f"distviz.record: context {context_id} has already run its backward "
                          f"pass ({worker} holds gradients for {plural(n, 'tensor')}); {_WHEN}")
    rpc_nodes = [n for p in pieces for n in p["nodes"]
                 if n["kind"] in (NodeKind.SEND, NodeKind.RECV)]
    foreign = next((n for n in rpc_nodes if n.get("msg_id") is None), None)
    if foreign is not None:
        raise RecordError(f"distviz.record: the roots' graph was built in another context: "
                          f"{foreign['id']} is not a message of context {context_id}; pass the "
                          "id of the context the forward pass ran in")
    if not rpc_nodes:
        raise RecordError(f"distviz.record: context {context_id} holds no RPC: the forward pass "
                          "made none inside it (did it run outside the context?); run the "
                          "forward pass and distviz.record inside `with dist_autograd.context() "
                          "as context_id:`")
