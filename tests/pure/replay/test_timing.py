"""Where the backward spends its time: the critical path, per-worker waiting and the what-if
simulation, on a hand-built trace whose times are known and on a recorded pipeline run.

The hand-built run is ``fanout`` (worker0 sends ``x`` to worker1..3, each returns ``tanh``):

::

    w0: Sum 100-110, Stack 115-125, Recv(->w1) 130-140, Recv(->w2) 145-155, Recv(->w3) 160-170
    w1: Send 200-205, Tanh 210-260, Recv 265-275            ~> w0: Send#0 330-335
    w2: Send 210-215, Tanh 220-520 (slow), Recv 525-535     ~> w0: Send#1 600-605, Acc 610-620
    w3: Send 220-225, Tanh 230-280, Recv 285-295            ~> w0: Send#2 360-365
    backward() returns at 700

(``AccumulateGrad(x)`` waits for all three sends: it runs once, in the last call.)

worker2's long TanhBackward0 decides the wall time: the path is start-up, worker0's first four
nodes, the message to worker2, worker2's three nodes, the message back, worker0's last call
and the end.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from replay_fixtures import fanout

from distviz.analyses.changes import (
    WhatIf,
    parse_inject_delay,
    parse_what_if,
    what_if_for_injection,
)
from distviz.analyses.timing import analyze, fmt_us
from distviz.analyses.whatif import predict
from distviz.errors import UsageError
from distviz.trace import Trace, load

RECORDED = Path(__file__).resolve().parents[2] / "traces" / "pipeline.json"

# (worker, node, start, end)
FANOUT_RUN = [
    ("worker0", "worker0/SumBackward0#4", 100, 110),
    ("worker0", "worker0/StackBackward0#3", 115, 125),
    ("worker0", "worker0/RecvRpcBackward#0", 130, 140),
    ("worker0", "worker0/RecvRpcBackward#0~1", 145, 155),
    ("worker0", "worker0/RecvRpcBackward#0~2", 160, 170),
    ("worker1", "worker1/SendRpcBackward#3", 200, 205),
    ("worker1", "worker1/TanhBackward0#2", 210, 260),
    ("worker1", "worker1/RecvRpcBackward#0", 265, 275),
    ("worker2", "worker2/SendRpcBackward#3", 210, 215),
    ("worker2", "worker2/TanhBackward0#2", 220, 520),
    ("worker2", "worker2/RecvRpcBackward#0", 525, 535),
    ("worker3", "worker3/SendRpcBackward#3", 220, 225),
    ("worker3", "worker3/TanhBackward0#2", 230, 280),
    ("worker3", "worker3/RecvRpcBackward#0", 285, 295),
    ("worker0", "worker0/SendRpcBackward#0", 330, 335),
    ("worker0", "worker0/SendRpcBackward#2", 360, 365),
    ("worker0", "worker0/SendRpcBackward#1", 600, 605),
    ("worker0", "worker0/AccumulateGrad(x)", 610, 620),
]


def timed_fanout(run: list[tuple[str, str, int, int]] = FANOUT_RUN) -> Trace:
    """``fanout`` with the real run above (one pass of 700 µs, post-hook durations)."""
    trace = fanout()
    events = [{"pass": 0, "worker": w, "node": n, "t_us": float(a), "dur_us": float(b - a),
               "thread": f"PTThreadPool/{w[-1]}", "grad_shapes": None} for w, n, a, b in run]
    trace.real = {"outcome": "completed", "error": None, "passes_run": 1,
                  "pass_seconds": [700e-6], "pass_start_us": [0.0], "interop_threads": 1,
                  "durations": "measured", "events": events, "gradients": {},
                  "unreachable": []}
    return trace


def test_fanout_fixture_matches_the_replay_order() -> None:
    """The hand-built times follow the order PyTorch's FAST mode gives this graph."""
    from distviz.judge.agreement import compare
    from distviz.replay import replay
    trace = timed_fanout()
    assert compare(trace, replay(trace)).order is True


def test_critical_path_follows_the_slow_worker() -> None:
    timing = analyze(timed_fanout())
    assert timing is not None and timing.source == "measured"
    (p,) = timing.passes
    path = p.path
    assert path.nodes == [
        "worker0/SumBackward0#4", "worker0/StackBackward0#3", "worker0/RecvRpcBackward#0",
        "worker0/RecvRpcBackward#0~1", "worker2/SendRpcBackward#3", "worker2/TanhBackward0#2",
        "worker2/RecvRpcBackward#0", "worker0/SendRpcBackward#1", "worker0/AccumulateGrad(x)"]
    assert path.messages == ["2:0", "0:1"]
    assert path.length_us == pytest.approx(700.0)
    assert path.total("startup") == pytest.approx(100.0)
    assert path.total("end") == pytest.approx(80.0)
    assert path.total("message") == pytest.approx(55.0 + 65.0)
    assert path.total("engine") == pytest.approx(30.0)
    assert path.compute_by_worker() == {"worker2": pytest.approx(315.0),
                                        "worker0": pytest.approx(55.0)}
    assert [s.kind for s in path.segments][:3] == ["startup", "compute", "engine"]


