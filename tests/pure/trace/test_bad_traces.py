"""Bad trace files: truncated, hand-edited, wrong version, not JSON. Every one gives one clear
line naming the file and exit code 2; traces are never unpickled."""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import replay_fixtures as F
from typer.testing import CliRunner

from distviz.cli import app
from distviz.errors import TraceError
from distviz.trace import NodeKind, load
from distviz.trace.sections import RowStatus


def _good(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    path = tmp_path / "good.json"
    F.design_note().save(path)
    return path, json.loads(path.read_text())


def _edit(fn: Callable[[dict[str, Any]], None]) -> Callable[[Path], Path]:
    def make(tmp_path: Path) -> Path:
        _, obj = _good(tmp_path)
        fn(obj)
        out = tmp_path / "bad.json"
        out.write_text(json.dumps(obj))
        return out
    return make


def _text(text: str | bytes) -> Callable[[Path], Path]:
    def make(tmp_path: Path) -> Path:
        out = tmp_path / "bad.json"
        if isinstance(text, bytes):
            out.write_bytes(text)
        else:
            out.write_text(text)
        return out
    return make


def _truncated(tmp_path: Path) -> Path:
    path, _ = _good(tmp_path)
    data = path.read_text()
    out = tmp_path / "bad.json"
    out.write_text(data[: len(data) // 2])
    return out


CASES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "truncated": (_truncated, "not valid JSON"),
    "empty": (_text(""), "the file is empty"),
    "binary": (_text(b"\x80\x04\x95garbage"), "cannot read the trace"),
    "pickle": (_text(pickle.dumps({"schema_version": 1})), "cannot read the trace"),
    "list_top": (_text("[1, 2, 3]"), "expected a JSON object at the top"),
    "no_version": (_edit(lambda o: o.pop("schema_version")), "missing 'schema_version'"),
    "future_version": (_edit(lambda o: o.update(schema_version=99)),
                       "schema_version 99 is not supported"),
    "string_version": (_edit(lambda o: o.update(schema_version="1")), "is not supported"),
    "no_nodes": (_edit(lambda o: o.pop("nodes")), "missing required key 'nodes'"),
    "bad_worker": (_edit(lambda o: o["nodes"][0].update(worker="worker9")),
                   "unknown worker 'worker9'"),
    "bad_kind": (_edit(lambda o: o["nodes"][0].update(kind="magic")), "unknown kind 'magic'"),
    "dangling_edge": (_edit(lambda o: o["nodes"][0]["next"].append(["nowhere", 0])),
                      "edge to unknown node 'nowhere'"),
    "bad_edge": (_edit(lambda o: o["nodes"][0]["next"].append("x")),
                 "expected [node id, input number] or null"),
    "seq_type": (_edit(lambda o: o["nodes"][0].update(seq="7")), "expected int, found str"),
    "dup_id": (_edit(lambda o: o["nodes"].append(dict(o["nodes"][0]))), "duplicate node id"),
    "root_missing": (_edit(lambda o: o["passes"][0].update(roots=["ghost"])),
                     "root 'ghost' is not a node of the trace"),
    "root_nrs_short": (_edit(lambda o: o["passes"][0].update(root_nrs=[0, 1])),
                       "expected one input number (an int from 0) per root"),
    "bad_initiator": (_edit(lambda o: o.update(initiator="nobody")), "initiator 'nobody'"),
    "send_without_msg": (_edit(lambda o: [n.pop("msg_id") for n in o["nodes"]
                                          if n["kind"] == "send"]), "needs 'msg_id'"),
    "real_not_object": (_edit(lambda o: o.update(real=[1])), "expected an object or null"),
    "bad_status": (_edit(lambda o: o.update(reference={"comparison": [
        {"var": "t1", "leaf": o["nodes"][0]["id"], "worker": "worker0", "status": "matched"}]})),
                   "reference.comparison[0].status: unknown status 'matched' (expected one of "
                   "match, mismatch, zero_unused, no_gradient, missing, extra, not_compared)"),
    "no_status": (_edit(lambda o: o.update(reference={"comparison": [{"var": "t1"}]})),
                  "reference.comparison[0].status: unknown status None"),
    "kind_names_the_key": (_edit(lambda o: o["nodes"][1].update(kind="Send")),
                           "nodes[1].kind: unknown kind 'Send' (expected one of op, send, recv, "
                           "accumulate_grad)"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_trace_is_one_clear_line(tmp_path: Path, case: str) -> None:
    make, expect = CASES[case]
    path = make(tmp_path)
    with pytest.raises(TraceError) as info:
        load(path)
    text = info.value.one_line()
    assert expect in text and str(path) in text and "\n" not in text
    runner = CliRunner()
    for args in (["replay", str(path)], ["export", str(path), "--format", "dot", "-o",
                                           str(tmp_path / "x.dot")]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        lines = [ln for ln in result.output.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: ") and expect in lines[0]
        assert "Traceback" not in result.output
    assert not (tmp_path / "x.dot").exists()


def test_missing_trace_file_says_how_to_make_one(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["replay", str(tmp_path / "nope.json")])
    assert result.exit_code == 2
    assert "no such trace file" in result.output and "distviz run" in result.output


def test_good_trace_round_trips(tmp_path: Path) -> None:
    path, obj = _good(tmp_path)
    again = load(path)
    assert again.to_json() == obj
    assert path.read_text().count("\n") >= len(obj["nodes"])  # one node per line


def test_invalid_json_names_file_line_and_column_once(tmp_path: Path) -> None:
    path, _ = _good(tmp_path)
    lines = path.read_text().splitlines()
    start = lines[2].index('"name":')  # cut inside this string of the third line (a node)
    bad = tmp_path / "bad.json"
    bad.write_text("\n".join(lines[:2] + [lines[2][:start + 3]]))
    with pytest.raises(TraceError) as info:
        load(bad)
    assert info.value.one_line() == (
        f"{bad}:3: not valid JSON at column {start + 1}: unterminated string; the file is truncated "
        "or is not a distviz trace")


def test_empty_trace_file_says_it_is_empty(tmp_path: Path) -> None:
    bad = tmp_path / "empty.json"
    bad.write_text("\n")
    with pytest.raises(TraceError) as info:
        load(bad)
    assert info.value.one_line() == f"{bad}: the file is empty; expected a distviz trace (JSON)"


def test_words_load_as_members_and_write_back_unchanged(tmp_path: Path) -> None:
    """A node's kind and a reference row's status are read as their enums (``NodeKind``,
    ``RowStatus``), by the fast path and the checked one, and written as the same words."""
    path, obj = _good(tmp_path)
    leaf = next(n for n in obj["nodes"] if n["kind"] == "accumulate_grad")
    obj["reference"] = {"comparison": [{"var": "t1", "leaf": leaf["id"], "worker": leaf["worker"],
                                        "status": "zero_unused"}]}
    obj["nodes"][0]["vars"] = ""     # not a list: this node takes the checked path
    path.write_text(json.dumps(obj))
    trace = load(path)
    assert {type(n.kind) for n in trace.nodes} == {NodeKind}
    assert {n.kind for n in trace.nodes} <= set(NodeKind)
    assert trace.reference is not None
    assert [r.status for r in trace.reference.rows] == [RowStatus.ZERO_UNUSED]
    assert trace.reference.rows[0].ok
    again = json.loads(trace.dumps())
    assert [n["kind"] for n in again["nodes"]] == [n["kind"] for n in obj["nodes"]]
    assert again["reference"]["comparison"][0]["status"] == "zero_unused"


def test_node_lines_are_one_per_line_with_any_name_and_any_integer(tmp_path: Path) -> None:
    """A trace's node lines are written by orjson (non-ASCII characters as UTF-8), and by
    ``json`` when a node holds an integer orjson cannot write (beyond 64 bits): either way one
    node per line, with the values given."""
    trace = F.design_note()
    trace.nodes[0].var = "poids_λ"
    path = tmp_path / "t.trace.json"
    trace.save(path)
    text = path.read_text(encoding="utf-8")
    assert text.count("\n") == len(trace.nodes) + 2, "one node per line"
    assert load(path).to_json() == trace.to_json()
    trace.nodes[1].msg_id = 2**70
    text = trace.dumps()
    assert text.count("\n") == len(trace.nodes) + 2, "one node per line"
    obj = json.loads(text)
    assert obj["nodes"][1]["msg_id"] == 2**70 and obj["nodes"][0]["var"] == "poids_λ"
