"""What tests/pure/views/test_views_agree.py and tests/e2e/test_views_agree_browser.py share."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import replay_fixtures as F

from distviz.replay import Replay, replay
from distviz.trace import Trace, load

TRACES = Path(__file__).parents[1] / "traces"


CASES: dict[str, Callable[[], Trace]] = {
    "design_note": F.design_note, "g1": F.g1, "nested": F.nested, "callback": F.callback,
    "multi_root": F.multi_root, "fanout": F.fanout, "two_passes": lambda: F.two_passes(True),
    "multi_output_unused": F.multi_output_unused, "unused_rpc_result": F.unused_rpc_result,
    "leftover_sends": F.leftover_sends, "fail_backward": F.fail_backward,
    "recorded_no_grad_rpc": lambda: load(TRACES / "no_grad_rpc.json"),
    "recorded_overwritten_result": lambda: load(TRACES / "overwritten_result.json"),
}


def _replayed(name: str, mode: str) -> tuple[Trace, Replay]:
    trace = CASES[name]()
    return trace, replay(trace, mode)


def _pending(r: Replay, step: int) -> dict[str, int]:
    return {n: c for ws in r.state_at(step).workers.values() for n, c in ws.deps.items()}
