"""MkDocs hook: the parts of the reference that come from the code itself.

``<!-- distviz:cli -->`` becomes every command's ``--help``, from the real typer app run
in-process (so the page cannot say an option the command lacks); ``<!-- distviz:exit-codes -->``
becomes the table of the one ``ExitCode`` enum. ``tests/pure/project/test_docs.py`` imports
this file too and checks what it makes.
"""

from __future__ import annotations

from typing import Any

CLI_MARK = "<!-- distviz:cli -->"
EXIT_CODES_MARK = "<!-- distviz:exit-codes -->"

#: The terminal the help is rendered for: no colour, 100 columns (as the docs tests use).
HELP_ENV = {"NO_COLOR": "1", "COLUMNS": "100", "TERM": "dumb"}


def command_names() -> list[str]:
    """Every command, in the order ``distviz --help`` lists them."""
    import typer.main

    from distviz.cli import app

    group = typer.main.get_command(app)
    return list(getattr(group, "commands", {}))


def help_text(command: str | None) -> str:
    """``distviz [COMMAND] --help`` as the real app prints it."""
    from typer.testing import CliRunner

    from distviz.cli import app

    args = [command, "--help"] if command else ["--help"]
    result = CliRunner().invoke(app, args, env=HELP_ENV, prog_name="distviz")
    if result.exit_code != 0:
        raise RuntimeError(f"distviz {' '.join(args)} exited {result.exit_code}: {result.output}")
    return result.output.rstrip()


def cli_reference() -> str:
    """The reference of every command: a section each, with its ``--help``."""
    parts = ["## `distviz`", "", "```text", help_text(None), "```", ""]
    for name in command_names():
        parts += [f"## `distviz {name}`", "", "```text", help_text(name), "```", ""]
    return "\n".join(parts)


def exit_code_table() -> str:
    """The exit codes as a Markdown table, from ``distviz.limits.ExitCode``."""
    from distviz.limits import ExitCode

    rows = ["| exit code | name | meaning |", "|---|---|---|"]
    for code in sorted(ExitCode, key=int):
        meaning = code.meaning.replace("|", r"\|")
        rows.append(f"| {int(code)} | `{code.name}` | {meaning} |")
    return "\n".join(rows)


def on_page_markdown(markdown: str, **_: Any) -> str:
    if CLI_MARK in markdown:
        markdown = markdown.replace(CLI_MARK, cli_reference())
    if EXIT_CODES_MARK in markdown:
        markdown = markdown.replace(EXIT_CODES_MARK, exit_code_table())
    return markdown
