"""The command-line interface: a thin typed shell over the library.

It alone prints, writes files and picks exit codes, so every other package returns values.
Each command lives in a module of its own, ``cmd_<command>.py``, and is registered when that
module is imported: the console script imports only the command its command line names, so
``distviz trace`` starts the program without first loading every other command.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING, Any

from distviz import limits

if TYPE_CHECKING:  # pragma: no cover
    from distviz.cli.app import App

__all__ = ["COMMAND_MODULES", "app", "main", "register"]

#: The module that registers each command (importing it registers the command on ``app``).
#: ``--help`` lists the commands in this order (the order their modules are imported in).
COMMAND_MODULES = {name: f"distviz.cli.cmd_{name}" for name in (
    "run", "check", "scenarios", "replay", "export", "graph", "why", "fuzz", "snapshot", "trace")}


def register(modules: tuple[str, ...] | None = None) -> App:
    """Import ``modules`` (default: every command's, in ``--help``'s order) and return ``app``."""
    for module in modules or tuple(dict.fromkeys(COMMAND_MODULES.values())):
        importlib.import_module(module)
    from distviz.cli.app import app
    return app


#: Commands whose process ends without Python's teardown (``os._exit`` once its output is
#: flushed): ``distviz trace``'s parent has stopped every process, removed its session folder
#: and written its index before it returns, and freeing typer's, rich's and distviz's modules
#: one by one took another 60 ms of every traced run.
QUICK_EXIT = frozenset({"trace"})


def main() -> None:
    """Console-script entry point: registers the command the command line names (every command
    for anything else: help, ``--version``, a name that is not a command), then runs it."""
    name = sys.argv[1] if len(sys.argv) > 1 else ""
    module = COMMAND_MODULES.get(name)
    register((module,) if module else None)
    from distviz.cli.app import main as run
    try:
        run()
    except SystemExit as done:
        if name not in QUICK_EXIT:
            raise
        code = done.code
        if code is None:
            code = limits.EXIT_OK
        elif not isinstance(code, int):     # sys.exit(message), as Python prints it
            print(code, file=sys.stderr)
            code = limits.PYTHON_EXIT_MESSAGE
        launch = sys.modules.get("distviz.tracing.launcher.launch")
        if launch is not None:          # the program started early and never let run
            launch.abort_early()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def __getattr__(name: str) -> Any:
    if name == "app":
        globals()["app"] = register()
        return globals()["app"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Loading the submodule ``distviz.cli.app`` binds it as this package's attribute ``app``; the
# attribute is the typer app (``__getattr__``), as it always was, so the module's binding goes.
importlib.import_module("distviz.cli.app")
globals().pop("app", None)
