"""The trace as values: ``Trace``, its ``RpcCall``s and ``BackwardPass``es, the node id
helpers, and the trace's JSON object both ways (``Trace.to_json``; ``parse_trace``, with precise
``TraceError``s). Files and text are ``distviz.trace.loading``'s; the package re-exports both.

Node ids are stable strings ``<worker>/<ShortName>#<sequence_nr>`` (``worker1/AddBackward0#3``),
with ``~k`` appended when two nodes of one worker share name and number, and
``<worker>/AccumulateGrad(<var>)`` for leaves with a scenario variable name (``twin_suffix``,
``short_name``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from distviz import lend
from distviz.errors import TraceError
from distviz.files import write_atomic
from distviz.outcome import Mode
from distviz.trace.absent import AbsentLeaf, parse_absent
from distviz.trace.compact import COMPACT_TRACE_NODES, COMPACT_VERSION, encode_nodes, json_bytes
from distviz.trace.node import KIND_OF_WORD, Node, NodeKind
from distviz.trace.node_json import checked_node, fast_node, need
from distviz.trace.sections import Meta, Real, Reference, ScenarioInfo, Section, SectionT

if TYPE_CHECKING:  # pragma: no cover
    import networkx as nx

SCHEMA_VERSION = 1
_COMPACT_JSON = json.JSONEncoder(separators=(",", ":"))   # one encoder for every node line
ACCUMULATE_GRAD_SEQ = 2**64 - 1


def message_label(msg_id: int) -> str:
    """Return the short form ``sender:counter`` of an autograd message id (``(1 << 48) | 0`` -> ``1:0``)."""
    return f"{msg_id >> 48}:{msg_id & ((1 << 48) - 1)}"


def has_seq(seq: int) -> bool:
    """Return False for ``ACCUMULATE_GRAD_SEQ``: PyTorch gives AccumulateGrad no sequence number
    (it stores ``UINT64_MAX`` so that leaves run first); views show ``-`` or leave it out."""
    return seq != ACCUMULATE_GRAD_SEQ


def seq_text(seq: int) -> str:
    """Return a node's sequence number for people: the number, or ``-`` when it has none."""
    return str(seq) if has_seq(seq) else "-"


def short_name(name: str) -> str:
    """Return the last ``::`` part of a node name (``torch::distributed::autograd::SendRpcBackward``)."""
    return name.rsplit("::", 1)[-1]


def twin_suffix(node_id: str) -> str:
    """``~1`` for the second node of one worker with one name and ``sequence_nr``
    (``worker1/MulBackward0#1~1``), else ``""``: what tells such nodes apart in every view."""
    tail = node_id.rpartition("/")[2]
    head, tilde, k = tail.rpartition("~")
    return f"~{k}" if tilde and k.isdigit() and "#" in head else ""


@dataclass(slots=True)
class RpcCall:
    """One RPC the program made inside the context, as the scenario runtime saw it."""

    caller: str
    callee: str
    api: str                 # rpc_sync | rpc_async | remote | to_here
    func: str                # function name (``my_add``, ``torch.add``)
    builtin: bool
    grad_enabled: bool       # grad mode on the caller when the call was made
    line: int | None = None  # line in the scenario file, when known
    result_var: str | None = None
    msg_ids: list[int] = field(default_factory=list)  # message ids this call created (both ends)
    site: str | None = None  # where a traced program made it: ``rnn.py:19 in f <- main.py:5 in g``
    #: the source of the statement in the function that called the backward through which this
    #: call was made (``val = model(val_x)``): the program's own line for the call
    statement: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "caller": self.caller, "callee": self.callee, "api": self.api, "func": self.func,
            "builtin": self.builtin, "grad_enabled": self.grad_enabled, "line": self.line,
            "result_var": self.result_var, "msg_ids": self.msg_ids}
        if self.site is not None:
            out["site"] = self.site
        if self.statement is not None:
            out["statement"] = self.statement
        return out


