"""The compact trace layout (``schema_version`` 3): the nodes as columns, edges as node indices.

A trace of a million nodes written one JSON object per node (version 1) is 211 bytes a node, and
reading it back means hashing every edge's target id again. Version 3 keeps everything but the
nodes as in version 1 and writes the nodes as parallel arrays: ``ids``, ``worker`` (an index
into ``workers``), ``kind`` (an index into ``KINDS``), ``name`` (an index into ``names``),
``seq``, the next edges as ``next_len`` (per node) with the flat ``next`` (target node index,
-1 for an edge without a function) and ``next_nr`` (input numbers), ``saved`` (0/1),
``msg_id`` and ``call`` as ``[node index, value, ...]`` pairs, and ``more``: ``[node index,
{var, shape, dtype, input_shapes, fault, vars}]`` for the nodes that have any of those.
``Trace.save`` writes it for traces of ``COMPACT_TRACE_NODES`` nodes or more (smaller ones stay
one node per line, to diff well), with orjson; ``distviz.trace.load`` reads versions 1 and 3.
"""

from __future__ import annotations

from itertools import accumulate, repeat
from typing import Any

from distviz.errors import TraceError

__all__ = ["COMPACT_TRACE_NODES", "COMPACT_VERSION", "encode_nodes", "decode_nodes"]

#: The schema version of the compact layout.
COMPACT_VERSION = 3
#: Traces with at least this many nodes are written compact.
COMPACT_TRACE_NODES = 20_000

_KINDS = ("op", "send", "recv", "accumulate_grad")
_MORE = ("var", "shape", "dtype", "input_shapes", "fault", "vars")


def encode_nodes(nodes: list[Any], workers: list[str]) -> dict[str, Any]:
    """The ``nodes`` object of a version 3 trace (see the module docstring)."""
    index = {n.id: i for i, n in enumerate(nodes)}
    wix = {w: k for k, w in enumerate(workers)}
    kix = {k: i for i, k in enumerate(_KINDS)}
    names: dict[str, int] = {}
    name, seq, nlen, nxt, nrs, saved = [], [], [], [], [], []
    msg: list[int] = []
    call: list[int] = []
    more: list[Any] = []
    for i, n in enumerate(nodes):
        k = names.get(n.name)
        if k is None:
            k = names[n.name] = len(names)
        name.append(k)
        seq.append(n.seq)
        nlen.append(len(n.next))
        for e in n.next:
            nxt.append(-1 if e is None else index[e[0]])
            nrs.append(0 if e is None else e[1])
        saved.append(1 if n.saved else 0)
        if n.msg_id is not None:
            msg += [i, n.msg_id]
        if n.call is not None:
            call += [i, n.call]
        extra = {key: getattr(n, key) for key in _MORE if getattr(n, key)}
        if extra:
            more += [i, extra]
    return {"count": len(nodes), "ids": [n.id for n in nodes],
            "worker": [wix[n.worker] for n in nodes], "kind": [kix[n.kind] for n in nodes],
            "names": list(names), "name": name, "seq": seq, "next_len": nlen, "next": nxt,
            "next_nr": nrs, "saved": saved, "msg_id": msg, "call": call, "more": more}


def _column(obj: dict[str, Any], key: str, n: int, source: str, kind: type = int) -> list[Any]:
    col = obj.get(key)
    if not isinstance(col, list) or (n >= 0 and len(col) != n):
        want = f"a list of {n:,} values" if n >= 0 else "a list"
        raise TraceError(f"expected {want}", path=source, key=f"nodes.{key}")
    if col and set(map(type, col)) - {kind}:
        raise TraceError(f"expected {kind.__name__}s", path=source, key=f"nodes.{key}")
    return col


