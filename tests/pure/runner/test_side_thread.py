"""The one thread-with-timeout (``distviz.recorder.side_thread.in_threads``). Pure: no torch."""

from __future__ import annotations

import threading
import time

from distviz.recorder.side_thread import in_threads


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
