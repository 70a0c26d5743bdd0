"""The order two trainers' calls changed a worker's state in, read from what the callee noted
(``distviz.runner.supervisor.served_order``), and what the reference and the verdicts make of it
(pure, milliseconds).

``tests/runs/fuzz_training_1206_7_order.json`` is a run of the fuzz's program
``fuzz-training-1206-7`` whose final parameters "differed" from the reference: each trainer
makes its module with ``rpc.remote("extra", Extra)``, trainer2's call began first, trainer1's
reached ``extra`` first and got ``extra.Extra#0`` (the first initial weights). The reference went
in the order the calls began, and its losses are those of a real run in that other order.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import replay_fixtures as F

from distviz.runner.supervisor.collate import TrainingRun, collate, interleaving
from distviz.runner.supervisor.served_order import callee_order
from distviz.trace.sections import RowStatus

RUN = json.loads((Path(__file__).resolve().parents[2] / "runs"
                  / "fuzz_training_1206_7_order.json").read_text())
MAKE = 3   # each trainer's third point: rpc.remote("extra", Extra)


def _ended(points: list[list[Any]]) -> list[list[Any]]:
    """The saved run's points with the ends its two ``rpc.remote`` calls get now (the run is
    older: they stayed open). ``rpc.remote("extra", Extra)`` returned once the module was made
    (``_wait_built``), before the next call began; ``rpc.remote("ps", net_of)`` ends when the
    owner's reply comes, taken here as by the end of the next call, which ps served through the
    same RRef after it made the value."""
    out = [list(p) for p in points]
    out[0][2] = out[1][2] if int(out[0][2]) < 0 else out[0][2]
    out[MAKE - 1][2] = out[MAKE][1] if int(out[MAKE - 1][2]) < 0 else out[MAKE - 1][2]
    return out


POINTS: dict[str, list[list[Any]]] = {t: _ended(ps) for t, ps in RUN["points"].items()}


def _made(first: str, second: str, gap: int = 100_000) -> dict[str, list[list[Any]]]:
    """``extra``'s notes: ``first``'s Extra made, then ``second``'s (``gap`` ns apart; a
    negative gap makes them overlap), inside both trainers' calls."""
    start = max(int(POINTS[t][MAKE - 1][1]) for t in POINTS) + 10_000
    return {"extra": [[first, "Extra", start, start + 700_000],
                      [second, "Extra", start + 700_000 + gap, start + 1_000_000 + gap]]}


def test_the_saved_run_differed_because_the_module_made_first_went_to_the_later_caller() -> None:
    begun = {t: int(POINTS[t][MAKE - 1][1]) for t in POINTS}
    assert begun["trainer2"] < begun["trainer1"]          # trainer2's call began first ...
    assert RUN["real_modules"] == {"trainer1": ["extra.Extra#0"],   # ... trainer1's came first
                                   "trainer2": ["extra.Extra#1"]}
    # the reference computed the other order faithfully: its losses are a real run's in it
    assert RUN["other_order"]["real_modules"]["trainer2"] == ["extra.Extra#0"]
    assert RUN["reference_loss"] == RUN["other_order"]["real_loss"] != RUN["real_loss"]
    assert {r["status"] for r in RUN["final"] if "Extra" in r["name"]} == {"mismatch"}


def test_the_reference_follows_the_order_the_callee_made_the_modules_in() -> None:
    # the trainers' start times alone put trainer2's call first, which was the mistake
    plain = interleaving(POINTS).order
    assert plain.index(("trainer2", MAKE)) < plain.index(("trainer1", MAKE))
    order = interleaving(POINTS, _made("trainer1", "trainer2"))
    assert order.order.index(("trainer1", MAKE)) < order.order.index(("trainer2", MAKE))
    assert order.state.callees == ("extra",) and order.state.clash is None
    for t in POINTS:   # every trainer's own points still in its own order
        mine = [n for who, n in order.order if who == t]
        assert mine == sorted(mine) == list(range(1, len(POINTS[t]) + 1))
    again = interleaving(POINTS, _made("trainer2", "trainer1"))
    assert again.order.index(("trainer2", MAKE)) < again.order.index(("trainer1", MAKE))


