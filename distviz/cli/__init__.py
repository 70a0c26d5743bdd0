"""The command-line interface: a thin typed shell over the library.

It alone prints, writes files and picks exit codes (their table, ``EXIT_CODES``, is in
``distviz.limits`` with every other limit). The package:

* ``app``: the typer ``app``, the consoles, one-line errors with their exit codes (``guard``),
  ``main``;
* ``options``: every option as an ``Annotated`` type, apart from the command bodies, and the
  checks of option values;
* ``commands``: the command bodies (``run``, ``check``, ``scenarios``, ``replay``, ``export``,
  ``graph``), registered on ``app`` in that order when this package is imported; a new command
  goes in a module of its own, imported below;
* ``fuzz``: ``distviz fuzz`` (random programs checked against PyTorch), registered last;
* ``trace_command``: ``distviz trace -- COMMAND...`` (the work is in ``distviz.tracing``);
* ``snapshot_command``: ``distviz snapshot DIR``, a running traced job now;
* ``running``: a run from start to report (progress, partial trace, exit code);
* ``output``: what commands show and write (the replay, agreement, the JSON report, the step
  log, pictures, exit codes).
"""

from __future__ import annotations

from distviz.cli import (
    commands,  # noqa: F401  (registers the commands on app)
    fuzz,  # noqa: F401  (registers distviz fuzz)
    snapshot_command,  # noqa: F401  (registers distviz snapshot)
    trace_command,  # noqa: F401  (registers distviz trace)
)
from distviz.cli.app import app, main

__all__ = ["app", "main"]
