"""``distviz scenarios``: list the shipped scenarios."""

from __future__ import annotations

from distviz.cli.app import app, guard, stdout_console
from distviz.errors import DistvizError, UsageError


@app.command()
@guard
def scenarios() -> None:
    """List the shipped scenarios; run one by name from any folder.

    Example:

      distviz scenarios
    """
    from rich.table import Table

    from distviz.scenario import load_scenario
    from distviz.scenario.shipped import scenario_dir, shipped_scenarios
    found = shipped_scenarios()
    if not found:
        raise UsageError(f"no shipped scenarios in {scenario_dir()}; reinstall distviz")
    table = Table(box=None, pad_edge=False)
    table.add_column("name", no_wrap=True)
    table.add_column("workers", justify="right", no_wrap=True)
    table.add_column("description", overflow="fold")
    for name, path in found.items():
        try:
            sc = load_scenario(str(path))
            table.add_row(name, str(len(sc.workers)), sc.description)
        except DistvizError as exc:
            table.add_row(name, "?", f"invalid: {exc.one_line()}")
    out = stdout_console()
    out.print(table)
    out.print(f"run one with: distviz run NAME (the files are in {scenario_dir()})",
              markup=False)
