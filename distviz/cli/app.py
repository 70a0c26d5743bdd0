"""The typer app, the consoles, and how a command ends: one line per error with its exit code."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

import typer

from distviz.cli.usage import Command, Group
from distviz.errors import DistvizError, Interrupted
from distviz.limits import EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK

if TYPE_CHECKING:  # pragma: no cover - rich is imported when a console is made
    from rich.console import Console

__all__ = ["app", "fail", "guard", "main", "stderr_console", "stdout_console",
           "unbounded_console"]

class App(typer.Typer):
    """The typer app whose commands read like distviz (``distviz.cli.usage``)."""

    def command(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("cls", Command)
        return super().command(*args, **kwargs)


app = App(add_completion=False, no_args_is_help=True, rich_markup_mode=None, cls=Group,
          help="Record, replay and visualize PyTorch distributed autograd (FAST mode).\n\n"
               "Example:\n\n  distviz run design_note")


def version_text() -> str:
    """``distviz X.Y.Z (Python A.B.C)``: what ``distviz --version`` prints."""
    from distviz import __version__
    return f"distviz {__version__} (Python {sys.version.split()[0]})"


def _show_version(value: bool) -> None:
    if value:
        print(version_text(), flush=True)
        raise typer.Exit(EXIT_OK)


@app.callback()
def _top(version: bool = typer.Option(False, "--version", is_eager=True, callback=_show_version,
                                      help="Print distviz's version and exit.")) -> None:
    """Record, replay and visualize PyTorch distributed autograd (FAST mode).

    Example:

      distviz run design_note
    """


def stdout_console() -> Console:
    """Standard output. Like every console of distviz it reads no markup: names, descriptions
    and file names (``dist_autograd.backward(context_id, [loss])``) print as they are."""
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True, markup=False)


def unbounded_console() -> Console:
    """Standard output for text pictures (the graph's trees and tables): the terminal's width
    on a terminal; in a pipe or a file as wide as each line needs, so nothing is cut."""
    out = stdout_console()
    if out.is_terminal:
        return out
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True, width=1_000_000, markup=False)


def stderr_console() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False, markup=False)


def fail(err: DistvizError) -> typer.Exit:
    """Print ``err`` on stderr (one line per problem) and return the Exit to raise."""
    for line in err.lines():
        print(f"error: {line}", file=sys.stderr, flush=True)
    return typer.Exit(err.exit_code)


def guard(fn: Any) -> Any:
    """Run a command body: DistvizError -> one line + its exit code; Ctrl-C -> 130."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except typer.Exit:
            raise
        except DistvizError as err:
            raise fail(err) from None
        except KeyboardInterrupt:
            raise fail(Interrupted("interrupted by Ctrl-C")) from None
        except BrokenPipeError:
            try:
                sys.stdout = open(os.devnull, "w")  # noqa: SIM115
            except OSError:
                pass
            raise typer.Exit(EXIT_OK) from None
        except OSError as exc:  # a file we were asked to write or read
            where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
            print(f"error: {where}{exc.strerror or exc}; check the path and its permissions",
                  file=sys.stderr, flush=True)
            raise typer.Exit(EXIT_BAD_INPUT) from None
        except Exception as exc:  # noqa: BLE001
            if os.environ.get("DISTVIZ_DEBUG"):
                raise
            raise internal_error(exc) from None
    return wrapper


def internal_error(exc: BaseException) -> typer.Exit:
    """Print a bug in distviz as one line on stderr; return the Exit (``EXIT_INTERNAL``, 70,
    never 1: under ``distviz trace`` 1 is the program's own failure) to raise."""
    text = " ".join(str(exc).split())
    print(f"internal error: {type(exc).__name__}: {text} (set DISTVIZ_DEBUG=1 for the "
          "traceback and report it)", file=sys.stderr, flush=True)
    return typer.Exit(EXIT_INTERNAL)


def main() -> None:
    """Console-script entry point."""
    try:
        app(prog_name="distviz")
    except KeyboardInterrupt:
        print("error: interrupted by Ctrl-C", file=sys.stderr, flush=True)
        sys.exit(EXIT_INTERRUPTED)
    except Exception as exc:  # noqa: BLE001 - outside a command body (option parsing)
        if os.environ.get("DISTVIZ_DEBUG"):
            raise
        sys.exit(internal_error(exc).exit_code)
