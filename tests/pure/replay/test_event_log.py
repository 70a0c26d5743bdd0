"""The replay's events kept as columns (``EventLog``) against the engine's own state.

Every step makes exactly one event, whose ``step`` is its index; running a task's nodes in one
loop (``Engine.run``) logs the same events as one ``advance`` at a time; and what an event says
about the queue and the dependency counts is what a re-simulation to that step finds.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import replay_fixtures as F

from distviz.replay import replay, synthetic_trace
from distviz.replay.engine import Engine
from distviz.replay.event_log import EventLog
from distviz.replay.graph import IndexedGraph
from distviz.replay.state import QUEUE_CAP
from distviz.trace import Trace

TRACES: dict[str, Callable[[], Trace]] = {
    "design_note": F.design_note, "g1": F.g1, "nested": F.nested,
    "fail_backward": F.fail_backward, "crash_backward": F.crash_backward,
    "unused_rpc_result": F.unused_rpc_result, "no_grad_loop": F.no_grad_loop,
    "two_passes": lambda: F.two_passes(False), "two_passes_retained": lambda: F.two_passes(True),
    "stack_tie": lambda: F.stack_tie(9), "multi_output_unused": F.multi_output_unused,
    "missing_send": F.missing_send, "fanout": F.fanout, "wide": F.wide,
    "synthetic_3k": lambda: synthetic_trace(3000, 4, seed=3),
}


def _logged(trace: Trace, *, stepwise: bool) -> EventLog:
    engine = Engine(IndexedGraph(trace), "fast", emit=True)
    log = engine.log
    assert log is not None
    if not stepwise:
        engine.run()
        return log
    while not engine.s.finished:
        engine.advance()
        assert len(log) == engine.s.step + 1, "a step made no event, or more than one"
    return log


@pytest.mark.parametrize("name", sorted(TRACES))
def test_run_logs_what_advance_logs_one_step_at_a_time(name: str) -> None:
    trace = TRACES[name]()
    fast, slow = _logged(trace, stepwise=False), _logged(trace, stepwise=True)
    assert fast.rec == slow.rec and fast.pool == slow.pool
    assert fast.extra.keys() == slow.extra.keys() and fast.messages == slow.messages
    assert [e.to_json() for e in fast] == [e.to_json() for e in slow]


@pytest.mark.parametrize("name", sorted(TRACES))
def test_events_say_what_the_state_at_their_step_holds(name: str) -> None:
    r = replay(TRACES[name]())
    events = r.events
    assert isinstance(events, EventLog)
    assert [e.step for e in events] == list(range(len(events)))
    assert [e.step for e in reversed(events)] == list(range(len(events)))[::-1]
    assert events[-1] == events[len(events) - 1] and events[1:3] == [events[1], events[2]]
    for ev in events:
        if ev.action not in ("execute", "accumulate") or ev.worker is None:
            continue
        state = r.state_at(ev.step).workers[ev.worker]
        d = ev.detail
        assert d["queue"] == state.queue[:QUEUE_CAP] and d["queue_len"] == len(state.queue)
        for node, left in dict(d.get("decrements", [])).items():   # an edge twice: the last
            assert state.deps.get(node, 0) == left
        for node in d.get("pushed", []):
            assert node in state.queue or node in state.executed


def test_bad_index_and_amend_are_refused() -> None:
    events = replay(F.design_note()).events
    assert isinstance(events, EventLog)
    with pytest.raises(IndexError):
        events[len(events)]
    with pytest.raises(KeyError):
        events.amend(next(e.step for e in events if e.action == "execute"), ())


@pytest.mark.parametrize("name", ["g1", "fanout", "two_passes", "synthetic_3k", "missing_send"])
def test_the_viewer_reads_the_columns_as_it_reads_the_events(name: str) -> None:
    from types import SimpleNamespace

    from distviz.render.html.data import _events
    r = replay(TRACES[name]())
    plain = SimpleNamespace(events=list(r.events))   # a replay whose events are a plain list
    assert _events(r, r.graph) == _events(plain, r.graph)  # type: ignore[arg-type]
