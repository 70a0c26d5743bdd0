"""The trace as an indexed graph, and the graph facts every view shares.

* ``IndexedGraph``: node ids mapped to integers once, next edges as flat tuples (the replay's hot
  loop reads nothing else).
* ``count_dependencies``: PyTorch's ``computeDependencies`` (internals §2.2): a BFS from some
  sources' next edges that counts **one per edge** from each reached node.
* ``initial_dependencies``: FAST mode's initial dependency count of every node in a pass, per
  worker: the BFS from the ``GraphRoot`` (the pass roots, on the initiator) plus every
  participating send. The engine and every view (terminal graph and state, step log, DOT/SVG/PNG,
  HTML viewer, Perfetto) use this one computation. A root's count includes the ``GraphRoot``'s
  edge to it, so a root starts at 1 (or more) and becomes ready when the ``GraphRoot`` runs.
* ``reachable_nodes`` and ``lineage_sends``: what the roots reach across workers (recv -> the
  send with the same message id), and SMART mode's participating sends.

Every walk is iterative (explicit queues and stacks), so graphs of any depth work.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from itertools import accumulate, compress
from typing import Any

from distviz.errors import TraceError
from distviz.outcome import Mode
from distviz.replay.undefined import PYTHON_BACKWARDS, known_python, python_out
from distviz.trace import ACCUMULATE_GRAD_SEQ, NodeKind, Trace, short_name
from distviz.trace.compact import NodeColumns

__all__ = ["ACC", "FAULT", "MODES", "OP", "PYTHON", "RECV", "SAVED", "SEND", "IndexedGraph",
           "count_dependencies",
           "initial_dependencies", "lineage_sends", "participating_sends", "reachable_nodes"]

MODES = tuple(m.value for m in Mode)
OP, SEND, RECV, ACC = 0, 1, 2, 3
#: the bits of ``IndexedGraph.flags[i]``: the node holds saved tensors; the node has a recorded
#: fault (it raises, or its worker dies)
SAVED, FAULT = 1, 2
#: ``flags[i]``'s bit for a custom Function's node whose backward the replay knows
#: (``distviz.replay.undefined``; its table of outgoing states is ``python_out[i]``)
PYTHON = 4
_KIND = {NodeKind.OP: OP, NodeKind.SEND: SEND, NodeKind.RECV: RECV, NodeKind.ACCUMULATE_GRAD: ACC}


class _RootIndex(dict[str, int]):
    """``{node id: index}`` for the few ids looked up (the roots) when no full map is built."""

    def __init__(self, ids: list[str]) -> None:
        super().__init__()
        self.ids = ids

    def __missing__(self, key: str) -> int:
        i = self.ids.index(key)
        self[key] = i
        return i


class IndexedGraph:
    """The trace's nodes as integer indices and flat lists, built once per replay.

    ``targets[i]`` and ``nrs[i]`` (made on first use; the replay reads the flat ``next`` and
    ``next_nr``) are tuples with the next edges' target indices (``-1`` for an edge without a
    function) and input numbers. ``key[i]`` is the ready-queue priority
    (``2**64 - 1`` for AccumulateGrad). ``flags[i]`` has the bit ``SAVED`` for saved tensors, ``FAULT`` for a
    recorded fault (no per-node objects: a million tuples would cost the collector a pass).
    Index ints are shared objects, so per-event payloads that mention nodes cost no new ints. Raises ``TraceError``
    when a pass has a root that is not on the initiator.
    """

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.n = len(trace.nodes)
        self.workers = list(trace.workers)
        wix = {w: k for k, w in enumerate(self.workers)}
        # message ids name the sender by RPC rank; a trace may hold only some workers
        self.rank_index = trace.worker_index()
        self.ranks: list[int] = list(trace.ranks) if trace.ranks is not None else \
            list(range(len(self.workers)))
        self.initiator = wix[trace.initiator]
        cols = trace.nodes if isinstance(trace.nodes, NodeColumns) else None
        self.ids: list[str] = list(cols.ids) if cols is not None else [nd.id for nd in trace.nodes]
        self._index: dict[str, int] | None = None
        self.saved = bytearray(self.n)
        self.fault: dict[int, dict[str, Any]] = {}
        #: the shapes of the gradients a node receives (a recv: those it sends), when recorded
        self.input_shapes: dict[int, list[list[int]]] = {}
        #: a known custom Function's node: the state of what its backward returns, indexed by
        #: the state of what it got (``undefined.python_out``)
        self.python_out: dict[int, tuple[int, int, int]] = {}
        # per-node tuples of ``next``/``next_nr``, made on first use (``targets``, ``nrs``)
        self._targets: list[tuple[int, ...]] | None = None
        self._nrs: list[tuple[int, ...]] | None = None
        index = self._build_nodes(trace, wix) if cols is None else self._build_columns(cols, wix)
        self._build_sends()
        self.roots = self._pass_roots(trace, index)
        # BFS marks: shared scratch space, never part of a snapshot (the stamp only grows)
        self.mark: list[int] = [0] * self.n
        self.stamp = 0

    def _build_nodes(self, trace: Trace, wix: dict[str, int]) -> dict[str, int]:
        """Fill the per-node lists from ``Node`` objects; return ``{node id: index}`` (not kept:
        it is big)."""
        nums = list(range(self.n))
        index = dict(zip(self.ids, nums, strict=True))
        kind: list[int] = []
        key: list[int] = []
        worker: list[int] = []
        nxt: list[int] = []     # every next edge's target index, node after node
        nr: list[int] = []      # and its input number
        at: list[int] = [0]
        msg: list[int] = []
        names: list[str] = []     # MulBackward0, AccumulateGrad(t4), RecvRpcBackward(t3)
        short: dict[str, str] = {}
        nodes_of: list[list[int]] = [[] for _ in self.workers]
        for i, nd in zip(nums, trace.nodes, strict=True):
            k = _KIND[nd.kind]
            kind.append(k)
            w = wix[nd.worker]
            worker.append(w)
            nodes_of[w].append(i)
            if k == ACC:
                key.append(ACCUMULATE_GRAD_SEQ)
                names.append(f"AccumulateGrad({nd.var})" if nd.var else "AccumulateGrad")
            else:
                key.append(nd.seq)
                d = short.get(nd.name)
                if d is None:
                    d = short[nd.name] = short_name(nd.name)
                names.append(f"{d}({', '.join(nd.vars)})" if k == RECV and nd.vars else d)
            nx = nd.next
            if len(nx) == 1 and nx[0] is not None:
                e = nx[0]
                nxt.append(index[e[0]])
                nr.append(e[1])
            elif nx:
                nxt.extend([index[e[0]] if e is not None else -1 for e in nx])
                nr.extend([e[1] if e is not None else 0 for e in nx])
            at.append(len(nxt))
            msg.append(-1 if nd.msg_id is None else nd.msg_id)
            if nd.saved:
                self.saved[i] = SAVED
            if nd.fault is not None:
                self.fault[i] = nd.fault
            if nd.input_shapes is not None:
                self.input_shapes[i] = nd.input_shapes
            if nd.python:
                known = known_python(nd)
                if known is not None:
                    self.python_out[i] = python_out(known)
        self.kind, self.key, self.worker = kind, key, worker
        self.next, self.next_at = nxt, at
        self.next_nr: list[int] | None = nr if any(nr) else None
        self.msg, self.names = msg, names
        self.nodes_of = nodes_of
        self.flags = bytearray(self.saved)
        for i in self.fault:
            self.flags[i] |= FAULT
        for i in self.python_out:
            self.flags[i] |= PYTHON
        return index

    def _build_columns(self, cols: NodeColumns, wix: dict[str, int]) -> dict[str, int]:
        """Fill the same lists as ``_build_nodes`` straight from a compact trace's columns, in C
        loops (``map``, ``zip``, ``compress``) but for the sparse fields; no ``Node`` is made.
        Return ``{node id: index}`` for the few ids looked up (the roots)."""
        nums = list(range(self.n))
        kind = list(cols.kind)
        remap = [wix[w] for w in cols.workers]
        worker = list(map(remap.__getitem__, cols.worker))
        acc = list(compress(nums, map(ACC.__eq__, kind)))
        key = list(cols.seq)
        short = [short_name(s) for s in cols.names]
        names = list(map(short.__getitem__, cols.name))
        for i in acc:
            key[i] = ACCUMULATE_GRAD_SEQ
            names[i] = "AccumulateGrad"
        for i in sorted(cols.more):   # leaves' variables, variables of a recv, faults
            ex = cols.more[i]
            if kind[i] == ACC and ex.get("var"):
                names[i] = f"AccumulateGrad({ex['var']})"
            elif kind[i] == RECV and ex.get("vars"):
                names[i] = f"{names[i]}({', '.join(map(str, ex['vars']))})"
            if ex.get("fault") is not None:
                self.fault[i] = ex["fault"]
            if ex.get("input_shapes") is not None:
                self.input_shapes[i] = ex["input_shapes"]
            if ex.get("python") and ex.get("custom") in PYTHON_BACKWARDS:
                self.python_out[i] = python_out(PYTHON_BACKWARDS[ex["custom"]])
        offs = cols.offsets
        # target indices as the shared ints of nums (-1, no function, picks the -1 at the end)
        self.next = list(map([*nums, -1].__getitem__, cols.next))
        self.next_at = offs.tolist()
        self.next_nr = None
        if cols.next_nr is not None:    # an edge without a function has input number 0
            fnr = list(map(operator.mul, map((-1).__ne__, cols.next), cols.next_nr))
            self.next_nr = fnr if any(fnr) else None
        msg = [-1] * self.n
        for i, m in cols.msg_id.items():
            msg[i] = m
        self.saved[:] = cols.saved
        # each worker's nodes in order: a stable sort by worker, cut where the next one starts
        by_worker = sorted(nums, key=worker.__getitem__)
        wcol = bytes(worker) if len(self.workers) <= 256 else worker
        cuts = list(accumulate(map(wcol.count, range(len(self.workers))), initial=0))
        nodes_of = list(map(by_worker.__getitem__, map(slice, cuts, cuts[1:])))
        self.kind, self.key, self.worker = kind, key, worker
        self.msg, self.names = msg, names
        self.nodes_of = nodes_of
        self.flags = bytearray(self.saved)
        for i in self.fault:
            self.flags[i] |= FAULT
        for i in self.python_out:
            self.flags[i] |= PYTHON
        return _RootIndex(self.ids)

    def _build_sends(self) -> None:
        self.send_by_msg: dict[int, int] = {}
        self.recv_by_msg: dict[int, int] = {}
        sends: list[list[tuple[int, int]]] = [[] for _ in self.workers]
        msg, worker, nums = self.msg, self.worker, range(self.n)
        for i in compress(nums, map(SEND.__eq__, self.kind)):
            self.send_by_msg.setdefault(msg[i], i)
            sends[worker[i]].append((msg[i], i))
        for i in compress(nums, map(RECV.__eq__, self.kind)):
            self.recv_by_msg.setdefault(msg[i], i)
        # a context's send functions are a std::map keyed by message id: sorted
        self.sends_of: list[list[int]] = [[i for _, i in sorted(s)] for s in sends]

    def _pass_roots(self, trace: Trace, index: dict[str, int]) -> list[list[int]]:
        roots: list[list[int]] = []
        for p, bp in enumerate(trace.passes):
            rs = [index[r] for r in bp.roots]
            for r in rs:
                if self.worker[r] != self.initiator:
                    raise TraceError(
                        f"root {self.ids[r]!r} is on {self.workers[self.worker[r]]}, not on the "
                        f"initiator {trace.initiator}; roots must be tensors of the worker that "
                        "calls backward", key=f"passes[{p}].roots")
            roots.append(rs)
        return roots

    @property
    def targets(self) -> list[tuple[int, ...]]:
        """Each node's next edges' target indices as a tuple (-1: an edge without a function),
        built on first use from ``next``: node ``i``'s are ``next[next_at[i]:next_at[i + 1]]``
        (the replay reads those; a million tuples would cost the collector a pass)."""
        if self._targets is None:
            nxt, at = self.next, self.next_at
            self._targets = list(map(tuple, map(nxt.__getitem__, map(slice, at, at[1:]))))
        return self._targets

    @property
    def index(self) -> dict[str, int]:
        """``{node id: index}``, built on first use (it is big for big traces)."""
        if self._index is None:
            self._index = {nid: i for i, nid in enumerate(self.ids)}
        return self._index

    @property
    def nrs(self) -> list[tuple[int, ...]]:
        """Each node's next edges' input numbers as a tuple, built on first use from
        ``next_nr`` (the replay reads that flat list, or nothing when every number is 0)."""
        if self._nrs is None:
            at = self.next_at
            flat = self.next_nr if self.next_nr is not None else [0] * len(self.next)
            self._nrs = list(map(tuple, map(flat.__getitem__, map(slice, at, at[1:]))))
        return self._nrs

    def edges(self, i: int) -> list[tuple[int, int]]:
        """Return node ``i``'s next edges as ``(target index, input_nr)``."""
        a, b = self.next_at[i], self.next_at[i + 1]
        nrs = self.next_nr[a:b] if self.next_nr is not None else [0] * (b - a)
        return list(zip(self.next[a:b], nrs, strict=True))

    def slot_bits(self, i: int, t: int) -> int:
        """The input slots of ``t`` that node ``i``'s next edges feed, one bit each (a node
        may feed two slots of one recv: both outputs of an RPC's result used by one op)."""
        a, b = self.next_at[i], self.next_at[i + 1]
        nr = self.next_nr
        if nr is None:
            return 1
        bits = 0
        for j in range(a, b):
            if self.next[j] == t:
                bits |= 1 << nr[j]
        return bits

    def disp(self, i: int) -> str:
        """Return a short display name: ``MulBackward0``, ``AccumulateGrad(t4)``, or
        ``RecvRpcBackward(t3)`` (a recv with the variables its RPC result was assigned to)."""
        return self.names[i]

    def target_send(self, msg_id: int) -> tuple[int, int]:
        """Return ``(worker index, send index)`` a recv with ``msg_id`` sends to; -1 when missing."""
        to = self.rank_index.get(msg_id >> 48, -1)
        if to < 0:
            return -1, -1
        s = self.send_by_msg.get(msg_id, -1)
        if s >= 0 and self.worker[s] != to:
            s = -1
        return to, s


