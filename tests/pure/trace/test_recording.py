"""Recordings of several contexts (trace schema_version 2) and what reads them: the file format
and its reader of version 1, the collation of a training run, several contexts on one worker,
and the commands with --context (pure, milliseconds)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import replay_fixtures as F
from builders.recording import _html, _invoke, _recording
from typer.testing import CliRunner

from distviz.analyses.concurrent import shared_workers
from distviz.cli import app
from distviz.errors import TraceError
from distviz.runner.supervisor.collate import (
    TrainingRun,
    collate,
    interleaving,
    schedule,
    shared_updates,
)
from distviz.trace import Trace, load
from distviz.trace.contexts_file import load_recording
from distviz.trace.sections import RowStatus


def test_a_recording_round_trips_and_keeps_one_node_per_line(tmp_path: Path) -> None:
    rec = _recording()
    path = rec.save(tmp_path / "r.json")
    text = path.read_text()
    assert json.loads(text)["schema_version"] == 2
    nodes = sum(len(t.nodes) for t in rec.contexts)
    assert text.count('{"id":') == nodes and text.count("\n") >= nodes
    back = load_recording(path)
    assert [len(t.nodes) for t in back.contexts] == [len(t.nodes) for t in rec.contexts]
    assert back.iterations == rec.iterations and back.training == rec.training
    assert back.pick(2).nodes == rec.contexts[1].nodes
    assert back.label(1) == "context 2 (worker0 2, id 0)"


def test_version_1_files_read_as_one_context(tmp_path: Path) -> None:
    path = F.design_note().save(tmp_path / "one.json")
    rec = load_recording(path)
    assert len(rec.contexts) == 1 and rec.iterations == [None] and rec.training is None
    rec.save(tmp_path / "again.json")   # one context, no training: still version 1
    assert json.loads((tmp_path / "again.json").read_text())["schema_version"] == 1


def test_load_names_the_way_to_read_version_2(tmp_path: Path) -> None:
    path = _recording().save(tmp_path / "r.json")
    with pytest.raises(TraceError, match="several contexts .* --context N"):
        load(path)


def test_an_unknown_status_in_a_training_summary_is_one_line_exit_2(tmp_path: Path) -> None:
    path = _recording().save(tmp_path / "r.json")
    obj = json.loads(path.read_text())
    obj["training"]["final"] = [{"name": "w", "worker": "worker1", "status": "same"}]
    path.write_text(json.dumps(obj))
    with pytest.raises(TraceError) as info:
        load_recording(path)
    line = info.value.one_line()
    assert line == (f"{path} training: bad training summary: unknown status 'same' (expected "
                    "one of match, mismatch, zero_unused, no_gradient, missing, extra, "
                    "not_compared)")
    result = CliRunner().invoke(app, ["replay", str(path)])
    assert result.exit_code == 2 and result.output.strip() == f"error: {line}"
    obj["training"]["final"] = [{"name": "w", "worker": "worker1", "status": "match"}]
    path.write_text(json.dumps(obj))
    assert load_recording(path).training.final[0].status is RowStatus.MATCH  # type: ignore[union-attr]


def test_pick_names_the_range() -> None:
    with pytest.raises(TraceError, match="^--context 3: the recording holds contexts 1 to 2$"):
        _recording().pick(3)


def _training_run(windows: dict[str, list[list[int]]], steps: dict[str, list[str]]) -> TrainingRun:
    run = TrainingRun(trainers=sorted(windows))
    for trainer, ws in windows.items():
        run.windows[trainer] = ws
        run.counts[trainer] = len(ws)
        for index, enter, exit_ in ws:
            trace = F.design_note().to_json()
            info = {"trainer": trainer, "index": index, "context_id": index, "loss": [1.0],
                    "gradients": {}, "enter_ns": enter, "exit_ns": exit_,
                    "steps": [{"optimizer": "SGD", "updates": [
                        {"worker": "worker0", "name": n, "norm": 0.1} for n in steps[trainer]]}]}
            run.contexts.append((trace, info, {}))
    return run


def test_schedule_orders_contexts_and_sees_overlap() -> None:
    order, overlapped = schedule({"a": [[1, 0, 10], [2, 20, 30]], "b": [[1, 12, 18]]})
    assert order == [("a", 1), ("b", 1), ("a", 2)] and overlapped is False
    assert schedule({"a": [[1, 0, 10]], "b": [[1, 5, 15]]})[1] is True


def test_updates_of_parameters_another_trainer_uses_are_found() -> None:
    windows = {"a": [[1, 0, 10]], "b": [[1, 5, 15]]}
    # design_note's leaves are t1, t2, t4 on worker0: a steps t1, which b's context uses
    assert shared_updates(_training_run(windows, {"a": ["t1"], "b": ["other"]})) == ["t1"]
    assert shared_updates(_training_run(windows, {"a": ["mine"], "b": ["yours"]})) == []


def test_updates_each_hogwild_trainer_makes_to_the_layer_both_use_are_found() -> None:
    windows = {"a": [[1, 0, 10]], "b": [[1, 5, 15]]}
    assert shared_updates(_training_run(windows, {"a": ["t1"], "b": ["t1"]})) == ["t1"]


def test_collate_compares_nothing_when_the_order_of_shared_updates_is_not_known() -> None:
    run = _training_run({"a": [[1, 0, 10]], "b": [[1, 5, 15]]}, {"a": ["t1"], "b": []})
    run.reference = {"outcome": "completed", "contexts": [], "final": {}}
    rec = collate(run, None)
    assert rec.training is not None and rec.training.shared_updates == ("t1",)
    assert all(t.reference and t.reference["comparable"] is False for t in rec.contexts)
    assert all(it and it.reference and it.reference.ok is None for it in rec.iterations)
    assert "was not recorded" in (rec.contexts[0].reference or {})["error"]


# a forward call and a step per context: a's step ends (9) before b's forward begins (10)
APART = {"a": [["context", 0, 0], ["rpc", 1, 3], ["step", 5, 9]],
         "b": [["context", 2, 2], ["rpc", 10, 12], ["step", 13, 15]]}


def test_interleaving_orders_points_by_start_and_finds_a_step_under_way() -> None:
    assert interleaving(APART)[:2] == (
        [("a", 1), ("a", 2), ("b", 1), ("a", 3), ("b", 2), ("b", 3)], None)
    # two forward calls at once only read: the order is still known
    assert interleaving({"a": [["rpc", 0, 10]], "b": [["rpc", 5, 15]]}).clash is None
    late = dict(APART, b=[["context", 2, 2], ["rpc", 8, 12], ["step", 13, 15]])
    assert interleaving(late).clash == (
        "a's optimizer step (its context 1) and b's call to another worker (its context 1) "
        "ran at the same time, so the order the shared parameters were read and updated in "
        "is not known")
    still_open = {"a": [["rpc", 0, -1]], "b": [["step", 5, 6]]}    # rpc.remote: never ends
    assert interleaving(still_open).clash is not None


def _hogwild_run(points: dict[str, list[list[Any]]]) -> TrainingRun:
    run = _training_run({"a": [[1, 0, 9]], "b": [[1, 2, 15]]}, {"a": ["t1"], "b": ["t1"]})
    run.points = points
    want = [{"trainer": t, "index": 1, "loss": [1.0], "gradients": {}, "steps": []}
            for t in ("a", "b")]
    run.reference = {"outcome": "completed", "contexts": want,
                     "final": {"t1": {"all": [0.5], "dtype": "float32"}},
                     "points": {t: [p[0] for p in ps] for t, ps in APART.items()}}
    run.final = {"worker0": {"t1": {"all": [0.5], "dtype": "float32"}}}
    return run


def test_collate_compares_hogwild_trainers_when_the_reference_went_in_their_order() -> None:
    rec = collate(_hogwild_run(APART), None)
    # compared: only that these contexts have no real backward keeps them from it
    assert [(t.reference or {})["error"] for t in rec.contexts] == [
        "the real backward did not complete"] * 2
    assert rec.training is not None and rec.training.ok is True
    late = dict(APART, b=[["context", 2, 2], ["rpc", 8, 12], ["step", 13, 15]])
    rec = collate(_hogwild_run(late), None)
    assert "is not known" in (rec.contexts[0].reference or {})["error"]
    assert rec.training is not None and rec.training.ok is None
    fewer = dict(APART, b=APART["b"][:2])
    rec = collate(_hogwild_run(fewer), None)
    assert "b made 2 context openings, calls and steps in the real run and 3 in the reference" \
        in (rec.contexts[0].reference or {})["error"]


def _with_calls(trace: Trace, worker: str, t0: float, nodes: list[str]) -> Trace:
    events = [{"pass": 0, "worker": worker, "node": n, "t_us": 10.0 * i, "dur_us": 5.0,
               "thread": "t/1", "grad_shapes": None} for i, n in enumerate(nodes)]
    trace.real = {"outcome": "completed", "t0_ns": int(t0 * 1000), "events": events}
    return trace


def test_calls_of_several_trainers_share_a_workers_engine_thread() -> None:
    dn = F.design_note()
    send = next(n.id for n in dn.nodes if n.kind == "send" and n.worker == "worker1")
    other = [n.id for n in dn.nodes if n.worker == "worker1" and n.kind != "send"]
    a = _with_calls(F.design_note(), "worker1", 0.0, [send, *other])
    b = _with_calls(F.design_note(), "worker1", 100.0, [send, *other])
    shared = shared_workers([a, b], ["t1 1", "t2 1"], ["t1", "t2"])
    assert len(shared) == 1 and shared[0].worker == "worker1" and shared[0].overlaps == 0
    assert [c.label for c in shared[0].calls] == ["t1 1", "t2 1"]
    assert "2 backward calls of 2 contexts" in shared[0].sentence
    late = _with_calls(F.design_note(), "worker1", 10.0, [send, *other])   # starts inside a
    assert shared_workers([a, late], ["t1 1", "t2 1"], ["t1", "t2"])[0].overlaps == 1
    assert shared_workers([a, b], ["t1 1", "t1 2"], ["t1", "t1"]) == []   # one trainer


def test_replay_shows_every_context_and_one_with_context(tmp_path: Path) -> None:
    path = _recording().save(tmp_path / "r.json")
    table = _invoke("replay", path)
    assert table.exit_code in (0, 8), table.output
    assert "2 contexts recorded of 2" in table.output and "worker0 2" in table.output
    one = _invoke("replay", path, "--context", 2)
    assert "-- context 2 (worker0 2, id 0)" in one.output
    assert "SGD.step(context) through DistributedOptimizer updates 1 parameter" in one.output
    report = json.loads(_invoke("replay", path, "--json").stdout)
    assert [c["context"] for c in report["contexts"]] == [1, 2]
    assert report["training"]["trainers"] == ["worker0"]
    bad = _invoke("replay", path, "--context", 5)
    assert bad.exit_code == 2
    assert bad.output == "error: --context 5: the recording holds contexts 1 to 2\n"


def test_graph_and_export_take_a_context(tmp_path: Path) -> None:
    path = _recording().save(tmp_path / "r.json")
    g = _invoke("graph", path, "--context", 2)
    assert g.exit_code == 0 and "worker2" in g.output   # nested() has a third worker
    out = tmp_path / "c2.dot"
    e = _invoke("export", path, "--context", 2, "--format", "dot", "-o", out)
    assert e.exit_code == 0, e.output
    assert "worker2" in out.read_text()


# -- the HTML viewer of a recording --------------------------------------------------------------


def test_the_html_viewer_of_a_recording_holds_every_context(tmp_path: Path) -> None:
    out, rec = _html(tmp_path)
    text = out.read_text()
    assert 'id="context"' in text and "context 2 (worker0 2, id 0)" in text
    assert "SGD.step(context) through DistributedOptimizer" in text


@pytest.mark.parametrize("args, message", [
    (["ps_two_trainers", "--no-backward"], "--no-backward does not apply to a training scenario"),
    (["ps_two_trainers", "--inject-delay", "recv=2ms"], "--inject-delay does not apply"),
    (["ps_two_trainers", "--contexts", "every:0"], "every:K needs a whole number K >= 1"),
    (["design_note", "--contexts", "first"], "has a backward: key and one context"),
])
def test_run_options_a_training_scenario_cannot_honour_start_nothing(
        args: list[str], message: str) -> None:
    result = _invoke("run", *args)
    assert result.exit_code == 2 and message in result.output, result.output


def test_a_trace_and_a_recording_repr_in_one_line() -> None:
    from pathlib import Path

    import distviz
    from distviz.trace.contexts_file import Recording
    tr = distviz.load(Path(__file__).parents[2] / "traces" / "pipeline.json")
    text = repr(tr)
    assert "\n" not in text and len(text) < 200 and f"{len(tr.nodes)} nodes" in text, text
    rec = Recording(contexts=[tr, tr], iterations=[None, None], workers=list(tr.workers))
    assert repr(rec) == f"<Recording: 2 contexts on {len(tr.workers)} workers>"
