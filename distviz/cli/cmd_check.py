"""``distviz check SCENARIO``: validate a scenario without starting any worker."""

from __future__ import annotations

from distviz.cli.app import app, guard, stdout_console
from distviz.cli.options import (
    ScenarioArg,
    Sets,
    parse_sets,
)
from distviz.words import plural


@app.command()
@guard
def check(
    scenario: ScenarioArg,
    sets: Sets = None,
) -> None:
    """Validate a scenario without starting any worker.

    Example:

      distviz check pipeline --set micro=200
    """
    from distviz.scenario import load_scenario
    from distviz.scenario.shipped import resolve_scenario
    sc = load_scenario(str(resolve_scenario(str(scenario))), parse_sets(sets))
    passes = (f"{plural(len(sc.mains), 'main')} calling dist_autograd.backward" if sc.training
              else plural(len(sc.passes), "backward pass", "backward passes"))
    stdout_console().print(f"{scenario}: ok ({sc.name}: {plural(len(sc.workers), 'worker')}, "
                           f"{passes})", markup=False)