def count_dependencies(g: IndexedGraph, sources: Iterable[tuple[int, ...]],
                       deps: list[int]) -> list[int]:
    """``computeDependencies``: count one per next edge from each source and each reached node.

    ``sources`` are edge-target tuples (the ``GraphRoot``'s roots, each send's next edges).
    Writes the counts into ``deps`` (indexed by node; only the returned nodes are meaningful)
    and returns the reached nodes in BFS order. Uses ``g.mark`` as scratch space.
    """
    nxt, at, mark = g.next, g.next_at, g.mark
    g.stamp += 1
    stamp = g.stamp
    order: list[int] = []
    for es in sources:
        for t in es:
            if t < 0:
                continue
            if mark[t] != stamp:
                mark[t] = stamp
                deps[t] = 1
                order.append(t)
            else:
                deps[t] += 1
    k = 0
    while k < len(order):
        x = order[k]
        k += 1
        for t in nxt[at[x]:at[x + 1]]:
            if t < 0:
                continue
            if mark[t] != stamp:
                mark[t] = stamp
                deps[t] = 1
                order.append(t)
            else:
                deps[t] += 1
    return order


def dependency_sources(g: IndexedGraph, w: int, pass_index: int,
                       sends: Iterable[int]) -> list[tuple[int, ...]]:
    """The BFS sources of worker ``w``: the GraphRoot's edges on the initiator, then each send's."""
    sources: list[tuple[int, ...]] = []
    if w == g.initiator:
        sources.append(tuple(g.roots[pass_index]))
    nxt, at = g.next, g.next_at
    for s in sends:
        sources.append(tuple(nxt[at[s]:at[s + 1]]))
    return sources


