"""The compact trace layout (schema_version 3): big traces are written as columns with edges as
node indices, read back to the same trace, replayed the same; smaller ones stay version 1; bad
columns are one precise error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from builders.graphs import design_trace, hang_trace

from distviz.errors import TraceError
from distviz.replay import replay
from distviz.replay.synthetic import synthetic_trace
from distviz.trace import KINDS, NodeKind, Trace, load, loads
from distviz.trace.compact import COMPACT_TRACE_NODES, COMPACT_VERSION, NodeColumns, encode_nodes


def _compact_text(trace: Trace) -> str:
    obj = trace.to_json()
    obj["schema_version"] = COMPACT_VERSION
    obj["nodes"] = encode_nodes(trace.nodes, trace.workers)
    return json.dumps(obj)


def test_a_big_trace_is_written_compact_and_reads_back_the_same(tmp_path: Path) -> None:
    tr = synthetic_trace(COMPACT_TRACE_NODES + 1000, 4, 0)
    path = tr.save(tmp_path / "big.json")
    head = json.loads(path.read_text())
    assert head["schema_version"] == 3 and isinstance(head["nodes"]["next"][0], int)
    back = load(path)
    assert back.to_json() == tr.to_json()
    assert isinstance(back.nodes, NodeColumns) and back == tr
    a, b = replay(back), replay(tr)   # the indices the file holds give the same replay
    assert [e.to_json() for e in a.events] == [e.to_json() for e in b.events]
    small = synthetic_trace(1000, 4, 0).save(tmp_path / "small.json")
    assert json.loads(small.read_text())["schema_version"] == 1   # diffable, one node a line


@pytest.mark.parametrize("make", [design_trace, hang_trace])
def test_every_node_field_survives_the_compact_layout(make: Any) -> None:
    tr = make()
    tr.nodes[0].vars = ["loss"]
    tr.nodes[1].next.append(None)                      # an input that needs no gradient
    tr.nodes[4].fault = {"kind": "fail", "message": "boom"}
    tr.nodes[4].saved = True
    tr.nodes[3].python = True                          # a custom Function's node
    back = loads(_compact_text(tr))
    assert back.to_json() == tr.to_json()
    assert replay(back).outcome == replay(tr).outcome


def _broken(edit: Any) -> str:
    obj = json.loads(_compact_text(design_trace()))
    edit(obj["nodes"])
    return json.dumps(obj)


@pytest.mark.parametrize(("edit", "key", "message"), [
    (lambda n: n["seq"].pop(), "nodes.seq", "expected a list of 10 values"),
    (lambda n: n["next"].__setitem__(0, 99), "nodes.next", "an index out of range 0..9"),
    (lambda n: n["ids"].__setitem__(1, n["ids"][0]), "nodes.ids", "duplicate node id"),
    (lambda n: n.update(msg_id=[]), "nodes.msg_id", "needs 'msg_id'"),
    (lambda n: n["kind"].__setitem__(0, "op"), "nodes.kind", "expected ints"),
    (lambda n: n["kind"].__setitem__(0, 4), "nodes.kind", "an index out of range 0..3"),
    (lambda n: n.update(count="10"), "nodes.count", "expected the number of nodes"),
    (lambda n: n["next_len"].__setitem__(slice(0, 2), [-1, 4]), "nodes.next_len",
     "a length below 0"),
])
def test_bad_columns_name_the_column(edit: Any, key: str, message: str) -> None:
    with pytest.raises(TraceError) as err:
        loads(_broken(edit), source="t.json")
    assert err.value.key is not None and err.value.key.startswith(key)
    assert message in str(err.value)


def test_compact_kinds_read_as_node_kinds_in_their_order() -> None:
    """A compact trace's ``kind`` column indexes ``KINDS``: each node gets the ``NodeKind``
    member, the same as the one-node-per-line layout gives, by every way of reading nodes."""
    plain = design_trace()
    tr = loads(_compact_text(plain))
    assert [n.kind for n in tr.nodes] == [n.kind for n in plain.nodes]
    assert {type(n.kind) for n in tr.nodes} == {NodeKind}
    assert KINDS == (NodeKind.OP, NodeKind.SEND, NodeKind.RECV, NodeKind.ACCUMULATE_GRAD)
    assert [n.id for n in tr.nodes_of_kind(NodeKind.SEND)] == [
        n.id for n in plain.nodes if n.kind == "send"]


def test_versions_beyond_three_are_refused() -> None:
    obj = json.loads(_compact_text(design_trace()))
    obj["schema_version"] = 4
    with pytest.raises(TraceError, match="schema_version 4 is not supported"):
        loads(json.dumps(obj))
