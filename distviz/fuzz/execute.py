"""One generated program's run on real workers, shared by the plain and the training fuzz.

``run_text(text, name, options)`` loads the scenario text, runs and judges it with the
library's one "run and judge" (``distviz.judge.policy.run_and_judge``: a hang is confirmed, the fork
server kept for the next program) and returns ``(judged, None)``, or ``(judged or None,
error)`` when the text does not load or the run fails: a generator or runner problem, not a
disagreement. Raises ``Interrupted`` on Ctrl-C, after every worker is gone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from distviz.errors import DistvizError, Interrupted

if TYPE_CHECKING:  # pragma: no cover
    from distviz.fuzz.settings import FuzzOptions
    from distviz.judge.policy import JudgedRun

__all__ = ["run_text"]


def run_text(text: str, name: str, options: FuzzOptions
             ) -> tuple[JudgedRun | None, str | None]:
    """Run scenario ``text`` (file name ``name``); see the module docstring."""
    from distviz.judge.policy import run_and_judge
    from distviz.runner.supervisor.run import RunOptions
    from distviz.scenario import load_scenario_text

    try:
        scenario = load_scenario_text(text, name)
    except DistvizError as exc:
        return None, exc.one_line()
    opts = RunOptions(hang_timeout=options.hang_timeout, confirm_hang=True,
                      startup_timeout=options.startup_timeout,
                      forward_timeout=options.forward_timeout, keep_server=True)
    judged = run_and_judge(scenario, opts)
    err = judged.error
    if isinstance(err, Interrupted):
        raise err
    if err is not None:
        return judged, err.one_line() if isinstance(err, DistvizError) else str(err)
    return judged, None
