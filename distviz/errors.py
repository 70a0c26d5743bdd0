"""One error hierarchy for distviz; the CLI maps each class to an exit code in one place.

Every message is one line that says what was expected, what was found and what to do, and
names the file, line and key where there is one (``scenario.yaml:14 main: ...``).
"""

from __future__ import annotations

from distviz import limits


class DistvizError(Exception):
    """Base class of every error distviz reports to a user (never shown with a traceback)."""

    exit_code = limits.EXIT_INTERNAL

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None,
                 key: str | None = None) -> None:
        self.message = message
        self.path = path
        self.line = line
        self.key = key
        super().__init__(self.one_line())

    def one_line(self) -> str:
        """Return ``file:line key: message`` with the parts that are known."""
        where = ""
        if self.path is not None:
            where = self.path if self.line is None else f"{self.path}:{self.line}"
        if self.key:
            where = f"{where} {self.key}" if where else self.key
        text = " ".join(self.message.split("\n")).strip()
        return f"{where}: {text}" if where else text


class ScenarioError(DistvizError):
    """The scenario file is not valid: YAML, keys, types or the restricted program text."""

    exit_code = limits.EXIT_BAD_INPUT


class TraceError(DistvizError):
    """A trace file cannot be read: not JSON, wrong schema version, missing or bad fields."""

    exit_code = limits.EXIT_BAD_INPUT


class UsageError(DistvizError):
    """Command-line options that conflict or make no sense together."""

    exit_code = limits.EXIT_BAD_INPUT


class OutputError(DistvizError):
    """A file distviz was asked to write is a folder or another thing it will not replace."""

    exit_code = limits.EXIT_BAD_INPUT


class RunError(DistvizError):
    """A run failed at run time: an op raised in the forward pass, a worker died, start-up failed."""

    exit_code = limits.EXIT_RUN_FAILED


class RunTimeout(RunError):
    """A run did not finish within its time limit (start-up or forward)."""

    exit_code = limits.EXIT_TIMEOUT


class RenderError(DistvizError):
    """A picture could not be made (no Graphviz, ``dot`` crashed or timed out)."""

    exit_code = limits.EXIT_RENDER


class Interrupted(DistvizError):
    """The user pressed Ctrl-C; every worker has been torn down."""

    exit_code = limits.EXIT_INTERRUPTED
