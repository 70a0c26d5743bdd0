"""The Chrome trace-event export, checked against the trace-event format's rules."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pytest
from builders.graphs import design_trace, judged, replay_of
from builders.perfetto import _real

from distviz.render.perfetto import REAL_PID_BASE, REPLAY_PID_BASE, to_perfetto

REQUIRED = {
    "X": {"name", "cat", "ph", "ts", "dur", "pid", "tid"},
    "M": {"name", "ph", "pid", "args"},
    "s": {"name", "cat", "ph", "ts", "pid", "tid", "id"},
    "f": {"name", "cat", "ph", "ts", "pid", "tid", "id", "bp"},
    "i": {"name", "ph", "ts", "pid", "s"},
}


def _check_format(doc: dict[str, Any]) -> list[dict[str, Any]]:
    assert set(doc) >= {"traceEvents", "displayTimeUnit", "metadata"}
    json.dumps(doc)  # serialisable
    evs = doc["traceEvents"]
    for ev in evs:
        assert ev["ph"] in REQUIRED, ev
        missing = REQUIRED[ev["ph"]] - set(ev)
        assert not missing, (missing, ev)
        assert type(ev["pid"]) is int and type(ev.get("tid", 0)) is int
        if "ts" in ev:
            assert isinstance(ev["ts"], (int, float)) and ev["ts"] >= 0
        if ev["ph"] == "X":
            assert isinstance(ev["dur"], (int, float)) and ev["dur"] > 0
    starts = {(e["id"], e["cat"], e["name"]) for e in evs if e["ph"] == "s"}
    ends = {(e["id"], e["cat"], e["name"]) for e in evs if e["ph"] == "f"}
    assert starts == ends and len(starts) == sum(e["ph"] == "s" for e in evs)
    # slices on one track nest or are disjoint
    tracks: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)
    for e in evs:
        if e["ph"] == "X":
            tracks[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    for spans in tracks.values():
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack: list[float] = []
        for a, b in spans:
            while stack and stack[-1] <= a:
                stack.pop()
            assert not stack or stack[-1] >= b, f"slice {a}-{b} overlaps without nesting"
            stack.append(b)
    # flows bind inside a slice on their own track
    for e in evs:
        if e["ph"] in "sf":
            assert any(a <= e["ts"] <= b for a, b in tracks[(e["pid"], e["tid"])]), e
    return evs


def _slice_at(evs: list[dict[str, Any]], flow: dict[str, Any]) -> dict[str, Any]:
    return next(e for e in evs if e["ph"] == "X" and e["pid"] == flow["pid"]
                and e["tid"] == flow["tid"] and e["ts"] <= flow["ts"] <= e["ts"] + e["dur"])


def test_real_and_replay_tracks_with_message_flows() -> None:
    tr = design_trace()
    tr.real = _real(tr)
    rep = replay_of(tr)
    evs = _check_format(to_perfetto(judged(tr, rep)))
    names = {(e["pid"], e["args"]["name"]) for e in evs
             if e["ph"] == "M" and e["name"] == "process_name"}
    assert (REAL_PID_BASE + 1, "worker1 (rank 1) · real") in names
    assert (REPLAY_PID_BASE + 1, "worker1 (rank 1) · replay") in names
    real = [e for e in evs if e["ph"] == "X" and e["cat"] == "real"]
    assert {e["args"]["node"] for e in real} == {n.id for n in tr.nodes}
    add = next(e for e in real if e["args"]["node"] == "worker1/AddBackward0#1")
    assert add["dur"] == 1 and add["name"] == "AddBackward0" and add["args"]["seq"] == 1
    assert next(e for e in real if "t1" in e["args"]["node"])["name"] == "AccumulateGrad(t1)"
    # overlapping t1/t2 went to a second track of the same thread
    threads = {e["args"]["name"] for e in evs if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"worker0 main", "RPC server 0", "RPC server 0 (2)", "RPC server 1"} <= threads
    # every replayed node is on the replay tracks
    replayed = {ev.node for ev in rep.events if ev.action in ("execute", "accumulate")}
    assert {e["args"]["node"] for e in evs if e["ph"] == "X" and e["cat"] == "replay"} == replayed
    # message flows: s on the sender's recv slice -> f on the receiver's send slice, both sets
    for cat in ("real.message", "replay.message"):
        flows = [e for e in evs if e["ph"] in "sf" and e["cat"] == cat]
        assert len(flows) == 4, cat
        for s in (e for e in flows if e["ph"] == "s"):
            f = next(e for e in flows if e["ph"] == "f" and e["id"] == s["id"])
            assert "RecvRpcBackward" in _slice_at(evs, s)["name"]
            assert _slice_at(evs, f)["name"] == "SendRpcBackward"
            assert s["pid"] != f["pid"] and f["bp"] == "e"


def test_replay_only_without_real_run() -> None:
    tr = design_trace()
    rep = replay_of(tr)
    doc = to_perfetto(judged(tr, rep))
    evs = _check_format(doc)
    assert all(e["pid"] >= REPLAY_PID_BASE for e in evs)
    assert doc["metadata"]["replay_outcome"] == rep.outcome


def test_critical_path_track_and_marks() -> None:
    """With the timing analysis the export gets a critical-path track; the real slices and the
    message flows on the path are marked. The design note's path: worker0 sends 1:0 to worker1,
    whose answer 0:0 starts worker0's last call."""
    from distviz.analyses.timing import analyze
    from distviz.render.timing_tracks import CRITICAL_PID
    tr = design_trace()
    tr.real = _real(tr)
    tr.real.update({"passes_run": 1, "pass_seconds": [140e-6], "pass_start_us": [0.0]})
    timing = analyze(tr)
    assert timing is not None
    doc = to_perfetto(judged(tr, replay_of(tr)))
    evs = _check_format(doc)
    assert doc["metadata"]["critical_path"] == timing.summary()
    track = [e for e in evs if e["pid"] == CRITICAL_PID and e["ph"] == "X"]
    assert track[0]["name"] == "SumBackward0"     # it starts at 0: no start-up slice
    assert sum(e["dur"] for e in track) == pytest.approx(140.0)
    path = timing.passes[0].path
    assert path.messages == ["1:0", "0:0"]
    marked = {e["args"]["node"] for e in evs if e["ph"] == "X" and e["cat"] == "real"
              and e["args"].get("critical_path")}
    assert marked == set(path.nodes)
    critical_flows = [e for e in evs if e["ph"] in "sf" and e["cat"] == "real.critical_path"]
    assert sorted({e["name"] for e in critical_flows}) == ["gradient 0:0", "gradient 1:0"]


def test_accumulate_grad_slices_carry_no_sequence_number() -> None:
    # PyTorch stores UINT64_MAX for AccumulateGrad ("no sequence number"): never shown raw
    tr = design_trace()
    tr.real = _real(tr)
    evs = _check_format(to_perfetto(judged(tr, replay_of(tr))))
    leaves = [e for e in evs if e["ph"] == "X" and e["name"].startswith("AccumulateGrad")]
    assert {e["cat"] for e in leaves} == {"real", "replay"}
    assert all("seq" not in e["args"] for e in leaves)
    ops = [e for e in evs if e["ph"] == "X" and not e["name"].startswith("AccumulateGrad")]
    assert ops and all(isinstance(e["args"]["seq"], int) for e in ops)
    assert str(2**64 - 1) not in json.dumps(evs)
