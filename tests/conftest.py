"""Shared fixtures. RPC runs are cached per session: each scenario starts its workers once,
and the fork server (which imports torch once) is kept between runs and stopped at the end."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from builders.traced import traced  # noqa: F401 (the fixture, for every module)
from guards import WAIT_GUARD_S

# A suite started in the background by a non-interactive shell (``cmd &``) inherits SIGINT
# ignored, and every child a test starts would too; the tests that press Ctrl-C need it as a
# terminal gives it, so pytest's own process takes Python's handler (children get the default).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"


def pytest_sessionstart(session: pytest.Session) -> None:
    """Byte-compile distviz, the tests' programs and helpers and the benchmarks once, as an
    installed package is: the suite starts hundreds of Python processes (CLIs, traced programs,
    workers), and where ``PYTHONDONTWRITEBYTECODE`` is set (CI's machines set it) each one
    compiled every distviz module it imported, about 80 ms a command."""
    import compileall

    for folder in ("distviz", "tests", "bench"):
        compileall.compile_dir(str(ROOT / folder), quiet=2)

_CACHE: dict[tuple[Any, ...], Any] = {}


def run_cached(name: str, overrides: dict[str, str] | None = None, **options: Any) -> Any:
    """Run a shipped scenario once per session with the given options; return the RunResult."""
    from distviz.runner.supervisor.run import RunOptions, run_scenario
    from distviz.scenario import load_scenario

    key = (name, tuple(sorted((overrides or {}).items())), tuple(sorted(options.items())))
    if key not in _CACHE:
        path = name if name.endswith(".yaml") else str(SCENARIOS / f"{name}.yaml")
        sc = load_scenario(path, overrides or {})
        opts = RunOptions(keep_server=True, **options)
        _CACHE[key] = run_scenario(sc, opts)
    return _CACHE[key]


def pid_alive(pid: int) -> bool:
    """True if ``pid`` is a live (not zombie) process."""
    try:
        return psutil.Process(pid).status() not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    except psutil.Error:
        return False


def wait_until(check: Callable[[], bool], what: str, timeout: float = WAIT_GUARD_S) -> None:
    """Poll ``check`` until it holds; after ``timeout`` seconds fail, saying ``what`` did not
    happen (a deadline for something that takes a moment, never a fixed wait)."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} (waited {timeout:g} s)")
        time.sleep(0.05)


def descendants(pid: int) -> list[int]:
    """All live descendants of ``pid``."""
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []
    return [c.pid for c in children if pid_alive(c.pid)]


@pytest.fixture(scope="session", autouse=True)
def _stop_fork_server() -> Iterator[None]:
    yield
    try:
        from distviz.runner.supervisor.run import stop_server
    except Exception:  # pragma: no cover - import problems show up in the tests themselves
        return
    stop_server()


E2E = Path(__file__).resolve().parent / "e2e"
SLOW_MARKS = ("rpc", "browser", "build")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``e2e`` every test under tests/e2e/ and every test that starts real RPC workers,
    drives a browser or builds the package, so ``-m "not e2e"`` runs the fast suite."""
    for item in items:
        if E2E in item.path.parents or any(item.get_closest_marker(m) for m in SLOW_MARKS):
            item.add_marker(pytest.mark.e2e)
