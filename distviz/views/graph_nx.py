"""The whole distributed autograd graph as a ``networkx.DiGraph``, and as GraphML or GEXF.

``trace_graph(trace, replay, pass_index)`` is what ``Trace.to_networkx()`` returns: one node per
trace node (keyed by its id, ``worker1/AddBackward0#3``) and two kinds of edges:

* ``kind="gradient"``: a node to each function in its ``next`` edges (the way gradients flow
  on one worker), with ``input_nrs``, the target's input slots it feeds (two when one op uses
  both outputs of an RPC result);
* ``kind="message"``: a ``RecvRpcBackward`` to the ``SendRpcBackward`` on the other worker with
  the same autograd message id: one edge per gradient message, with ``msg_id`` and ``label``
  (``sender:counter``). A send or recv without its other half has no message edge.

Every node carries ``worker``, ``kind`` (``op``, ``send``, ``recv``, ``accumulate_grad``),
``name`` (PyTorch's name, verbatim), ``label`` (the short name the views show),
``sequence_nr`` (``None`` for AccumulateGrad, which has none), ``var`` (a leaf's variable, or
the variables whose ``grad_fn`` the node is), ``shape`` and ``dtype`` (leaves), ``msg_id`` (sends
and recvs) and ``dependencies``: the initial dependency count FAST mode gives it in the pass
(``distviz.replay.graph.initial_dependencies``; ``None`` for a node nothing reaches). With a
replay, each node also carries ``step`` (the replay step that ran it in that pass, else
``None``) and ``outcome``: ``ran``, ``raised`` (the node whose error ended the pass),
``blocked`` (a send whose gradient never comes: the pass hangs) or ``not_run``.

The graph's own attributes: ``context_id``, ``initiator``, ``workers``, ``passes`` and, with a
replay, ``pass_index``, ``mode`` and ``outcome`` (``completed``, ``hang`` or ``error``).

GraphML and GEXF hold no ``None`` and no tuples: ``file_graph`` writes a missing string as
``""``, a missing number as ``-1``, a shape as ``2x3`` and ``input_nrs`` as ``0,1``. Pure:
never imports torch.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import networkx as nx

from distviz.outcome import Mode
from distviz.replay.graph import initial_dependencies
from distviz.trace import NodeKind, Trace, has_seq, message_label, short_name

if TYPE_CHECKING:  # pragma: no cover
    from distviz.replay.values import ReplayLike

__all__ = ["FILE_FORMATS", "NODE_OUTCOMES", "file_graph", "graph_file", "to_networkx",
           "trace_graph"]

#: What ``outcome`` says of a node after a replayed pass.
NODE_OUTCOMES = ("ran", "raised", "blocked", "not_run")
#: The file formats ``graph_file`` writes.
FILE_FORMATS = ("graphml", "gexf")


def trace_graph(trace: Trace, replay: ReplayLike | None = None,
                pass_index: int | None = None) -> nx.DiGraph:
    """Return the trace's distributed graph as a ``networkx.DiGraph`` (see the module docstring).

    ``pass_index`` picks the pass whose dependency counts (and, with ``replay``, whose steps and
    outcomes) the nodes carry; default: the first. The graph is acyclic, as autograd graphs are.
    Raises ``IndexError`` for a pass the trace does not have.
    """
    p = 0 if pass_index is None else pass_index
    if trace.passes and not 0 <= p < len(trace.passes):
        raise IndexError(f"pass {p}: the trace has passes 0 to {len(trace.passes) - 1}")
    if replay is not None:
        deps: dict[str, int] = dict(replay.initial_dependencies(p)) if trace.passes else {}
    else:
        deps = initial_dependencies(trace, p) if trace.passes else {}
    g = nx.DiGraph(context_id=trace.context_id, initiator=trace.initiator,
                   workers=tuple(trace.workers), passes=len(trace.passes))
    for nd in trace.nodes:
        var = nd.var if nd.var is not None else (", ".join(nd.vars) if nd.vars else None)
        g.add_node(nd.id, worker=nd.worker, kind=str(nd.kind), name=nd.name,
                   label=_label(nd.name, nd.kind, var),
                   sequence_nr=nd.seq if has_seq(nd.seq) else None,
                   var=var, shape=tuple(nd.shape) if nd.shape is not None else None,
                   dtype=nd.dtype, msg_id=nd.msg_id, dependencies=deps.get(nd.id))
    for nd in trace.nodes:
        slots: dict[str, list[int]] = {}
        for e in nd.next:
            if e is not None:
                slots.setdefault(e[0], []).append(e[1])
        for target, nrs in slots.items():
            g.add_edge(nd.id, target, kind="gradient", input_nrs=tuple(nrs))
    for pair in trace.pairs():
        if pair["send"] is not None and pair["recv"] is not None:
            msg_id = pair["msg_id"]
            g.add_edge(pair["recv"], pair["send"], kind="message", msg_id=msg_id,
                       label=message_label(msg_id))
    if replay is not None and trace.passes:
        _add_replay(g, replay, p)
    return g


def to_networkx(trace: Trace, pass_index: int | None = None, mode: Mode = Mode.FAST) -> nx.DiGraph:
    """``Trace.to_networkx``: ``trace_graph`` of ``trace``; with ``pass_index``, replayed in
    ``mode`` (``fast`` or ``smart``) so that each node also carries its step and outcome in
    that pass. Raises ``IndexError`` for a pass the trace does not have and ``ValueError`` for
    an unknown mode."""
    if pass_index is None:
        return trace_graph(trace)
    from distviz.replay import replay
    if trace.passes and not 0 <= pass_index < len(trace.passes):
        raise IndexError(f"pass {pass_index}: the trace has passes 0 to {len(trace.passes) - 1}")
    return trace_graph(trace, replay(trace, mode=mode), pass_index)


def _label(name: str, kind: NodeKind, var: str | None) -> str:
    """``MulBackward0``, ``AccumulateGrad(w)``, ``RecvRpcBackward(t3)``: as the views name it."""
    short = short_name(name)
    return f"{short}({var})" if var and kind in (NodeKind.ACCUMULATE_GRAD, NodeKind.RECV) else short


#: The events that run a node: ``accumulate`` for an AccumulateGrad, ``execute`` for the others.
_RUNS = ("execute", "accumulate")


def _add_replay(g: nx.DiGraph, replay: ReplayLike, p: int) -> None:
    """Each node's step and outcome in pass ``p``, and the pass's outcome on the graph."""
    steps: dict[str, int] = {}
    end = "completed"
    for ev in replay.events:
        if ev.pass_index != p:
            continue
        if ev.action in _RUNS and ev.node is not None:
            steps.setdefault(ev.node, ev.step)
        elif ev.action == "pass_end":
            end = str(ev.detail.get("outcome", end))
    blocked: set[str] = set()
    hang = replay.hang
    if hang is not None and hang.pass_index == p:
        blocked = {b.node for b in hang.blocked_sends}
        end = "hang"
    error = replay.error
    raised = error.node if error is not None and error.pass_index == p else None
    if error is not None and error.pass_index == p:
        end = "error"
    for nid, attrs in g.nodes(data=True):
        attrs["step"] = steps.get(nid)
        attrs["outcome"] = ("raised" if nid == raised else "ran" if nid in steps
                            else "blocked" if nid in blocked else "not_run")
    g.graph.update(pass_index=p, mode=str(replay.mode), outcome=end)


#: Attributes that are numbers when present (a missing one is written as -1).
_NUMBERS = frozenset({"sequence_nr", "msg_id", "dependencies", "step", "pass_index"})


def _file_value(key: str, value: Any) -> Any:
    """``value`` as GraphML and GEXF hold it: a missing number -1, a missing string ``""``, a
    shape ``2x3``, other tuples ``0,1``."""
    if value is None:
        return -1 if key in _NUMBERS else ""
    if isinstance(value, tuple):
        return ("x" if key == "shape" else ",").join(str(v) for v in value)
    return value


def file_graph(graph: nx.DiGraph) -> nx.DiGraph:
    """A copy of ``graph`` that GraphML and GEXF can hold (see ``_file_value``)."""
    out = nx.DiGraph()
    out.graph.update({k: _file_value(k, v) for k, v in graph.graph.items()})
    for nid, attrs in graph.nodes(data=True):
        out.add_node(nid, **{k: _file_value(k, v) for k, v in attrs.items()})
    for u, v, attrs in graph.edges(data=True):
        out.add_edge(u, v, **{k: _file_value(k, x) for k, x in attrs.items()})
    return out


def graph_file(graph: nx.DiGraph, fmt: str) -> bytes:
    """The bytes of ``graph`` as a GraphML or GEXF file (UTF-8), through ``file_graph``; the same
    graph gives the same bytes (GEXF's date of last change is left out).

    Raises ``ValueError`` for another format (the CLI checks ``--format`` first)."""
    if fmt not in FILE_FORMATS:
        raise ValueError(f"unknown graph file format {fmt!r} (expected one of "
                         f"{', '.join(FILE_FORMATS)})")
    flat = file_graph(graph)
    lines = nx.generate_graphml(flat) if fmt == "graphml" else nx.generate_gexf(flat)
    text = "\n".join(_LAST_CHANGE.sub("<meta>", line, count=1) for line in lines)
    return f"<?xml version='1.0' encoding='utf-8'?>\n{text}\n".encode()


#: GEXF's ``<meta lastmodifieddate="2026-01-31">``: today's date, so the same graph would give
#: other bytes tomorrow.
_LAST_CHANGE = re.compile(r'<meta lastmodifieddate="[^"]*">')
