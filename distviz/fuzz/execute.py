"""One generated program's run on real workers, shared by the plain and the training fuzz.

``run_text(text, name, options)`` loads the scenario text, runs it (a hang is confirmed, the
fork server kept for the next program) and returns ``(result, None)``, or ``(result or None,
error)`` when the text does not load or the run fails: a generator or runner problem, not a
disagreement. Raises ``Interrupted`` on Ctrl-C, after every worker is gone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from distviz.errors import DistvizError, Interrupted

if TYPE_CHECKING:  # pragma: no cover
    from distviz.fuzz.options import FuzzOptions
    from distviz.runner.parent.run import RunResult

__all__ = ["run_text"]


def run_text(text: str, name: str, options: FuzzOptions
             ) -> tuple[RunResult | None, str | None]:
    """Run scenario ``text`` (file name ``name``); see the module docstring."""
    from distviz.runner.parent.run import RunOptions, run_scenario
    from distviz.scenario import load_scenario_text

    try:
        scenario = load_scenario_text(text, name)
    except DistvizError as exc:
        return None, exc.one_line()
    opts = RunOptions(hang_timeout=options.hang_timeout, confirm_hang=True,
                      startup_timeout=options.startup_timeout,
                      forward_timeout=options.forward_timeout, keep_server=True)
    result = run_scenario(scenario, opts)
    if isinstance(result.error, Interrupted):
        raise result.error
    if result.error is not None:
        err = result.error
        return result, err.one_line() if isinstance(err, DistvizError) else str(err)
    return result, None