def test_critical_path_stays_on_a_busy_worker() -> None:
    """worker0's first answered call runs long (330-650): worker3's and worker2's answers
    arrive while it is busy, so their calls waited for worker0, not for their messages, and
    the path goes back through worker1's answer instead of worker2's."""
    run = [r for r in FANOUT_RUN if r[2] < 330] + [
        ("worker0", "worker0/SendRpcBackward#0", 330, 650),
        ("worker0", "worker0/SendRpcBackward#2", 655, 660),
        ("worker0", "worker0/SendRpcBackward#1", 665, 670),
        ("worker0", "worker0/AccumulateGrad(x)", 675, 685)]
    (p,) = analyze(timed_fanout(run)).passes  # type: ignore[union-attr]
    assert p.path.messages == ["1:0", "0:0"]
    assert p.path.nodes[-4:] == ["worker0/SendRpcBackward#0", "worker0/SendRpcBackward#2",
                                 "worker0/SendRpcBackward#1", "worker0/AccumulateGrad(x)"]
    assert p.path.nodes[3:6] == ["worker1/SendRpcBackward#3", "worker1/TanhBackward0#2",
                                 "worker1/RecvRpcBackward#0"]
    assert p.path.length_us == pytest.approx(700.0)
    assert p.path.total("engine") == pytest.approx(2 * 5.0 + 2 * 5.0 + 3 * 5.0)


def test_each_worker_time_adds_up_to_the_wall_time() -> None:
    (p,) = analyze(timed_fanout()).passes  # type: ignore[union-attr]
    by = {w.worker: w for w in p.workers}
    w0 = by["worker0"]
    assert (w0.startup_us, w0.compute_us, w0.engine_us, w0.waiting_us, w0.done_us) == \
        pytest.approx((100.0, 75.0, 25.0, 420.0, 80.0))
    w2 = by["worker2"]
    assert (w2.startup_us, w2.waiting_us, w2.compute_us, w2.engine_us, w2.done_us) == \
        pytest.approx((0.0, 210.0, 315.0, 10.0, 165.0))
    for w in p.workers:
        assert w.compute_us + w.engine_us + w.waiting_us + w.startup_us + w.done_us == \
            pytest.approx(700.0)


def test_summary_names_the_path_and_the_workers() -> None:
    lines = analyze(timed_fanout()).summary()  # type: ignore[union-attr]
    assert lines[0] == ("time: backward 700 µs (measured); critical path 9 nodes, 2 messages: "
                        "compute 370 µs (worker2 315 µs, worker0 55 µs), messages 120 µs, "
                        "engine 30 µs, start 100 µs, end 80 µs")
    assert lines[1].startswith("time per worker: worker0 busy 14% waiting 74% done 11% · ")


def test_no_real_run_means_no_timing() -> None:
    assert analyze(fanout()) is None
    with pytest.raises(UsageError, match="needs a completed real backward"):
        predict(fanout())


def test_old_traces_estimate_durations() -> None:
    """Without post-hook times a node lasts until the next one starts on its thread."""
    trace = timed_fanout()
    assert trace.real is not None
    del trace.real["durations"]
    timing = analyze(trace)
    assert timing is not None and timing.source == "estimated" and "estimated" in timing.note


def test_what_if_without_changes_reproduces_the_hand_built_run() -> None:
    pred = predict(timed_fanout())
    assert not pred.reordered
    assert pred.predicted_us == pytest.approx(700.0)
    sim = {(ex.node, ex.start_us) for exs in pred.passes[0].timeline.executions.values()
           for ex in exs}
    assert sim == {(n, float(a)) for _w, n, a, _b in FANOUT_RUN}


def test_what_if_slow_worker_moves_the_end_by_its_compute() -> None:
    """worker2 twice as slow: its 315 µs on the path double (the extra time comes after each
    node's work, so its message still leaves 10 µs into its recv, at 840, and takes the
    measured 65 µs); worker0 then runs its last call (905-925); worker2 is done at 850 and has
    worker0's acknowledgement at 955, worker0 has worker2's at 1005 (acknowledgements take
    50 µs, fitted so that the measured run ends at 700 µs)."""
    pred = predict(timed_fanout(), WhatIf(slow=(("worker2", 2.0),)))
    assert pred.predicted_us == pytest.approx(1005.0)
    # on the path, the recv counts until its message leaves
    assert pred.timing.passes[0].path.compute_by_worker()["worker2"] == pytest.approx(620.0)


def test_what_if_latency_delays_every_hop() -> None:
    """+100 µs per message: the path has two messages and the last acknowledgement chain two
    more hops."""
    base = predict(timed_fanout()).predicted_us
    pred = predict(timed_fanout(), parse_what_if("latency=100us"))
    assert pred.predicted_us == pytest.approx(base + 400.0)


