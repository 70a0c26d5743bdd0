"""Shared fixtures. RPC runs are cached per session: each scenario starts its workers once,
and the fork server (which imports torch once) is kept between runs and stopped at the end."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"

_CACHE: dict[tuple[Any, ...], Any] = {}


def run_cached(name: str, overrides: dict[str, str] | None = None, **options: Any) -> Any:
    """Run a shipped scenario once per session with the given options; return the RunResult."""
    from distviz.runner.parent import RunOptions, run_scenario
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
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def descendants(pid: int) -> list[int]:
    """All live descendants of ``pid`` (reads /proc; iterative)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] in ("Z", "X"):
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    out: list[int] = []
    stack = [pid]
    while stack:
        for c in children.get(stack.pop(), []):
            out.append(c)
            stack.append(c)
    return out


@pytest.fixture(scope="session", autouse=True)
def _stop_fork_server() -> Iterator[None]:
    yield
    try:
        from distviz.runner.parent import stop_server
    except Exception:  # pragma: no cover - import problems show up in the tests themselves
        return
    stop_server()
