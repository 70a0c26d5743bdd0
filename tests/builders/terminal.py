"""The design-note trace and its FAST-mode replay for the terminal renderers."""

from __future__ import annotations

from typing import Any

import replay_fixtures as F

from distviz.trace import Trace


def design_note_trace() -> Trace:
    """The shared design-note fixture (tests/replay_fixtures.py); ``local_design_note`` above
    keeps the exact sequence numbers and shapes a few tests here assert on."""
    trace: Trace = F.design_note()
    return trace


def replay_of(trace: Trace) -> Any:
    from distviz.replay import replay
    return replay(trace, mode="fast")