def test_what_if_reorders_messages_that_now_arrive_first() -> None:
    """worker1 ten times slower: its answer now arrives last, so worker0 takes worker3's and
    worker2's calls first, and the engine runs AccumulateGrad(x) in worker1's call."""
    pred = predict(timed_fanout(), parse_what_if("slow=worker1:10x"))
    assert pred.reordered
    order = [ex.node for ex in pred.passes[0].timeline.executions["worker0"][5:]]
    assert order == ["worker0/SendRpcBackward#2", "worker0/SendRpcBackward#1",
                     "worker0/SendRpcBackward#0", "worker0/AccumulateGrad(x)"]
    path = pred.timing.passes[0].path
    assert path.messages == ["1:0"] and path.nodes[-1] == "worker1/RecvRpcBackward#0"


def test_what_if_bandwidth_uses_the_gradient_bytes() -> None:
    """Each gradient is a 2x2 float32 (16 bytes): at 1 kbit/s a message takes 128 ms."""
    pred = predict(timed_fanout(), parse_what_if("bandwidth=1kbit/s"))
    assert pred.predicted_us - 700.0 == pytest.approx(2 * 128_000.0, rel=1e-3)


@pytest.mark.parametrize(("text", "message"), [
    ("latency=5", "expected a number with a unit"),
    ("speed=2", "unknown; expected latency, bandwidth, slow or recv"),
    ("slow=worker9:2x", "no worker 'worker9'"),
    ("slow=worker1:0.5x", "factor of 1 or more"),
    ("latency", "expected KEY=VALUE"),
])
def test_bad_what_if_says_what_is_expected(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_what_if(text, ["worker0", "worker1"])


def test_what_if_parses_units() -> None:
    wi = parse_what_if("latency=5ms,bandwidth=1Gbit/s,slow=worker1:2x,recv=250us")
    assert wi == WhatIf(5000.0, 1e9, (("worker1", 2.0),), 250.0)
    assert wi.describe() == "latency +5 ms, bandwidth 1 Gbit/s, worker1 2x slower, recv +250 µs"
    assert parse_what_if("").empty


def test_inject_delay_parses_to_run_options_and_back() -> None:
    inj = parse_inject_delay(["recv=2ms", "worker1=3x"], ["worker0", "worker1"])
    assert inj == {"recv_s": 0.002, "slow": {"worker1": 3.0}}
    assert what_if_for_injection(inj) == WhatIf(recv_us=2000.0, slow=(("worker1", 3.0),))
    with pytest.raises(UsageError, match="--inject-delay 'worker7=3x': no worker"):
        parse_inject_delay(["worker7=3x"], ["worker0", "worker1"])


def test_fmt_us() -> None:
    assert [fmt_us(x) for x in (850, 12_400, 250_000, 1_520_000)] == \
        ["850 µs", "12.4 ms", "250 ms", "1.52 s"]


# -- a recorded run ----------------------------------------------------------------------------

def test_recorded_pipeline_path_is_the_wall_time() -> None:
    trace = load(RECORDED)
    timing = analyze(trace)
    assert timing is not None and timing.source == "measured"
    (p,) = timing.passes
    assert p.path.length_us == pytest.approx(p.wall_us)
    assert p.wall_us == pytest.approx(trace.real["pass_seconds"][0] * 1e6)  # type: ignore[index]
    assert set(p.path.compute_by_worker()) <= set(trace.workers)
    assert p.messages == 24


def test_recorded_pipeline_what_if_without_changes_reproduces_it() -> None:
    """Every node starts in the simulation where it started in PyTorch, so the wall time is
    the measured one."""
    trace = load(RECORDED)
    pred = predict(trace)
    assert not pred.reordered
    assert pred.predicted_us == pytest.approx(pred.measured_us, abs=0.01)
    measured = {(e["node"], e["t_us"]) for e in trace.real["events"]}  # type: ignore[index]
    sim = {(ex.node, round(ex.start_us, 3)) for exs in pred.passes[0].timeline.executions.values()
           for ex in exs}
    assert {n for n, _ in sim} == {n for n, _ in measured}
    got = dict(sim)
    assert all(abs(got[n] - t) < 0.01 for n, t in measured)


def test_recorded_pipeline_slower_network_is_slower() -> None:
    trace = load(RECORDED)
    base = predict(trace).predicted_us
    slower = predict(trace, parse_what_if("latency=1ms")).predicted_us
    # at least the path's round trips to the last stage and back
    assert slower > base + 2 * 1000.0


def test_critical_path_track_for_perfetto() -> None:
    from distviz.render.timing_tracks import CRITICAL_PID, critical_path_events
    events = critical_path_events(analyze(timed_fanout()))  # type: ignore[arg-type]
    slices = [e for e in events if e["ph"] == "X"]
    assert {e["pid"] for e in events} == {CRITICAL_PID}
    assert [e["name"] for e in slices][:3] == ["start-up (dependencies)", "SumBackward0",
                                               "engine"]
    assert "message 2:0 (to worker2)" in [e["name"] for e in slices]
    assert sum(e["dur"] for e in slices) == pytest.approx(700.0)
    assert all(a["ts"] + a["dur"] <= b["ts"] + 1e-6
               for a, b in zip(slices, slices[1:], strict=False))