def reachable_nodes(g: IndexedGraph, roots: list[int]) -> bytearray:
    """Return a flag per node: reachable from ``roots`` along next edges and, across workers,
    from each reached recv to the send with the same message id (the gradient's path)."""
    seen = bytearray(g.n)
    stack = list(roots)
    for r in roots:
        seen[r] = 1
    nxt, at, kind, msg = g.next, g.next_at, g.kind, g.msg
    while stack:
        x = stack.pop()
        for t in nxt[at[x]:at[x + 1]]:
            if t >= 0 and not seen[t]:
                seen[t] = 1
                stack.append(t)
        if kind[x] == RECV:
            _to, s = g.target_send(msg[x])
            if s >= 0 and not seen[s]:
                seen[s] = 1
                stack.append(s)
    return seen


def lineage_sends(g: IndexedGraph, roots: list[int]) -> bytearray:
    """SMART mode: a flag per node, set for the sends in the roots' lineage (their paired recv
    is reachable from the roots)."""
    seen = reachable_nodes(g, roots)
    out = bytearray(g.n)
    for sends in g.sends_of:
        for s in sends:
            r = g.recv_by_msg.get(g.msg[s], -1)
            if r >= 0 and seen[r]:
                out[s] = 1
    return out


def participating_sends(g: IndexedGraph, pass_index: int, mode: Mode) -> list[list[int]]:
    """Per worker, the sends that take part in pass ``pass_index``: all of them in FAST mode,
    the roots' lineage in SMART mode. Raises ``ValueError`` for an unknown mode."""
    if mode == Mode.FAST:
        return g.sends_of
    if mode != Mode.SMART:
        raise ValueError(f"unknown replay mode {mode!r} (expected one of {', '.join(MODES)})")
    flags = lineage_sends(g, g.roots[pass_index])
    return [[s for s in sends if flags[s]] for sends in g.sends_of]


