"""Every ``dist_autograd.backward`` of a traced run, counted per initiator (pure, torch-free,
and light: ``distviz trace``'s parent imports it for the summary of every run).

Each traced process hands its ``BackwardStats`` (``distviz.tracing.shared.backward_stats``) to the
session when it ends; ``initiators`` merges them by initiator name, ``backwards_json`` is
``index.json``'s ``backwards`` and ``backward_lines`` the summary's lines: per initiator the
number of calls, median, 95th percentile and max wall time, the slowest by step, and those that
raised.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from distviz.tracing.shared.backward_stats import BackwardStats
from distviz.tracing.shared.journal import Event, EventKind
from distviz.words import duration, plural

__all__ = ["backward_lines", "backwards_json", "initiators"]


def initiators(events: list[Event]) -> dict[str, BackwardStats]:
    """Every process's ``backwards`` statistics, merged by initiator name."""
    out: dict[str, BackwardStats] = {}
    for ev in events:
        if ev.kind != EventKind.BACKWARDS or ev.stats is None:
            continue
        try:
            stats = BackwardStats.from_json(ev.stats)
        except (KeyError, ValueError, TypeError):
            continue
        name = stats.worker or ev.worker or f"pid {ev.pid}"
        if name in out:
            out[name].merge(stats)
        else:
            out[name] = stats
    return dict(sorted(out.items()))


def backwards_json(events: list[Event]) -> dict[str, Any]:
    """``index.json``'s ``backwards``: per initiator, ``BackwardStats.summary``."""
    return {name: s.summary() for name, s in initiators(events).items()}


def backward_lines(events: list[Event]) -> list[str]:
    """The summary's lines: one per initiator, then the backwards that raised."""
    out: list[str] = []
    for name, s in initiators(events).items():
        worst = sorted(s.slowest, reverse=True)
        slow = ", ".join(f"{step} ({duration(sec)})" for sec, step in worst)
        out.append(f"{name}: {plural(s.calls, 'backward call')}: median {duration(s.quantile(0.5))}, "
                   f"95th percentile {duration(s.quantile(0.95))}, max {duration(s.max_s)}; slowest by "
                   f"step: {slow}")
        if s.raised:
            first = "the first: " if s.raised > len(s.errors) else ""
            out.append(f"{name}: {plural(s.raised, 'backward')} raised ({first}"
                       f"{_raised(s.errors)})")
    return out


def _raised(errors: list[tuple[int, str]]) -> str:
    """``(step, error)`` pairs, each error once with its steps: ``steps 2 (3 times), 3: ...``."""
    by_text: dict[str, Counter[int]] = {}
    for step, text in errors:
        by_text.setdefault(text, Counter())[step] += 1
    parts = []
    for text, steps in by_text.items():
        where = ", ".join(f"{step} ({n} times)" if n > 1 else str(step)
                          for step, n in steps.items())
        parts.append(f"{'step' if len(steps) == 1 else 'steps'} {where}: {text}")
    return "; ".join(parts)