@dataclass(slots=True)
class BackwardPass:
    """One ``dist_autograd.backward`` call: its roots (node ids), ``retain_graph``, and each
    root's ``output_nr`` (``root_nrs``: the input of the root's node that the backward's ones
    go into; empty for all 0)."""

    roots: list[str]
    retain_graph: bool = False
    root_vars: list[str] = field(default_factory=list)
    root_nrs: list[int] = field(default_factory=list)
    #: traced programs: where the program called this backward (``site`` of an ``RpcCall``)
    site: str | None = None
    #: traced programs: where the first root was built (``main.py:40 in train``) and that
    #: statement's source (``loss = sum(...)``)
    loss_site: str | None = None
    loss_statement: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"roots": self.roots, "retain_graph": self.retain_graph,
                               "root_vars": self.root_vars}
        if any(self.root_nrs):
            out["root_nrs"] = self.root_nrs
        for key in ("site", "loss_site", "loss_statement"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out

    def root_nr(self, k: int) -> int:
        """The ``output_nr`` of root ``k`` (0 when not recorded)."""
        return self.root_nrs[k] if k < len(self.root_nrs) else 0


@dataclass(slots=True)
class Trace:
    """A recorded distributed autograd graph and, optionally, the real backward's results.

    ``real``, ``reference``, ``scenario`` and ``meta`` are typed sections
    (``distviz.trace.sections``) that read and write the JSON objects of
    ``docs/trace-format.md``; a plain JSON object assigned to one becomes its section.

    ``nodes`` is a list for traces built in code and read from version 1 files. A compact file
    (version 3) gives a read-only ``distviz.trace.compact.NodeColumns``: each ``Node`` taken from
    it is a fresh object, and editing one does not edit the trace; to edit, take
    ``list(trace.nodes)``, edit that and assign it back to ``trace.nodes``.
    """

    workers: list[str]
    initiator: str
    context_id: int
    nodes: Sequence[Node]
    passes: list[BackwardPass]
    rpc_calls: list[RpcCall] = field(default_factory=list)
    known_workers: dict[str, list[str]] = field(default_factory=dict)
    interop_threads: int | None = 1
    scenario: ScenarioInfo | None = None
    torch_version: str | None = None
    real: Real | None = None
    reference: Reference | None = None
    meta: Meta = field(default_factory=Meta)
    ranks: list[int] | None = None     # RPC rank of each worker when not its position in workers
    #: The context's number as the user counts it, from 1 (``--context N``, the N of
    #: ``trainer.ctxN.trace.json``), beside PyTorch's ``context_id``; not a key of its own in
    #: the file: a recording numbers its contexts in order, ``distviz trace`` keeps it in
    #: ``meta.traced.context``. See ``distviz.words.context_label``.
    number: int = 1
    #: Named tensors the recorder saw that are no leaf of the graph (``absent_leaves``).
    absent_leaves: list[AbsentLeaf] = field(default_factory=list)

    def __setattr__(self, name: str, value: Any) -> None:
        section = _SECTIONS.get(name)
        if section is not None and isinstance(value, dict):
            value = section.from_json(value)
        object.__setattr__(self, name, value)

    # -- lookups -------------------------------------------------------------------------
    def node_map(self) -> dict[str, Node]:
        """Return ``{node id: Node}``."""
        return {n.id: n for n in self.nodes}

    def nodes_of_kind(self, kind: NodeKind) -> list[Node]:
        """Return the nodes of one kind (``accumulate_grad``, ...) in trace order; a compact
        trace's are found in its ``kind`` column without building the others."""
        of_kind = getattr(self.nodes, "of_kind", None)
        if of_kind is not None:
            return list(of_kind(kind))
        return [n for n in self.nodes if n.kind == kind]

    def worker_index(self) -> dict[int, int]:
        """Return ``{RPC rank: position in workers}`` (message ids name the sender by rank)."""
        ranks = self.ranks if self.ranks is not None else range(len(self.workers))
        return {r: k for k, r in enumerate(ranks)}

    def __repr__(self) -> str:
        """A line, not the whole graph (a big trace's fields run to megabytes)."""
        name = self.scenario.name if self.scenario is not None else None
        return (f"<Trace{' ' + name if name else ''} context {self.number} "
                f"(id {self.context_id}): {len(self.nodes)} nodes on {len(self.workers)} "
                f"workers, {len(self.passes)} passes>")

    def shape(self) -> dict[str, int]:
        """How many nodes of each name each worker holds (``worker1/AddBackward0``), sorted:
        what tells a context's graph from the one before it (a context's row; the summary's
        runs of contexts of the same shape)."""
        counts: dict[str, int] = {}
        for n in self.nodes:
            key = f"{n.worker}/{short_name(n.name)}"
            counts[key] = counts.get(key, 0) + 1
        return dict(sorted(counts.items()))

    def pairs(self) -> list[dict[str, Any]]:
        """Return every message id with its send and recv node ids (``None`` where one is missing),
        sorted by message id."""
        by_msg: dict[int, dict[str, Any]] = {}
        for n in self.nodes:
            if n.msg_id is None:
                continue
            entry = by_msg.setdefault(n.msg_id, {"msg_id": n.msg_id, "send": None, "recv": None})
            entry[n.kind] = n.id
        return [by_msg[k] for k in sorted(by_msg)]

    # -- as a networkx graph, and in Jupyter (see ``TraceViews``) ------------------------
    def to_networkx(self, pass_index: int | None = None, mode: Mode = Mode.FAST) -> nx.DiGraph:
        """Return the whole distributed graph as a ``networkx.DiGraph``: every node (by id)
        with its worker, op name, ``sequence_nr``, variable, shape and initial dependency
        count; an edge from each node to each next function, and one edge per gradient
        message, recv -> send, marked ``kind="message"`` with its ``msg_id``. With
        ``pass_index`` the pass is replayed in ``mode`` and each node also carries its
        ``step`` and ``outcome`` (``distviz.views.graph_nx`` lists every attribute). Raises
        ``IndexError`` for a pass the trace does not have."""
        return lent_views().networkx(self, pass_index, mode)

    def _repr_html_(self) -> str:
        """Jupyter's display: the interactive step viewer, inline and self-contained."""
        return lent_views().html(self)

    def _repr_svg_(self) -> str | None:
        """Jupyter's display without JavaScript: the picture ``export -f svg`` draws."""
        return lent_views().svg(self)

    # -- JSON ----------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "format": "distviz-trace",
            "scenario": _json(self.scenario),
            "torch_version": self.torch_version,
            "interop_threads": self.interop_threads,
            "workers": self.workers,
            **({"ranks": self.ranks} if self.ranks is not None else {}),
            "initiator": self.initiator,
            "context_id": self.context_id,
            "known_workers": self.known_workers,
            "passes": [p.to_json() for p in self.passes],
            "rpc_calls": [c.to_json() for c in self.rpc_calls],
            **({"absent_leaves": [a.to_json() for a in self.absent_leaves]}
               if self.absent_leaves else {}),
            "nodes": [n.to_json() for n in self.nodes],
            "real": _json(self.real),
            "reference": _json(self.reference),
            "meta": self.meta.to_json(),
        }

    def encode(self) -> bytes:
        """Return the file's bytes: ``dumps()``, or for ``COMPACT_TRACE_NODES`` nodes and more
        the compact layout (``schema_version`` 3, ``distviz.trace.compact``) written by orjson."""
        if len(self.nodes) < COMPACT_TRACE_NODES:
            return self.dumps().encode("utf-8")
        obj = self._head()
        obj["schema_version"] = COMPACT_VERSION
        obj["nodes"] = encode_nodes(self.nodes, self.workers)
        return json_bytes(obj) + b"\n"

    def _head(self) -> dict[str, Any]:
        nodes, self.nodes = self.nodes, []
        try:
            return self.to_json()
        finally:
            self.nodes = nodes

    def dumps(self) -> str:
        """Return the JSON text: one node per line, so traces diff well."""
        obj = self.to_json()
        nodes = obj.pop("nodes")
        head = _COMPACT_JSON.encode(obj)   # what json.dumps(x, separators=(",", ":")) makes
        return head[:-1] + ',"nodes":[\n' + _node_lines(nodes) + "\n]}\n"

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the trace with ``write_atomic``: a regular file atomically (temporary file in
        the same folder, then rename), ``-`` to standard output, ``/dev/null`` or a FIFO
        straight into it.

        Returns the path written. Raises ``OutputError`` for a folder and ``OSError`` when the
        file or its folder is not writable.
        """
        return write_atomic(Path(path), self.encode())

    @classmethod
    def from_json(cls, obj: Any, source: str = "<trace>") -> Trace:
        """Build a Trace from parsed JSON; raises ``TraceError`` naming the bad key."""
        return parse_trace(obj, source)


class TraceViews(Protocol):
    """What ``Trace.to_networkx`` and Jupyter's display of a trace call. They need the replay
    and the renderers, which import this module, so this module imports none of them: the
    ``distviz`` package (which Python loads before any ``distviz.*`` module) lends them once
    with ``lend_views``, importing each on first use."""

    def networkx(self, trace: Trace, pass_index: int | None, mode: Mode) -> nx.DiGraph: ...

    def html(self, trace: Trace) -> str: ...

    def svg(self, trace: Trace) -> str | None: ...

    def recording_html(self, recording: Any) -> str:
        """A ``distviz.trace.contexts_file.Recording``'s display (``Any``: that module imports this
        one)."""
        ...


def lend_views(views: TraceViews) -> None:
    """Set what ``Trace.to_networkx``, ``_repr_html_`` and ``_repr_svg_`` call."""
    lend.VIEWS[:] = [views]


def lent_views() -> TraceViews:
    if not lend.VIEWS:  # pragma: no cover - distviz/__init__.py lends them at import
        raise RuntimeError("distviz.trace: no views lent; import distviz")
    return cast("TraceViews", lend.VIEWS[0])


# -- parsing with precise errors -------------------------------------------------------------

def parse_trace(obj: Any, source: str) -> Trace:
    if not isinstance(obj, dict):
        raise TraceError(f"expected a JSON object at the top, found {type(obj).__name__}; "
                         "not a distviz trace", path=source)
    version = obj.get("schema_version")
    if version is None:
        raise TraceError("missing 'schema_version'; not a distviz trace", path=source,
                         key="schema_version")
    if version == 2 and type(version) is int:
        raise TraceError("this file records several contexts (schema_version 2); read it with "
                         "distviz.load_recording(path), or pick one with --context N",
                         path=source, key="schema_version")
    if version not in (SCHEMA_VERSION, 3) or type(version) is not int:
        raise TraceError(f"schema_version {version!r} is not supported (this distviz reads "
                         f"versions {SCHEMA_VERSION} to 3); record the scenario again with this "
                         "version", path=source, key="schema_version")
    workers = need(obj, "workers", list, source, "")
    if not workers or not all(isinstance(w, str) for w in workers):
        raise TraceError("expected a non-empty list of worker names", path=source, key="workers")
    initiator = need(obj, "initiator", str, source, "")
    if initiator not in workers:
        raise TraceError(f"initiator {initiator!r} is not one of the workers {workers}",
                         path=source, key="initiator")
    context_id = need(obj, "context_id", int, source, "")
    ranks = obj.get("ranks")
    if ranks is not None and (not isinstance(ranks, list) or len(ranks) != len(workers) or not all(
            isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in ranks)
            or len(set(ranks)) != len(ranks)):
        raise TraceError("expected one distinct rank (an integer >= 0) per worker", path=source,
                         key="ranks")
    if version == 3:
        from distviz.trace.compact import decode_nodes
        columns, ids = decode_nodes(obj.get("nodes"), list(workers), source)
        return _rest(obj, source, workers, initiator, context_id, ranks, columns, ids)
    raw_nodes = need(obj, "nodes", list, source, "")
    nodes = []
    ids = set()
    wset = set(workers)
    kinds = KIND_OF_WORD
    for i, rn in enumerate(raw_nodes):
        node = fast_node(rn, wset, kinds)
        if node is None:
            node = checked_node(rn, i, source, workers, wset)
        if node.id in ids:
            raise TraceError(f"duplicate node id {node.id!r}", path=source, key=f"nodes[{i}].id")
        ids.add(node.id)
        nodes.append(node)
    for i, n in enumerate(nodes):
        for j, e in enumerate(n.next):
            if e is not None and e[0] not in ids:
                raise TraceError(f"edge to unknown node {e[0]!r}", path=source,
                                 key=f"nodes[{i}].next[{j}]")
    return _rest(obj, source, workers, initiator, context_id, ranks, nodes, ids)


def _rest(obj: dict[str, Any], source: str, workers: list[str], initiator: str,
          context_id: int, ranks: list[int] | None, nodes: Sequence[Node], ids: set[str]
          ) -> Trace:
    """The trace around its nodes: passes, RPC calls and the rest (every version)."""
    passes: list[BackwardPass] = []
    for i, rp in enumerate(need(obj, "passes", list, source, "")):
        where = f"passes[{i}]."
        if not isinstance(rp, dict):
            raise TraceError("expected an object", path=source, key=f"passes[{i}]")
        roots = need(rp, "roots", list, source, where)
        for r in roots:
            if not isinstance(r, str) or r not in ids:
                raise TraceError(f"root {r!r} is not a node of the trace", path=source,
                                 key=where + "roots")
        nrs = rp.get("root_nrs") or []
        if nrs and (not isinstance(nrs, list) or len(nrs) != len(roots)
                or any(type(n) is not int or n < 0 for n in nrs)):
            raise TraceError("expected one input number (an int from 0) per root", path=source,
                             key=where + "root_nrs")
        passes.append(BackwardPass(roots=list(roots), retain_graph=bool(rp.get("retain_graph")),
                                   root_vars=[str(v) for v in rp.get("root_vars") or []],
                                   root_nrs=list(nrs),
                                   site=need(rp, "site", str, source, where, optional=True),
                                   loss_site=need(rp, "loss_site", str, source, where,
                                                  optional=True),
                                   loss_statement=need(rp, "loss_statement", str, source,
                                                       where, optional=True)))
    calls: list[RpcCall] = []
    for i, rc in enumerate(obj.get("rpc_calls") or []):
        where = f"rpc_calls[{i}]."
        if not isinstance(rc, dict):
            raise TraceError("expected an object", path=source, key=f"rpc_calls[{i}]")
        calls.append(RpcCall(
            caller=need(rc, "caller", str, source, where), callee=need(rc, "callee", str, source, where),
            api=need(rc, "api", str, source, where), func=need(rc, "func", str, source, where),
            builtin=bool(rc.get("builtin")), grad_enabled=bool(rc.get("grad_enabled", True)),
            line=need(rc, "line", int, source, where, optional=True),
            result_var=need(rc, "result_var", str, source, where, optional=True),
            msg_ids=[int(m) for m in rc.get("msg_ids") or []],
            site=need(rc, "site", str, source, where, optional=True),
            statement=need(rc, "statement", str, source, where, optional=True)))
    known = obj.get("known_workers") or {}
    if not isinstance(known, dict):
        raise TraceError("expected an object", path=source, key="known_workers")
    for key in ("real", "reference", "scenario", "meta"):
        if obj.get(key) is not None and not isinstance(obj[key], dict):
            raise TraceError(f"expected an object or null, found {type(obj[key]).__name__}",
                             path=source, key=key)
    interop = obj.get("interop_threads", 1)
    if interop is not None and (not isinstance(interop, int) or isinstance(interop, bool)):
        raise TraceError("expected an integer or null", path=source, key="interop_threads")
    return Trace(workers=list(workers), initiator=initiator, context_id=context_id, nodes=nodes,
                 passes=passes, rpc_calls=calls,
                 known_workers={str(k): [str(x) for x in v] for k, v in known.items()},
                 interop_threads=interop, scenario=_section(ScenarioInfo, obj, source),
                 torch_version=obj.get("torch_version"), real=_section(Real, obj, source),
                 reference=_section(Reference, obj, source),
                 meta=_section(Meta, obj, source) or Meta(),
                 ranks=list(ranks) if ranks is not None else None,
                 number=_traced_number(obj.get("meta")),
                 absent_leaves=parse_absent(obj.get("absent_leaves"), workers, source))


def _traced_number(meta: Any) -> int:
    """The context's number ``distviz trace`` wrote in ``meta.traced.context``, else 1."""
    traced = meta.get("traced") if isinstance(meta, dict) else None
    n = traced.get("context") if isinstance(traced, dict) else None
    return n if isinstance(n, int) and not isinstance(n, bool) and n >= 1 else 1


_SECTIONS: dict[str, type[Section]] = {"real": Real, "reference": Reference,
                                       "scenario": ScenarioInfo, "meta": Meta}


def _json(section: Section | None) -> dict[str, Any] | None:
    return section.to_json() if section is not None else None


def _section(cls: type[SectionT], obj: dict[str, Any], source: str) -> SectionT | None:
    """The section ``cls.KIND`` of the trace object ``obj`` (``None`` when null or absent)."""
    value = obj.get(cls.KIND)
    return cls.from_json(value, source) if value is not None else None


def _node_lines(nodes: list[dict[str, Any]]) -> str:
    """The nodes' JSON, one compact line each (``compact.json_bytes``: orjson, or ``json`` for
    an integer beyond 64 bits). A node's values are strings, integers, booleans and lists of
    them (a fault is its kind and message), whose text loads as ``json``'s does (orjson would
    write a NaN as null, ``json`` as NaN)."""
    return b",\n".join(map(json_bytes, nodes)).decode("utf-8")
