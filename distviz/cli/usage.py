"""Usage lines, help and command-line mistakes in distviz's words.

typer's own forms read oddly beside distviz's messages (``{SCENARIO}``, ``trace_file <path>``,
``Input should be a valid integer, unable to parse string as an integer``). ``Command`` and
``Group`` keep typer's parsing and change only what is shown: usage lines name arguments as
``SCENARIO`` and ``-- COMMAND...``, value types read ``N``, ``NUMBER``, ``TEXT``, ``PATH``, and
every mistake is one line on stderr, ``error: --interop-threads zero: expected a whole number,
like 1``, with exit code 2 (``EXIT_BAD_INPUT``), as every other bad input.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable, Sequence
from typing import IO, Any

import typer
from typer.core import TyperCommand, TyperGroup

from distviz.limits import EXIT_BAD_INPUT
from distviz.words import suggest

__all__ = ["Command", "Group", "UsageMistake", "mistake_text"]

#: click's exceptions, from the click typer uses (its own copy in recent typer versions).
_ERRORS = importlib.import_module(typer.BadParameter.__module__)
_UsageError: Any = _ERRORS.UsageError

#: How a value type reads in help, in place of typer's ``<int>``.
_TYPES = {"<int>": "N", "<float>": "NUMBER", "<str>": "TEXT", "<path>": "PATH",
          "<bool>": "BOOLEAN", "<list[str]>": "TEXT..."}
_TYPE = re.compile(r"<[a-z\[\]| ]+>")

#: What a value of each kind should look like, for "expected ..." messages.
#: Keys from pydantic's messages (typer 0.29 on) and click's (``'x' is not a valid int``).
_EXPECTED = (("integer", "a whole number, like 1"), ("valid int", "a whole number, like 1"),
             ("number", "a number, like 5 or 0.5"), ("float", "a number, like 5 or 0.5"),
             ("bool", "true or false"))


class UsageMistake(_UsageError):
    """A command-line mistake shown as one ``error:`` line (exit code 2)."""

    exit_code = EXIT_BAD_INPUT

    def show(self, file: IO[str] | None = None) -> None:
        print(f"error: {self.message}", file=file or sys.stderr, flush=True)


def _argument_name(param: Any) -> str:
    name = str(param.metavar or param.name or "").upper()
    if param.nargs != 1 and not name.endswith("..."):
        name += "..."
    return name


def _given(param: Any, args: Sequence[str]) -> str | None:
    """The text given for option ``param`` in ``args`` (``--opt value`` or ``--opt=value``)."""
    for i, arg in enumerate(args):
        for opt in getattr(param, "opts", []):
            if arg == opt and i + 1 < len(args):
                return args[i + 1]
            if arg.startswith(opt + "="):
                return arg[len(opt) + 1:]
    return None


def mistake_text(err: Any, args: Sequence[str], command: str) -> str:
    """One line for a click ``UsageError`` raised while parsing ``args`` of ``command``
    (``distviz replay``): what was given, what was expected, what to do."""
    see = f"see {command} --help"
    param = getattr(err, "param", None)
    if isinstance(err, _ERRORS.NoSuchOption):
        near = suggest(err.option_name, sorted(err.possibilities or []))
        return f"no such option {err.option_name}{near}; {see}"
    if isinstance(err, _ERRORS.MissingParameter) and param is not None:
        if param.param_type_name == "argument":
            what = str(param.help or "").rstrip(".")
            what = what[:1].lower() + what[1:]
            return f"missing {_argument_name(param)}" + (f": {what}" if what else "") + \
                f"; {see}"
        return f"missing {param.opts[0]}; {see}"
    if isinstance(err, _ERRORS.BadParameter) and param is not None:
        flag = param.opts[0] if param.param_type_name == "option" else _argument_name(param)
        given = _given(param, args)
        lowered = str(err.message).lower()
        expected = next((e for key, e in _EXPECTED if key in lowered), None)
        value = f" {given}" if given is not None else ""
        if expected is not None:
            return f"{flag}{value}: expected {expected}"
        return f"{flag}{value}: {err.message}"
    return f"{err.format_message()}; {see}"


def _one_line(parse: Callable[[Any, list[str]], list[str]], ctx: Any, args: list[str],
              where: str) -> list[str]:
    """``parse(ctx, args)``, its command-line mistakes as one ``UsageMistake`` line (the help
    shown for no arguments stays as it is)."""
    given = list(args)
    try:
        return parse(ctx, args)
    except UsageMistake:
        raise
    except _UsageError as err:
        if isinstance(err, getattr(_ERRORS, "NoArgsIsHelpError", ())):
            raise
        raise UsageMistake(mistake_text(err, given, where), ctx) from None


class Command(TyperCommand):
    """A typer command whose usage line, help and mistakes read like distviz's messages."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name != "argument":
                continue
            name = _argument_name(param)
            if self.context_settings.get("ignore_unknown_options") and param.nargs != 1:
                name = f"-- {name}"     # the command's own options come after --
            pieces.append(name if param.required else f"[{name}]")
        return pieces

    def format_options(self, ctx: Any, formatter: Any) -> None:
        arguments: list[tuple[str, str]] = []
        options: list[tuple[str, str]] = []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                arguments.append((_argument_name(param), record[1]))
            else:
                options.append((_TYPE.sub(lambda m: _TYPES.get(m.group(0), "VALUE"),
                                          record[0]), record[1]))
        for title, rows in (("Arguments", arguments), ("Options", options)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        rest = _one_line(super().parse_args, ctx, args, _command_path(ctx))
        if self.context_settings.get("ignore_unknown_options"):
            self._no_unknown_option(ctx)
        return rest

    def _no_unknown_option(self, ctx: Any) -> None:
        """A command that takes ``-- COMMAND...`` keeps the options it does not know as the
        start of that command: one there is a mistyped option of its own, not a program
        (``--contextz all -- python train.py`` would run ``--contextz``)."""
        for param in self.get_params(ctx):
            words = ctx.params.get(param.name or "")
            if param.param_type_name != "argument" or param.nargs == 1 or not words:
                continue
            first = str(words[0])
            if first.startswith("-") and first != "-":
                options = sorted(o for p in self.get_params(ctx) for o in getattr(p, "opts", [])
                                 if o.startswith("-"))
                raise UsageMistake(f"no such option {first}{suggest(first, options)}; "
                                   f"see {_command_path(ctx)} --help", ctx)


class Group(TyperGroup):
    """The top-level group: its own mistakes (an unknown command) as one line too."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return _one_line(super().parse_args, ctx, args, "distviz")

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        try:
            return super().resolve_command(ctx, args)
        except UsageMistake:
            raise
        except _UsageError:
            name = args[0] if args else ""
            near = suggest(name, sorted(self.list_commands(ctx)))
            raise UsageMistake(f"no such command {name!r}{near}; see distviz --help",
                               ctx) from None


def _command_path(ctx: Any) -> str:
    """``distviz replay``, however distviz was started (``python -m distviz``)."""
    name = getattr(getattr(ctx, "command", None), "name", None)
    return f"distviz {name}" if name else "distviz"
