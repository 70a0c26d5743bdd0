"""The trace's typed sections (``distviz.trace.sections``): the JSON on disk unchanged, a
malformed section named by its key, and plain objects still accepted. Pure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import replay_fixtures as F

from distviz.errors import TraceError
from distviz.trace import load, loads
from distviz.trace.sections import Meta, Real, Reference, ScenarioInfo

TRACES = Path(__file__).parents[2] / "traces"


@pytest.mark.parametrize("path", sorted(TRACES.glob("*.json")), ids=lambda p: p.name)
def test_recorded_traces_read_typed_and_write_back_the_same_objects(path: Path) -> None:
    raw = json.loads(path.read_text(encoding="utf-8"))
    t = load(path)
    assert isinstance(t.real, Real) and isinstance(t.meta, Meta)
    assert t.real.outcome == raw["real"]["outcome"]
    assert len(t.real.events) == len(raw["real"]["events"])
    out = t.to_json()
    for key in ("real", "reference", "scenario", "meta"):
        assert json.dumps(out[key]) == json.dumps(raw[key]), key   # same keys, same order


@pytest.mark.parametrize(("section", "bad", "key"), [
    ("real", {"outcome": 5}, "real.outcome"),
    ("real", {"outcome": "completed", "interop_threads": True}, "real.interop_threads"),
    ("real", {"outcome": "completed", "events": [{"node": "a", "worker": "w"}, 3]},
     "real.events[1]"),
    ("real", {"outcome": "completed", "events": [{"node": 7}]}, "real.events[0].node"),
    ("reference", {"comparable": "yes"}, "reference.comparable"),
    ("scenario", {"name": ["x"]}, "scenario.name"),
    ("meta", {"traced": "pid 3"}, "meta.traced")])
def test_a_malformed_section_names_its_key(section: str, bad: dict[str, object],
                                           key: str) -> None:
    obj = F.design_note().to_json()
    obj[section] = bad
    with pytest.raises(TraceError) as info:
        loads(json.dumps(obj), source="t.json")
    assert info.value.key == key and "expected" in info.value.message


def test_unknown_keys_are_kept_and_keys_set_later_come_last() -> None:
    real = Real.from_json({"outcome": "hang", "t0_ns": 12, "error": None})
    real.after_hang = "RPC timed out"
    assert real.to_json() == {"outcome": "hang", "t0_ns": 12, "error": None,
                              "after_hang": "RPC timed out"}
    assert list(real.to_json()) == ["outcome", "t0_ns", "error", "after_hang"]
    assert Meta().to_json() == {} and ScenarioInfo(name="n").to_json() == {"name": "n"}


def test_a_plain_object_assigned_becomes_the_section_and_reads_as_before() -> None:
    t = F.design_note()
    t.reference = {"comparable": True, "ok": False, "comparison": []}
    assert isinstance(t.reference, Reference) and t.reference.ok is False
    assert t.reference["comparable"] is True and t.reference.get("missing") is None
    t.real = {"outcome": "completed", "events": []}
    t.real["deaths"] = [{"worker": "worker1"}]
    assert t.real.deaths == [{"worker": "worker1"}]
    assert dict(t.real) == {"outcome": "completed", "events": [], "deaths": [{"worker": "worker1"}]}
