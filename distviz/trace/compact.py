"""The compact trace layout (``schema_version`` 3): the nodes as columns, edges as node indices.

A trace of a million nodes written one JSON object per node (version 1) is 211 bytes a node, and
reading it back means hashing every edge's target id again. Version 3 keeps everything but the
nodes as in version 1 and writes the nodes as parallel arrays: ``ids``, ``worker`` (an index
into ``workers``), ``kind`` (an index into ``KINDS``), ``name`` (an index into ``names``),
``seq``, the next edges as ``next_len`` (per node) with the flat ``next`` (target node index,
-1 for an edge without a function) and ``next_nr`` (input numbers), ``saved`` (0/1),
``msg_id`` and ``call`` as ``[node index, value, ...]`` pairs, and ``more``: ``[node index,
{var, shape, dtype, input_shapes, fault, vars, python, custom}]`` for the nodes that have any of those.
``Trace.save`` writes it for traces of ``COMPACT_TRACE_NODES`` nodes or more (smaller ones stay
one node per line, to diff well), with orjson; ``distviz.trace.load`` reads versions 1 and 3.
"""

from __future__ import annotations

import gc
import json
import operator
from array import array
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from itertools import accumulate, compress, count, repeat
from typing import Any, overload

from distviz.errors import TraceError
from distviz.trace.node import KINDS, Node, NodeKind

try:
    import orjson
except ImportError:  # pragma: no cover - a declared dependency; json is the fallback
    orjson = None  # type: ignore[assignment]

__all__ = ["COMPACT_TRACE_NODES", "COMPACT_VERSION", "NodeColumns", "decode_nodes",
           "encode_nodes", "json_bytes"]

#: The schema version of the compact layout.
COMPACT_VERSION = 3
#: Traces with at least this many nodes are written compact.
COMPACT_TRACE_NODES = 20_000

_KINDS = KINDS   # a node kind is its index here
_MORE = ("var", "shape", "dtype", "input_shapes", "fault", "vars", "python", "custom")
_COPIED = frozenset(("shape", "input_shapes", "fault"))   # lists and dicts: each node its own
_CHUNK = 4096   # nodes built at a time while iterating


def encode_nodes(nodes: Sequence[Any], workers: list[str]) -> dict[str, Any]:
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


def decode_nodes(obj: Any, workers: list[str], source: str) -> tuple[NodeColumns, set[str]]:
    """The nodes of a version 3 ``nodes`` object (as ``NodeColumns``) and their ids. Raises
    ``TraceError`` naming the column for a missing or mistyped column, an index or a length out
    of range or a duplicate id."""
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
    if nlen and min(nlen) < 0:
        raise TraceError("a length below 0", path=source, key="nodes.next_len")
    nxt = _column(obj, "next", sum(nlen), source)
    nrs = _column(obj, "next_nr", len(nxt), source)
    saved = _column(obj, "saved", count, source)
    for key, col, top in (("worker", worker, len(workers)), ("kind", kind, len(_KINDS)),
                          ("name", name, len(names)), ("next", nxt, count)):
        if col and (min(col) < (-1 if key == "next" else 0) or max(col) >= top):
            raise TraceError(f"an index out of range 0..{top - 1}", path=source,
                             key=f"nodes.{key}")
    msg = dict(_pairs(obj, "msg_id", count, source))
    call = dict(_pairs(obj, "call", count, source))
    more = dict(_pairs(obj, "more", count, source, dict))
    kinds = bytes(kind)
    if sum(1 for i in msg if kinds[i] in (1, 2)) < kinds.count(1) + kinds.count(2):
        i = next(i for i in range(count) if kinds[i] in (1, 2) and i not in msg)
        raise TraceError(f"a {_KINDS[kinds[i]]} node needs 'msg_id'", path=source,
                         key=f"nodes.msg_id ({ids[i]})")
    return NodeColumns(
        ids, list(workers), _small(worker, len(workers)), kinds, list(names),
        _small(name, len(names)), _ints(seq, "Q"), array("q", accumulate(nlen, initial=0)),
        array("i" if count < 2**31 else "q", nxt), _ints(nrs, "q") if any(nrs) else None,
        bytes(map(bool, saved)), msg, call, more), idset


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