def test_calls_that_changed_one_worker_at_the_same_time_have_no_known_order() -> None:
    state = callee_order(POINTS, _made("trainer1", "trainer2", gap=-300_000))
    assert state.clash == (
        "trainer1's call Extra and trainer2's call Extra ran on extra at the same time and "
        "changed its state (random numbers drawn or a module made), so the order they changed "
        "it in is not known")


def test_one_trainers_calls_alone_leave_nothing_to_order() -> None:
    one = {"extra": _made("trainer1", "trainer2")["extra"][:1]}
    assert callee_order(POINTS, one) == ({}, (), None)
    assert interleaving(POINTS, one).order == interleaving(POINTS).order


def test_a_call_served_by_a_trainer_beside_its_own_main_has_no_known_order() -> None:
    start = int(POINTS["trainer2"][MAKE - 1][1]) + 10_000
    state = callee_order(POINTS, {"trainer1": [["trainer2", "sample", start, start + 5]]})
    assert state.callees == ("trainer1",)
    assert state.clash is not None and "beside its own main" in state.clash


def test_a_call_not_told_apart_or_out_of_its_trainers_turn_has_no_known_order() -> None:
    both = {"a": [["rpc", 0, -1], ["rpc", 10, 20]], "b": [["rpc", 1, 2]]}  # a remote still open
    made = {"w": [["a", "Make", 15, 16], ["b", "Make", 1, 2]]}
    assert "not told apart" in str(interleaving(both, made).state.clash)
    late = {"a": [["rpc", 0, 30], ["rpc", 5, 8]], "b": [["rpc", 1, 2]]}   # an async call
    made = {"w": [["a", "Make", 10, 12], ["b", "Make", 1, 2]]}   # reached w after a's next call
    assert "after its main's next call or step had begun" in str(interleaving(late, made).state.clash)


def _run(served: dict[str, list[list[Any]]]) -> TrainingRun:
    """Two trainers of one context each, the reference in their points' order, and a final
    parameter that differs from the reference's (as in the saved run)."""
    run = TrainingRun(trainers=["trainer1", "trainer2"], points=POINTS, served=served)
    for k, t in enumerate(run.trainers):
        run.windows[t] = [[1, 10 * k, 10 * k + 5]]
        run.counts[t] = 1
        info = {"trainer": t, "index": 1, "context_id": 1, "loss": [1.0], "gradients": {},
                "enter_ns": 10 * k, "exit_ns": 10 * k + 5, "steps": []}
        run.contexts.append((F.design_note().to_json(), info, {}))
    run.reference = {"outcome": "completed", "points": RUN["reference_points"],
                     "contexts": [{"trainer": t, "index": 1, "loss": [1.0], "gradients": {},
                                   "steps": []} for t in run.trainers],
                     "final": {"extra.Extra#0.seq.0.bias": {"all": [0.5], "dtype": "float32"}}}
    run.final = {"extra": {"extra.Extra#0.seq.0.bias": {"all": [0.25], "dtype": "float32"}}}
    return run


def test_values_made_in_an_unknown_order_are_not_compared_and_the_reason_says_why() -> None:
    rec = collate(_run(_made("trainer1", "trainer2", gap=-300_000)), None)
    assert rec.training is not None and rec.training.ok is None     # not "differs"
    (row,) = rec.training.final
    assert row.status == RowStatus.NOT_COMPARED and "ran on extra at the same time" in row.reason
    assert all(t.reference and t.reference["comparable"] is False for t in rec.contexts)


def test_values_made_in_a_known_order_are_compared() -> None:
    rec = collate(_run(_made("trainer1", "trainer2")), None)
    assert rec.training is not None and rec.training.ok is False    # a real difference stays
    assert [r.status for r in rec.training.final] == [RowStatus.MISMATCH]
