"""A compact trace's nodes stay columns (``NodeColumns``): a read-only sequence of fresh
``Node`` objects equal to the nodes written, and an ``IndexedGraph`` built from the columns
that equals the one built from ``Node`` objects, attribute by attribute."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from builders.graphs import design_trace, hang_trace

from distviz.replay import replay
from distviz.replay.graph import IndexedGraph
from distviz.replay.synthetic import synthetic_trace
from distviz.trace import Node, Trace, load, loads
from distviz.trace.compact import COMPACT_VERSION, NodeColumns, encode_nodes

TRACES = Path(__file__).parents[2] / "traces"

#: every attribute IndexedGraph keeps (the replay's engine and every view read them)
GRAPH_ATTRS = ("n", "workers", "rank_index", "ranks", "initiator", "ids", "kind", "key",
               "worker", "targets", "nrs", "msg", "names", "flags", "saved", "fault", "input_shapes",
               "nodes_of",
               "send_by_msg", "recv_by_msg", "sends_of", "roots", "mark", "stamp")


def compact(trace: Trace) -> Trace:
    """``trace`` written in the compact layout and read back."""
    obj = trace.to_json()
    obj["schema_version"] = COMPACT_VERSION
    obj["nodes"] = encode_nodes(trace.nodes, trace.workers)
    back = loads(json.dumps(obj))
    assert isinstance(back.nodes, NodeColumns)
    return back


def everything_trace() -> Trace:
    """The hang trace with every sparse field: a fault, saved tensors, variables of a grad_fn and
    of a recv, input numbers other than 0 and an edge without a function."""
    tr = hang_trace()
    nodes = tr.nodes
    assert isinstance(nodes, list)
    nodes[0].vars = ["loss"]
    nodes[1].next.append(None)                      # an input that needs no gradient
    nodes[1].saved = True
    nodes[4].fault = {"kind": "fail", "message": "boom"}
    nodes[4].saved = True
    nodes[2].vars = ["t3", "t3b"]                   # a recv whose result was assigned
    nodes[8].next = [("worker1/RecvRpcBackward#0", 1), None, ("worker1/RecvRpcBackward#0", 0)]
    return tr


def _shipped(name: str) -> Any:
    return lambda: load(TRACES / name)


MAKERS = [design_trace, hang_trace, everything_trace, _shipped("pipeline.json"),
          _shipped("no_grad_rpc.json"), _shipped("overwritten_result.json"),
          lambda: synthetic_trace(3000, 4, 1), lambda: synthetic_trace(5000, 8, 2),
          lambda: synthetic_trace(200, 1, 3)]


@pytest.mark.parametrize("make", MAKERS)
def test_the_graph_from_columns_equals_the_graph_from_nodes(make: Any) -> None:
    tr = make()
    cols = compact(tr)
    from_cols = IndexedGraph(cols)
    cols.nodes = list(cols.nodes)                   # the same trace as Node objects
    from_nodes = IndexedGraph(cols)
    for attr in GRAPH_ATTRS:
        assert getattr(from_cols, attr) == getattr(from_nodes, attr), attr
    assert from_cols.index == from_nodes.index
    assert from_nodes.ids == [n.id for n in tr.nodes]


def test_nonzero_input_numbers_of_an_edge_without_a_function_read_as_zero() -> None:
    obj = json.loads(json.dumps({**everything_trace().to_json(), "schema_version": 3,
                                 "nodes": encode_nodes(everything_trace().nodes, ["worker0",
                                                                                  "worker1"])}))
    cols = obj["nodes"]
    j = cols["next"].index(-1)
    cols["next_nr"][j] = 7                          # a hand-written file: no function, nr 7
    tr = loads(json.dumps(obj))
    assert None in tr.nodes[1].next
    a = IndexedGraph(tr)
    tr.nodes = list(tr.nodes)
    b = IndexedGraph(tr)
    assert a.nrs == b.nrs and a.flags == b.flags


def test_node_columns_are_a_read_only_sequence_of_fresh_nodes() -> None:
    tr = everything_trace()
    nodes = list(tr.nodes)
    back = compact(tr)
    cols = back.nodes
    assert isinstance(cols, NodeColumns)
    assert len(cols) == len(nodes) and cols == nodes and nodes == cols and back == tr
    assert list(cols) == nodes and list(reversed(cols)) == nodes[::-1]
    assert cols[0] == nodes[0] and cols[-1] == nodes[-1] and cols[-len(nodes)] == nodes[0]
    assert cols[2:5] == nodes[2:5] and cols[::3] == nodes[::3] and cols[5:2] == []
    assert cols[-3:] == nodes[-3:] and cols[:] == nodes
    with pytest.raises(IndexError):
        cols[len(nodes)]
    with pytest.raises(IndexError):
        cols[-len(nodes) - 1]
    assert nodes[4] in cols and cols.index(nodes[4]) == 4
    assert cols != nodes[:-1] and cols != [*nodes[:-1], nodes[0]]
    assert cols.of_kind("recv") == [n for n in nodes if n.kind == "recv"]
    assert back.nodes_of_kind("accumulate_grad") == tr.nodes_of_kind("accumulate_grad")
    text = repr(cols)
    assert text.startswith("NodeColumns([Node(id='worker0/SumBackward0#2'")
    assert f"{len(nodes) - 2:,} more" in text
    # a node taken from the columns is a fresh object: editing it edits no other node
    a = cols[4]
    a.saved = False
    assert a.fault is not None
    a.fault["kind"] = "crash"
    a.next.clear()
    leaf = cols[3]
    assert leaf.shape is not None
    leaf.shape.append(9)
    cols[0].vars.append("x")
    assert cols == nodes and back == tr
    assert [n.vars for n in cols] == [n.vars for n in nodes]   # no list is shared between nodes
    # to edit, take a list and assign it back
    edited = list(cols)
    edited[4].saved = False
    back.nodes = edited
    assert back.to_json()["nodes"][4].get("saved") is None


def test_edits_through_a_list_reach_the_replay() -> None:
    tr = synthetic_trace(2000, 2, 0)
    back = compact(tr)
    assert replay(back).outcome == replay(tr).outcome == "completed"
    nodes: list[Node] = list(back.nodes)
    root = next(n for n in nodes if n.id == back.passes[0].roots[0])
    root.fault = {"kind": "fail", "message": "boom"}
    back.nodes = nodes
    assert replay(back).outcome != "completed"
