"""One worker's piece of the live distributed autograd graph (torch side): walk, ids, nodes.

``record_local(context_id, roots, names)`` walks this worker's part of a context (roots, every
send and recv function, the grad_fns of named tensors) with ``walk.reachable``, gives each node
a stable string id (``worker1/AddBackward0#3``, ``worker0/AccumulateGrad(w)``) and keeps the
node objects in the context's ``WorkerRecord`` (``distviz.recorder.contexts``), so that hooks
go on exactly those nodes for the real backward. ``distviz.recorder.gather`` calls it on
every worker of a context.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc

from distviz.recorder import contexts
from distviz.recorder.contexts import WorkerRecord
from distviz.recorder.names import auto_names, named_here
from distviz.recorder.torch_compat import input_shapes
from distviz.recorder.walk import reachable
from distviz.trace import ACCUMULATE_GRAD_SEQ, Node, NodeKind, short_name


def node_kind(fn_name: str) -> NodeKind:
    """A node's kind in the trace from its PyTorch name: ``send``, ``recv``,
    ``accumulate_grad`` or ``op``."""
    if fn_name.endswith("SendRpcBackward"):
        return NodeKind.SEND
    if fn_name.endswith("RecvRpcBackward"):
        return NodeKind.RECV
    if fn_name.endswith("AccumulateGrad"):
        return NodeKind.ACCUMULATE_GRAD
    return NodeKind.OP


def _has_saved_tensors(fn: Any) -> bool:
    for attr in dir(fn):
        if attr.startswith("_saved_") and not attr.endswith("_raw"):
            try:
                val = getattr(fn, attr)
            except Exception:  # freed already: it did hold a tensor
                return True
            if isinstance(val, torch.Tensor):
                return True
            if isinstance(val, (tuple, list)) and any(isinstance(v, torch.Tensor) for v in val):
                return True
    return False


def _shape(t: Any) -> list[int]:
    return [int(s) for s in t.shape]


def _dtype(t: Any) -> str:
    return str(t.dtype).replace("torch.", "")


def record_local(context_id: int, roots: Sequence[Any] = (),
                 names: Sequence[tuple[Any, str]] = (),
                 inspect_saved: bool = True, keep: bool = True) -> dict[str, Any]:
    """Walk this worker's part of the graph of ``context_id`` and return it as JSON-able data
    (``roots``: the node ids of the roots found here).

    The walk starts at ``roots`` (grad_fns, initiator only), then every send function (sorted
    by message id), then every recv function, then the grad_fns of named tensors; it iterates
    with a queue, never recursion. ``keep=False`` (``distviz snapshot`` of a running job)
    leaves this worker's record as it is: a recording already made keeps its hooks and node
    references, and lends its node ids. Raises ``RuntimeError`` (PyTorch's) when the context
    is unknown here.
    """
    ctx = dist_autograd._retrieve_context(context_id)
    worker = rpc.get_worker_info().name
    sends = ctx._send_functions()
    recvs = ctx._recv_functions()
    msg_of: dict[Any, int] = {fn: int(mid) for mid, fn in list(sends.items()) + list(recvs.items())}
    given = list(names) + named_here(fallback=False)
    leaf_names, var_of_fn = _names_here(given + auto_names())
    order = reachable(list(roots) + [sends[k] for k in sorted(sends)]
                  + [recvs[k] for k in sorted(recvs)] + list(var_of_fn))
    rec = WorkerRecord(worker=worker)
    earlier = contexts.record_of(context_id)
    if earlier is not None:   # recorded again (a later pass): every node keeps its id
        for h in earlier.handles if keep else ():
            h.remove()
        reached = set(order)
        order += [fn for fn in earlier.nodes.values() if fn not in reached]
    _give_ids(rec, order, leaf_names, earlier.ids if earlier is not None else {})
    nodes: list[dict[str, Any]] = []
    for fn in order:
        node = _node(rec, fn, msg_of, leaf_names, inspect_saved)
        node.vars = sorted(var_of_fn.get(fn, []))
        rec.shapes[node.id] = node.input_shapes
        nodes.append(node.to_json())
    if keep:
        contexts.keep(context_id, rec)
    calls = [c.to_json() for c in contexts.calls_in(context_id)]
    known = sorted(int(w) for w in ctx._known_worker_ids())
    grads = len(dist_autograd.get_gradients(context_id))  # > 0 once a backward pass ran
    # the workers it only heard from (a message id holds its sender's id in its top 16 bits):
    # the owner of an RRef whose backward runs there may have sent nothing in the forward
    heard = sorted({int(mid) >> 48 for mid in recvs} - set(known))
    return {"worker": worker, "nodes": nodes, "known": known, "heard": heard, "calls": calls,
            "grads": grads,
            "roots": [rec.ids[fn] for fn in roots if fn in rec.ids],
            "absent": absent_leaves(worker, given, order)}


#: At most this many named tensors outside the graph are written per worker.
MAX_ABSENT = 1000


def absent_leaves(worker: str, named: list[tuple[Any, str]], order: list[Any]
                  ) -> list[dict[str, Any]]:
    """The tensors ``named`` (the program's names and module parameters, not the fallback
    names of run-time tensors) that are no leaf of this worker's graph (``order``), first
    name first, at most ``MAX_ABSENT``: ``AbsentLeaf`` JSON (``docs/trace-format.md``)."""
    in_graph: set[int] = set()
    for fn in order:
        v = getattr(fn, "variable", None)   # an AccumulateGrad's leaf
        if isinstance(v, torch.Tensor):
            in_graph.add(id(v))
    seen: set[int] = set()
    taken = {label for tensor, label in named if id(tensor) in in_graph}
    out: list[dict[str, Any]] = []
    for tensor, label in named:
        if not isinstance(tensor, torch.Tensor) or id(tensor) in seen:
            continue
        seen.add(id(tensor))
        if tensor.grad_fn is not None or id(tensor) in in_graph or label in taken:
            continue
        taken.add(label)
        entry: dict[str, Any] = {
            "var": label, "worker": worker,
            "why": "not_reached" if tensor.requires_grad else "requires_grad_false",
            "shape": _shape(tensor), "dtype": _dtype(tensor)}
        if isinstance(tensor, torch.nn.Parameter):
            entry["parameter"] = True
        if tensor.grad is not None:
            entry["grad"] = True
        out.append(entry)
        if len(out) >= MAX_ABSENT:
            break
    return out


def _names_here(named: list[tuple[Any, str]]) -> tuple[dict[int, str], dict[Any, list[str]]]:
    """Names of leaves (by tensor id; the first name wins) and of grad_fns (every name)."""
    leaf_names: dict[int, str] = {}
    var_of_fn: dict[Any, list[str]] = {}
    for tensor, label in named:
        if not isinstance(tensor, torch.Tensor):
            continue
        if tensor.grad_fn is None:
            if tensor.requires_grad and id(tensor) not in leaf_names:
                leaf_names[id(tensor)] = label
        else:
            var_of_fn.setdefault(tensor.grad_fn, []).append(label)
    return leaf_names, var_of_fn


def _give_ids(rec: WorkerRecord, order: list[Any], leaf_names: dict[int, str],
              earlier: dict[Any, str]) -> None:
    """Stable ids: ``worker/Name#seq``, ``worker/AccumulateGrad(var)`` or
    ``worker/AccumulateGrad#k`` for unnamed leaves, ``~n`` added to repeats. A node of an
    ``earlier`` recording of the context keeps its id there; new nodes get ids it does not use."""
    used: dict[str, int] = {}
    taken = set(earlier.values())
    unnamed_leaf = 0
    for fn in order:
        known = earlier.get(fn)
        if known is not None:
            rec.ids[fn] = known
            rec.nodes[known] = fn
            continue
        fname = fn.name()
        if node_kind(fname) == NodeKind.ACCUMULATE_GRAD:
            var = leaf_names.get(id(fn.variable))
            if var is not None:
                base = f"{rec.worker}/AccumulateGrad({var})"
            else:
                base = f"{rec.worker}/AccumulateGrad#{unnamed_leaf}"
                while base in taken:
                    unnamed_leaf += 1
                    base = f"{rec.worker}/AccumulateGrad#{unnamed_leaf}"
                unnamed_leaf += 1
        else:
            base = f"{rec.worker}/{short_name(fname)}#{int(fn._sequence_nr())}"
        n = used.get(base, 0)
        nid = base if n == 0 else f"{base}~{n}"
        while nid in taken:
            n += 1
            nid = f"{base}~{n}"
        used[base] = n + 1
        rec.ids[fn] = nid
        rec.nodes[nid] = fn


def _node(rec: WorkerRecord, fn: Any, msg_of: dict[Any, int], leaf_names: dict[int, str],
          inspect_saved: bool) -> Node:
    """The trace node of ``fn`` (without ``vars``)."""
    fname = fn.name()
    kind = node_kind(fname)
    node = Node(id=rec.ids[fn], worker=rec.worker, name=fname, kind=kind,
                seq=ACCUMULATE_GRAD_SEQ if kind == NodeKind.ACCUMULATE_GRAD
                else int(fn._sequence_nr()),
                next=[(rec.ids[f], int(i)) if f is not None else None
                      for f, i in fn.next_functions])
    if kind in (NodeKind.SEND, NodeKind.RECV):
        node.msg_id = msg_of.get(fn)
    if kind == NodeKind.ACCUMULATE_GRAD:
        v = fn.variable
        node.var = leaf_names.get(id(v))
        node.shape = _shape(v)
        node.dtype = _dtype(v)
    node.input_shapes = input_shapes(fn)  # the shapes of the gradients this node receives
    node.python = hasattr(fn, "_forward_cls")   # a custom Function: its backward is Python
    if node.python:     # the scenario language's own Functions say which they are
        custom = getattr(fn._forward_cls, "distviz_custom", None)
        node.custom = custom if isinstance(custom, str) else None
    if kind == NodeKind.OP:
        fault = getattr(fn, "distviz_fault", None)
        if isinstance(fault, dict):
            node.fault = dict(fault)
        if inspect_saved:
            node.saved = _has_saved_tensors(fn)
    return node

def root_ids(context_id: int, roots: Sequence[Any]) -> list[str]:
    """Return the node ids of the roots' grad_fns on this worker (after ``record_local``)."""
    rec = contexts.recorded(context_id)
    out = []
    for r in roots:
        fn = r.grad_fn if isinstance(r, torch.Tensor) else None
        if fn is None or fn not in rec.ids:
            raise ValueError("a backward root has no grad_fn in the recorded graph; roots must be "
                             "scalar tensors computed from tensors that require grad")
        out.append(rec.ids[fn])
    return out


def root_nrs(roots: Sequence[Any]) -> list[int]:
    """Return each root's ``output_nr``: the input of its grad_fn the backward seeds."""
    return [int(r.output_nr) for r in roots]


