"""Child-process runs that a module's tests read, started side by side by a module fixture.

A test names the runs it reads with ``@pytest.mark.runs(NAME, ...)``; the fixture starts the
runs of the selected tests (``marked``), two at a time in the order the tests read them
(``side_by_side``), and each test waits for its own. Runs are independent child processes
(their own folders and rendezvous files, ports the kernel picks): while one program's workers
wait (PyTorch's joins, RPC shutdown) the other's import torch, so the two cores stay busy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TypeVar

import pytest

T = TypeVar("T")

#: How many runs go at once: one per core of the 2-core machine the suite is sized for.
SIDE_BY_SIDE = 2


def marked(request: pytest.FixtureRequest) -> list[str]:
    """The runs the selected tests of the requesting module read, in test order, each once."""
    return list(dict.fromkeys(name for item in request.session.items
                              if getattr(item, "module", None) is request.module
                              for mark in item.iter_markers("runs") for name in mark.args))


@contextmanager
def side_by_side(jobs: dict[str, Callable[[], T]]) -> Iterator[Callable[[str], T]]:
    """Start ``jobs`` in order, ``SIDE_BY_SIDE`` at a time; yield a function that waits for one
    by name and returns its result (or raises its exception). On exit, a job that has not
    started (the session stopped early, ``-x``) is dropped and one that has is waited for."""
    pool = ThreadPoolExecutor(max_workers=SIDE_BY_SIDE)
    runs = {name: pool.submit(job) for name, job in jobs.items()}

    def result(name: str) -> T:
        assert name in runs, f"the test reads run {name!r}: mark it @pytest.mark.runs({name!r})"
        return runs[name].result()

    try:
        yield result
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