def initial_dependencies(trace: Trace | IndexedGraph, pass_index: int = 0,
                         mode: Mode = Mode.FAST) -> dict[str, int]:
    """Return ``{node id: initial dependency count}`` for pass ``pass_index``.

    Per worker, what ``computeDependencies`` counts when that worker starts the pass: a BFS
    from the ``GraphRoot`` (on the initiator: one edge to each root) and every participating
    send (all sends in FAST mode, the roots' lineage in ``mode="smart"``), one per edge. Roots
    therefore start at 1 or more; participating sends, which no edge points at, have 0; nodes
    nothing reaches (and, in SMART mode, sends that do not take part) are absent. A trace
    without passes has no counts (nothing computes them). Raises ``IndexError`` for a pass
    that does not exist (when any do).
    """
    g = trace if isinstance(trace, IndexedGraph) else IndexedGraph(trace)
    if not g.roots:
        return {}
    g.roots[pass_index]  # noqa: B018 - IndexError for a pass that does not exist
    part = participating_sends(g, pass_index, mode)
    deps = [0] * g.n
    out: dict[str, int] = {}
    ids = g.ids
    for w in range(len(g.workers)):
        for i in count_dependencies(g, dependency_sources(g, w, pass_index, part[w]), deps):
            out[ids[i]] = deps[i]
        for s in part[w]:
            out.setdefault(ids[s], 0)   # a BFS source: no edge points at a send
    return out
