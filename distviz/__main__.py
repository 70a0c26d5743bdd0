"""``distviz``'s entry point: the console script and ``python -m distviz``.

Light on purpose. For ``distviz trace ... -- python ...`` it first starts the program's
interpreter behind its gate (``distviz.tracing.launcher.launch``: the program runs nothing until the
command line is checked), so that the program's start-up overlaps the import of the typer CLI
and the checks; then it runs the CLI (``distviz.cli.main``), and aborts the program started
early if the CLI never let it run (a bad option, ``--help``, Ctrl-C).
"""

from __future__ import annotations

import sys

#: The commands whose program starts while the command line is read.
EARLY_START = frozenset({"trace"})


def main() -> None:
    early = len(sys.argv) > 1 and sys.argv[1] in EARLY_START
    if early:
        from distviz.tracing.launcher import launch
        launch.start_early(sys.argv[2:])
    try:
        from distviz.cli import main as cli
        cli()
    finally:
        if early:
            launch.abort_early()


if __name__ == "__main__":
    main()
