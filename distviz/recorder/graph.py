"""Recorder: the live distributed autograd graph on each worker -> trace pieces (torch side).

``record(context_id, roots, names)`` runs on the initiator inside a ``dist_autograd`` context.
It walks its own context (roots, every send and recv function) and reaches every other worker
through the known-worker ids over RPC (from a helper thread, so the recording RPCs are made
outside the context and add no message ids or known workers). Each worker walks its nodes with
an explicit queue, gives them stable string ids and keeps them in a per-context registry so that
hooks can be installed on exactly those nodes for the real backward.

Only this module and ``distviz.runner`` import torch.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc

from distviz import limits
from distviz.errors import RecordError
from distviz.runner.torch_compat import input_shapes
from distviz.trace import (
    ACCUMULATE_GRAD_SEQ,
    BackwardPass,
    Node,
    RpcCall,
    Trace,
    short_name,
)
from distviz.words import plural


@dataclass
class _WorkerRecord:
    """What one worker keeps for one context: node objects by id, hooks, observed events."""

    worker: str
    ids: dict[Any, str] = field(default_factory=dict)       # node object -> id
    nodes: dict[str, Any] = field(default_factory=dict)     # id -> node object
    handles: list[Any] = field(default_factory=list)
    events: list[tuple[str, int, int]] = field(default_factory=list)   # pre-hooks
    ends: list[tuple[str, int, int]] = field(default_factory=list)     # post-hooks
    shapes: dict[str, list[list[int]] | None] = field(default_factory=dict)


_RECORDS: dict[int, _WorkerRecord] = {}
_NAMES: list[tuple[torch.Tensor, str]] = []          # leaves named on this worker (kept alive)
_AUTO: list[tuple[torch.Tensor, str]] = []           # fallback names (``worker1.ones#0``)
_CALLS: dict[int, list[RpcCall]] = {}                 # context id -> RPC calls made on this worker


def name(tensor: torch.Tensor, label: str) -> torch.Tensor:
    """Give a tensor on this worker a name for traces (``distviz.name(w, "ps.w")``).

    Returns the tensor, so it can wrap an expression. Leaves named on remote workers show up
    under this name in traces recorded by ``record`` on the initiator.
    """
    _NAMES.append((tensor, label))
    return tensor


def auto_name(tensor: torch.Tensor, label: str) -> None:
    """A fallback name for a leaf made at run time (used when no variable names it)."""
    _AUTO.append((tensor, label))


def clear_names() -> None:
    """Forget every name registered with ``name`` or ``auto_name`` on this worker."""
    _NAMES.clear()
    _AUTO.clear()


_NAMERS: list[Callable[[], list[tuple[Any, str]]]] = []


def add_namer(namer: Callable[[], list[tuple[Any, str]]]) -> None:
    """Add a source of names (``(tensor, label)`` pairs), asked at each recording after the
    names given with ``name`` and before the fallback names (the runner names module
    parameters this way: ``ps.EmbeddingTable#0.encoder.weight``)."""
    _NAMERS.append(namer)


_BEFORE_GATHER: list[Callable[[int], None]] = []


def before_gather(hook: Callable[[int], None]) -> None:
    """Call ``hook(context_id)`` at the start of each ``gather`` of a context (once per hook):
    the runner waits there for the replies to the calls a program made in the context and did
    not wait for (``rpc_proxy.wait_replies``), so their callees hold their part of the graph."""
    if hook not in _BEFORE_GATHER:
        _BEFORE_GATHER.append(hook)


def named_here(fallback: bool = True) -> list[tuple[Any, str]]:
    """Every name this worker knows, first name first: ``name``, the namers, and (with
    ``fallback``) ``auto_name``."""
    out: list[tuple[Any, str]] = list(_NAMES)
    for namer in _NAMERS:
        out.extend(namer())
    if fallback:
        out.extend(_AUTO)
    return out


def log_call(context_id: int, call: RpcCall) -> None:
    """Remember an RPC made on this worker inside ``context_id`` (used by the scenario runtime)."""
    _CALLS.setdefault(context_id, []).append(call)


def _kind(fn_name: str) -> str:
    if fn_name.endswith("SendRpcBackward"):
        return "send"
    if fn_name.endswith("RecvRpcBackward"):
        return "recv"
    if fn_name.endswith("AccumulateGrad"):
        return "accumulate_grad"
    return "op"


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
    leaves this worker's registry as it is: a recording already made keeps its hooks and node
    references, and lends its node ids. Raises ``RuntimeError`` (PyTorch's) when the context
    is unknown here.
    """
    ctx = dist_autograd._retrieve_context(context_id)
    worker = rpc.get_worker_info().name
    sends = ctx._send_functions()
    recvs = ctx._recv_functions()
    msg_of: dict[Any, int] = {fn: int(mid) for mid, fn in list(sends.items()) + list(recvs.items())}
    leaf_names, var_of_fn = _names_here(list(names) + named_here())
    order = _walk(list(roots) + [sends[k] for k in sorted(sends)]
                  + [recvs[k] for k in sorted(recvs)] + list(var_of_fn))
    rec = _WorkerRecord(worker=worker)
    earlier = _RECORDS.get(context_id)
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
        _RECORDS[context_id] = rec
    calls = [c.to_json() for c in _CALLS.get(context_id, [])]
    known = sorted(int(w) for w in ctx._known_worker_ids())
    grads = len(dist_autograd.get_gradients(context_id))  # > 0 once a backward pass ran
    return {"worker": worker, "nodes": nodes, "known": known, "calls": calls, "grads": grads,
            "roots": [rec.ids[fn] for fn in roots if fn in rec.ids]}


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


def _walk(starts: list[Any]) -> list[Any]:
    """Every node reachable from ``starts``, breadth-first, each once, in walk order."""
    order: list[Any] = []
    seen: set[Any] = set()
    queue: deque[Any] = deque()
    for fn in starts:
        if fn is not None and fn not in seen:
            seen.add(fn)
            queue.append(fn)
    while queue:
        fn = queue.popleft()
        order.append(fn)
        for nxt, _ in fn.next_functions:
            if nxt is not None and nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return order


def _give_ids(rec: _WorkerRecord, order: list[Any], leaf_names: dict[int, str],
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
        if _kind(fname) == "accumulate_grad":
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


def _node(rec: _WorkerRecord, fn: Any, msg_of: dict[Any, int], leaf_names: dict[int, str],
          inspect_saved: bool) -> Node:
    """The trace node of ``fn`` (without ``vars``)."""
    fname = fn.name()
    kind = _kind(fname)
    node = Node(id=rec.ids[fn], worker=rec.worker, name=fname, kind=kind,
                seq=ACCUMULATE_GRAD_SEQ if kind == "accumulate_grad" else int(fn._sequence_nr()),
                next=[(rec.ids[f], int(i)) if f is not None else None
                      for f, i in fn.next_functions])
    if kind in ("send", "recv"):
        node.msg_id = msg_of.get(fn)
    if kind == "accumulate_grad":
        v = fn.variable
        node.var = leaf_names.get(id(v))
        node.shape = _shape(v)
        node.dtype = _dtype(v)
    node.input_shapes = input_shapes(fn)  # the shapes of the gradients this node receives
    node.python = hasattr(fn, "_forward_cls")   # a custom Function: its backward is Python
    if kind == "op":
        fault = getattr(fn, "distviz_fault", None)
        if isinstance(fault, dict):
            node.fault = dict(fault)
        if inspect_saved:
            node.saved = _has_saved_tensors(fn)
    return node


# -- forgetting a context (its hooks are ``distviz.recorder.hooks``') ----------------------------------------

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
    return _context_or_none(context_id) is not None


def _context_or_none(context_id: int) -> Any:
    """PyTorch's context ``context_id`` in this process, or ``None``."""
    try:
        return dist_autograd._retrieve_context(context_id)
    except RuntimeError:
        return None


# -- the initiator side ------------------------------------------------------------------------

T = TypeVar("T")
_SIDE: dict[int, ThreadPoolExecutor] = {}
_SIDE_NAME = "distviz-gather"


def _side_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """Run ``fn`` in this process's side thread and wait for it (``_side_submit``)."""
    return _side_submit(fn, *args).result()


def _side_submit(fn: Callable[..., T], *args: Any) -> Future[T]:
    """Start ``fn`` in this process's side thread: the dist autograd context is thread-local,
    so RPCs made there are not recorded in the user's context. The thread is made once per
    process (a forked child makes its own: threads do not fork), not once per call. Called
    from the side thread itself, ``fn`` runs at once."""
    if threading.current_thread().name.startswith(_SIDE_NAME):
        return _run_now(fn, *args)
    pool = _SIDE.get(os.getpid())
    if pool is None:
        pool = _SIDE[os.getpid()] = ThreadPoolExecutor(max_workers=1,
                                                       thread_name_prefix=_SIDE_NAME)
    return pool.submit(fn, *args)


def _run_now(fn: Callable[..., T], *args: Any) -> Future[T]:
    """``fn(*args)`` run in this thread, as a finished future (its exception kept in it, as a
    pool's future keeps it)."""
    done: Future[T] = Future()
    try:
        done.set_result(fn(*args))
    except BaseException as exc:  # noqa: BLE001 - handed to the waiter
        done.set_exception(exc)
    return done


def _names_list(names: Any) -> list[tuple[Any, str]]:
    if names is None:
        return []
    if isinstance(names, Mapping):
        out: list[tuple[Any, str]] = []
        for k, v in names.items():
            if isinstance(k, str):
                out.extend(_expand(k, v))
            else:
                out.append((k, str(v)))
        return out
    out2: list[tuple[Any, str]] = []
    for a, b in names:
        if isinstance(a, str):
            out2.extend(_expand(a, b))
        else:
            out2.append((a, str(b)))
    return out2


def _expand(label: str, value: Any) -> list[tuple[Any, str]]:
    """Name a tensor, or the tensors inside lists/tuples (``ws[0]``), iteratively."""
    out: list[tuple[Any, str]] = []
    stack: list[tuple[str, Any, int]] = [(label, value, 0)]
    while stack:
        lab, val, depth = stack.pop()
        if isinstance(val, torch.Tensor):
            out.append((val, lab))
        elif isinstance(val, (list, tuple)) and depth < 3:
            for i in range(len(val) - 1, -1, -1):
                stack.append((f"{lab}[{i}]", val[i], depth + 1))
    return out


def gather(context_id: int, roots: Iterable[Any], names: Any = None,
           inspect_saved: bool = True, record_fn: Callable[..., dict[str, Any]] | None = None
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
    """
    for hook in _BEFORE_GATHER:
        hook(context_id)
    local = record_fn or record_local
    root_fns = [r.grad_fn for r in roots if isinstance(r, torch.Tensor)]
    named = _names_list(names)
    deadline = time.monotonic() + limits.RECORD_SETTLE_TIMEOUT
    while True:
        workers, pieces, pending = _gather_once(context_id, local, root_fns, named, inspect_saved)
        if not pending and _settled(pieces):
            return workers, pieces
        if time.monotonic() >= deadline:
            if pending:
                raise pending[0]
            return workers, pieces
        time.sleep(0.02)


def _gather_once(context_id: int, local: Callable[..., dict[str, Any]], root_fns: list[Any],
                 named: list[tuple[Any, str]], inspect_saved: bool
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

    def fetch(wid: int) -> dict[str, Any] | RuntimeError:
        try:
            return rpc.rpc_sync(by_id[wid], local, args=(context_id, (), (), inspect_saved))
        except RuntimeError as exc:
            if "Could not find autograd context" not in str(exc):
                raise
            return exc

    def ask(batch: list[int]) -> Future[list[dict[str, Any] | RuntimeError]]:
        seen.update(batch)
        asking = _side_submit if batch else _run_now
        return asking(lambda b: [fetch(w) for w in b], batch)

    asked = ask(sorted(set(_known_ids(context_id)) - seen))
    pieces = [local(context_id, root_fns, named, inspect_saved)]
    frontier = [w for w in pieces[0]["known"] if w not in seen]
    while True:
        results = asked.result()
        for piece in results:
            if isinstance(piece, RuntimeError):
                pending.append(piece)
                continue
            pieces.append(piece)
            frontier.extend(w for w in piece["known"] if w not in seen)
        if not frontier:
            return workers, pieces, pending
        asked = ask(sorted(set(frontier) - seen))
        frontier = []


def _known_ids(context_id: int) -> list[int]:
    """The worker ids ``context_id``'s context here has sent to or heard from (none when this
    worker has no such context: the local recording then raises PyTorch's error)."""
    ctx = _context_or_none(context_id)
    return [] if ctx is None else [int(w) for w in ctx._known_worker_ids()]


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
            if n["kind"] == "send":
                sends.setdefault(p["worker"], set()).add(n["msg_id"])
            elif n["kind"] == "recv":
                recvs.add(n["msg_id"])
    return all(m in recvs for p in pieces for c in p["calls"] for m in c["msg_ids"]
               if m in sends.get(c["caller"], set()))


def build_trace(workers: list[str], initiator: str, context_id: int,
                pieces: list[dict[str, Any]], passes: list[BackwardPass]) -> Trace:
    """Merge per-worker pieces into one Trace (nodes sorted by worker rank, walk order kept)."""
    rank = {w: i for i, w in enumerate(workers)}
    pieces = sorted(pieces, key=lambda p: rank[p["worker"]])
    nodes: list[Node] = []
    calls: list[RpcCall] = []
    known: dict[str, list[str]] = {}
    for p in pieces:
        known[p["worker"]] = [workers[k] for k in p["known"]]
        for c in p["calls"]:
            calls.append(RpcCall(**c))
        for n in p["nodes"]:
            nodes.append(Node(
                id=n["id"], worker=n["worker"], name=n["name"], kind=n["kind"], seq=n["seq"],
                next=[(e[0], e[1]) if e is not None else None for e in n["next"]],
                msg_id=n.get("msg_id"), var=n.get("var"), shape=n.get("shape"),
                dtype=n.get("dtype"), input_shapes=n.get("input_shapes"),
                saved=bool(n.get("saved")), fault=n.get("fault"), vars=n.get("vars") or [],
                python=bool(n.get("python"))))
    call_of_msg: dict[int, int] = {}
    for i, c in enumerate(calls):
        for m in c.msg_ids:
            call_of_msg.setdefault(m, i)
    for node in nodes:
        if node.msg_id is not None and node.msg_id in call_of_msg:
            node.call = call_of_msg[node.msg_id]
    return Trace(workers=workers, initiator=initiator, context_id=context_id, nodes=nodes,
                 passes=passes, rpc_calls=calls, known_workers=known,
                 torch_version=torch.__version__,
                 interop_threads=torch.get_num_interop_threads())


def root_ids(context_id: int, roots: Sequence[Any]) -> list[str]:
    """Return the node ids of the roots' grad_fns on this worker (after ``record_local``)."""
    rec = _RECORDS[context_id]
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
            label = next((lab for t, lab in _names_list(names) if t is r), None)
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
        _side_thread(lambda ws: [rpc.rpc_sync(w, forget, args=(context_id,)) for w in ws],
                     others)


def _check_recordable(context_id: int, pieces: list[dict[str, Any]]) -> None:
    """``RecordError`` unless ``pieces`` (from ``gather``) hold a graph whose backward has not
    run yet and whose RPCs belong to ``context_id``."""
    done = [(p["worker"], p.get("grads", 0)) for p in pieces if p.get("grads")]
    if done:
        worker, n = done[0]
        raise RecordError(f"distviz.record: context {context_id} has already run its backward "
                          f"pass ({worker} holds gradients for {plural(n, 'tensor')}); {_WHEN}")
    rpc_nodes = [n for p in pieces for n in p["nodes"] if n["kind"] in ("send", "recv")]
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