def decode_nodes(obj: Any, workers: list[str], source: str, node: Any
                 ) -> tuple[list[Any], set[str], tuple[list[tuple[int, ...]], list[tuple[int, ...]]]]:
    """The ``node`` objects (``distviz.trace.Node``) of a version 3 ``nodes`` object, their ids, each node's
    next edges as ``(target indices, input numbers)`` tuples (``Trace.edge_index``: the replay
    takes them as they are). Raises ``TraceError`` naming the
    column for a missing or mistyped column, an index out of range or a duplicate id."""
    if not isinstance(obj, dict):
        raise TraceError("expected an object of columns (schema_version 3)", path=source,
                         key="nodes")
    count = obj.get("count")
    if type(count) is not int or count < 0:
        raise TraceError("expected the number of nodes", path=source, key="nodes.count")
    ids = _column(obj, "ids", count, source, str)
    idset = set(ids)
    if len(idset) != count:
        seen: set[str] = set()
        dup = next(x for x in ids if x in seen or seen.add(x))  # type: ignore[func-returns-value]
        raise TraceError(f"duplicate node id {dup!r}", path=source, key="nodes.ids")
    worker = _column(obj, "worker", count, source)
    kind = _column(obj, "kind", count, source)
    names = _column(obj, "names", -1, source, str)
    name = _column(obj, "name", count, source)
    seq = _column(obj, "seq", count, source)
    nlen = _column(obj, "next_len", count, source)
    nxt = _column(obj, "next", sum(nlen), source)
    nrs = _column(obj, "next_nr", len(nxt), source)
    saved = _column(obj, "saved", count, source)
    for key, col, top in (("worker", worker, len(workers)), ("kind", kind, len(_KINDS)),
                          ("name", name, len(names)), ("next", nxt, count)):
        if col and (min(col) < (-1 if key == "next" else 0) or max(col) >= top):
            raise TraceError(f"an index out of range 0..{top - 1}", path=source,
                             key=f"nodes.{key}")
    msg: list[int | None] = [None] * count
    call: list[int | None] = [None] * count
    msg_pairs = _pairs(obj, "msg_id", count, source)
    for i, v in msg_pairs:
        msg[i] = v
    for i, v in _pairs(obj, "call", count, source):
        call[i] = v
    more = _pairs(obj, "more", count, source, dict)
    if len({i for i, _v in msg_pairs if kind[i] in (1, 2)}) < kind.count(1) + kind.count(2):
        i = next(i for i in range(count) if kind[i] in (1, 2) and msg[i] is None)
        raise TraceError(f"a {_KINDS[kind[i]]} node needs 'msg_id'", path=source,
                         key=f"nodes.msg_id ({ids[i]})")
    # one (id, 0) tuple per target, shared by every edge into it: most input numbers are 0
    edge0: list[Any] = list(zip(ids, repeat(0)))
    zero_nr = not any(nrs)
    if zero_nr:   # the common case, in C loops: -1 (no function) picks the None at the end
        edge0.append(None)
        flat: list[Any] = list(map(edge0.__getitem__, nxt))
    else:
        flat = [None if t < 0 else edge0[t] if r == 0 else (ids[t], r)
                for t, r in zip(nxt, nrs, strict=True)]
    offs = list(accumulate(nlen, initial=0))
    spans = list(map(slice, offs, offs[1:]))
    edges = list(map(flat.__getitem__, spans))
    tgt = list(map(tuple, map(nxt.__getitem__, spans)))
    zeros = {k: (0,) * k for k in set(nlen)}
    if zero_nr:
        ins = list(map(zeros.__getitem__, nlen))
    else:
        ins = [zeros[len(t)] if not any(r := nrs[sp]) else tuple(r)
               for t, sp in zip(tgt, spans, strict=True)]
    none: list[None] = [None] * count
    empty: list[str] = []   # shared by the nodes without variables (code replaces, never appends)
    nodes = list(map(node, ids, map(workers.__getitem__, worker), map(names.__getitem__, name),
                     map(_KINDS.__getitem__, kind), seq, edges, msg, none, none, none, none,
                     map(bool, saved), none, [empty] * count, call))
    for i, ex in more:   # leaves' variables and shapes, faults, variables of a grad_fn
        nd = nodes[i]
        nd.var, nd.shape, nd.dtype = ex.get("var"), ex.get("shape"), ex.get("dtype")
        nd.input_shapes, nd.fault = ex.get("input_shapes"), ex.get("fault")
        nd.vars = [str(v) for v in ex.get("vars") or []]
    return nodes, idset, (tgt, ins)


def _pairs(obj: dict[str, Any], key: str, count: int, source: str,
           kind: type = int) -> list[tuple[int, Any]]:
    col = obj.get(key) or []
    if not isinstance(col, list) or len(col) % 2:
        raise TraceError("expected [node index, value, ...] pairs", path=source,
                         key=f"nodes.{key}")
    out = list(zip(col[::2], col[1::2], strict=True))
    for i, v in out:
        if type(i) is not int or not 0 <= i < count or type(v) is not kind:
            raise TraceError(f"expected [node index, {kind.__name__}] pairs", path=source,
                             key=f"nodes.{key}")
    return out