def _small(col: list[int], top: int) -> bytes | array[int]:
    """Indices below ``top`` in one byte each when they fit, else four."""
    return bytes(col) if top <= 256 else array("I", col)


def _ints(col: list[int], code: str) -> array[int] | list[int]:
    """``col`` as an ``array`` of ``code``, or the list itself when a value does not fit."""
    try:
        return array(code, col)
    except OverflowError:
        return col


def _copy(value: Any) -> Any:
    """A list or dict (and the lists a list holds) copied, so that editing a node's field edits
    no other node; anything else as it is."""
    if type(value) is list:
        return [v[:] if type(v) is list else v for v in value]
    return dict(value) if type(value) is dict else value


class NodeColumns(Sequence[Node]):
    """The nodes of a compact trace as it was read: columns, one ``Node`` built per access.

    Read-only: a ``Node`` taken from it (by index, slice or iteration) is a fresh object, and
    editing it does not edit the trace. Code that edits nodes takes ``list(trace.nodes)``,
    edits that list and assigns it back to ``trace.nodes``. It compares equal to any sequence of
    the same nodes (a list of ``Node`` included). ``distviz.replay.graph.IndexedGraph`` reads
    the columns themselves: ``ids`` (a list), ``worker`` and ``kind`` (indices into ``workers``
    and ``KINDS``), ``name`` (indices into ``names``), ``seq``, ``offsets`` (node ``i``'s next
    edges are ``next[offsets[i]:offsets[i + 1]]``: target indices, -1 for an edge without a
    function), ``next_nr`` (their input numbers; ``None`` when all are 0), ``saved`` (0/1 a
    node), and the sparse ``msg_id``, ``call`` and ``more`` (``{node index: value}``).
    """

    __slots__ = ("call", "ids", "kind", "more", "msg_id", "name", "names", "next", "next_nr",
                 "offsets", "saved", "seq", "worker", "workers", "_more_keys")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, ids: list[str], workers: list[str], worker: bytes | array[int],
                 kind: bytes, names: list[str], name: bytes | array[int],
                 seq: array[int] | list[int], offsets: array[int], nxt: array[int],
                 next_nr: array[int] | list[int] | None, saved: bytes, msg_id: dict[int, int],
                 call: dict[int, int], more: dict[int, dict[str, Any]]) -> None:
        self.ids, self.workers, self.worker, self.kind = ids, workers, worker, kind
        self.names, self.name, self.seq, self.offsets = names, name, seq, offsets
        self.next, self.next_nr, self.saved = nxt, next_nr, saved
        self.msg_id, self.call, self.more = msg_id, call, more
        self._more_keys = array("q", sorted(more))

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, i: int) -> Node: ...
    @overload
    def __getitem__(self, i: slice) -> list[Node]: ...

    def __getitem__(self, i: int | slice) -> Node | list[Node]:
        n = len(self.ids)
        if type(i) is int and 0 <= i < n:
            return self._node(i)
        if isinstance(i, slice):
            lo, hi, step = i.indices(n)
            if step == 1:
                return self._build(lo, max(lo, hi))
            return [self._node(k) for k in range(lo, hi, step)]
        k = operator.index(i)
        if k < 0:
            k += n
        if not 0 <= k < n:
            raise IndexError("node index out of range")
        return self._node(k)

    def __iter__(self) -> Iterator[Node]:
        n = len(self.ids)
        for lo in range(0, n, _CHUNK):
            yield from self._build(lo, min(n, lo + _CHUNK))

    def _build(self, lo: int, hi: int) -> list[Node]:
        """Nodes ``lo`` to ``hi - 1``, with the cyclic garbage collector paused (it would scan
        the new objects again and again; they hold no cycles)."""
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return self._make(lo, hi)
        finally:
            if was_enabled:
                gc.enable()

    def of_kind(self, kind: NodeKind) -> list[Node]:
        """The nodes of one kind (``op``, ``send``, ``recv``, ``accumulate_grad``) in order."""
        code = _KINDS.index(kind) if kind in _KINDS else -1
        return list(map(self._node, compress(count(), map(code.__eq__, self.kind))))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(self) == len(other) and all(map(operator.eq, self, other))

    def __repr__(self) -> str:
        head = ", ".join(map(repr, self[:2]))
        more = f", ... {len(self) - 2:,} more" if len(self) > 2 else ""
        return f"NodeColumns([{head}{more}])"

    def _node(self, i: int) -> Node:
        ids, o0, o1 = self.ids, self.offsets[i], self.offsets[i + 1]
        nxt: list[tuple[str, int] | None] = []
        if o1 > o0:
            nrs = self.next_nr
            nxt = [None if t < 0 else (ids[t], 0 if nrs is None else nrs[o0 + j])
                   for j, t in enumerate(self.next[o0:o1])]
        ex = self.more.get(i)
        nd = Node(ids[i], self.workers[self.worker[i]], self.names[self.name[i]],
                  _KINDS[self.kind[i]], self.seq[i], nxt, self.msg_id.get(i), None, None, None,
                  None, self.saved[i] == 1, None, [], self.call.get(i))
        if ex is not None:
            _set_more(nd, ex)
        return nd

    def _make(self, lo: int, hi: int) -> list[Node]:
        """Nodes ``lo`` to ``hi - 1``, made in C loops (``map``) but for the sparse fields."""
        ids, offs = self.ids, self.offsets
        o0 = offs[lo]
        tgt = self.next[o0:offs[hi]]
        nrs = repeat(0) if self.next_nr is None else self.next_nr[o0:offs[hi]]
        flat: list[Any] = list(zip(map(ids.__getitem__, tgt), nrs, strict=False))
        if len(tgt) and min(tgt) < 0:   # edges without a function (-1): None
            for j in compress(count(), map((-1).__eq__, tgt)):
                flat[j] = None
        rel = offs[lo:hi + 1]
        edges = map(flat.__getitem__, map(slice, map(operator.sub, rel, repeat(o0)),
                                          map(operator.sub, rel[1:], repeat(o0))))
        rng = range(lo, hi)
        none = repeat(None)
        nodes = list(map(Node, ids[lo:hi], map(self.workers.__getitem__, self.worker[lo:hi]),
                         map(self.names.__getitem__, self.name[lo:hi]),
                         map(_KINDS.__getitem__, self.kind[lo:hi]), self.seq[lo:hi], edges,
                         map(self.msg_id.get, rng), none, none, none, none,
                         map((1).__eq__, self.saved[lo:hi]), none, map(list, repeat((), hi - lo)),
                         map(self.call.get, rng)))
        keys = self._more_keys
        for i in keys[bisect_left(keys, lo):bisect_left(keys, hi)]:
            _set_more(nodes[i - lo], self.more[i])
        return nodes


def _set_more(nd: Node, ex: dict[str, Any]) -> None:
    """A node's sparse fields: leaves' variables and shapes, faults, variables of a grad_fn."""
    for key, value in ex.items():
        if key == "vars":
            nd.vars = [str(v) for v in value or []]
        elif key in _COPIED:
            setattr(nd, key, _copy(value))
        elif key in _MORE:
            setattr(nd, key, value)


def json_bytes(obj: Any) -> bytes:
    """``obj`` as compact JSON bytes: orjson when it is installed, else ``json``."""
    if orjson is not None:
        try:
            return bytes(orjson.dumps(obj))
        except TypeError:   # an integer beyond 64 bits
            pass
    return json.dumps(obj, separators=(",", ":")).encode("utf-8")
