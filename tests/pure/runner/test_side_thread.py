"""The one thread-with-timeout (``distviz.recorder.side_thread.in_threads``) and the alarms
(``Alarms``). Pure: no torch."""

from __future__ import annotations

import threading
import time

from distviz.recorder.side_thread import Alarms, in_threads


def test_each_function_runs_in_a_thread_of_its_own_and_gives_its_value_or_its_error() -> None:
    def fails() -> str:
        raise ValueError("no")
    names: list[str] = []

    def name() -> str:
        names.append(threading.current_thread().name)
        return "ok"
    ran = in_threads([name, fails, name], None, "distviz-test")
    assert [(r.done, r.value) for r in ran] == [(True, "ok"), (True, None), (True, "ok")]
    assert isinstance(ran[1].error, ValueError) and ran[0].error is None
    assert sorted(names) == ["distviz-test", "distviz-test-2"]


def test_a_function_still_running_at_the_deadline_is_left_running_not_done() -> None:
    release = threading.Event()
    start = time.monotonic()
    slow, quick = in_threads([lambda: release.wait(30), lambda: 1], 0.2, "distviz-test")
    waited = time.monotonic() - start
    release.set()
    assert not slow.done and slow.value is None and slow.error is None
    assert quick.done and quick.value == 1
    assert 0.15 < waited < 5


def test_an_alarm_goes_off_in_a_thread_of_its_own_after_its_time() -> None:
    fired: list[tuple[float, str]] = []
    done = threading.Event()
    alarms = Alarms("distviz-test-alarms")
    start = time.monotonic()

    def ring() -> None:
        fired.append((time.monotonic() - start, threading.current_thread().name))
        done.set()
    alarms.after(0.2, ring)
    assert done.wait(10)
    waited, name = fired[0]
    assert 0.15 < waited < 5 and name == "distviz-test-alarms-fired"


def test_a_cancelled_alarm_never_goes_off_and_the_others_still_do_in_their_order() -> None:
    order: list[str] = []
    done = threading.Event()
    alarms = Alarms("distviz-test-alarms")
    late = alarms.after(0.05, lambda: order.append("cancelled"))
    alarms.after(0.3, lambda: (order.append("second"), done.set()))
    alarms.after(0.1, lambda: order.append("first"))
    late.cancel()
    assert done.wait(10)
    time.sleep(0.05)
    assert order == ["first", "second"]


def test_an_alarm_that_takes_long_does_not_hold_up_the_next() -> None:
    release, second = threading.Event(), threading.Event()
    alarms = Alarms("distviz-test-alarms")
    alarms.after(0.01, lambda: release.wait(30))
    alarms.after(0.1, second.set)
    try:
        assert second.wait(10)
    finally:
        release.set()
