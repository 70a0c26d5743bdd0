"""One error hierarchy for distviz; the CLI maps each class to an exit code in one place.

Every message is one line that says what was expected, what was found and what to do, and
names the file, line and key where there is one (``scenario.yaml:14 main: ...``).
"""

from __future__ import annotations

from distviz import limits
from distviz.words import plural


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

    def lines(self) -> list[str]:
        """Return the lines to print: ``[one_line()]`` (``ScenarioProblems`` gives several)."""
        return [self.one_line()]


class ScenarioError(DistvizError):
    """The scenario file is not valid: YAML, keys, types or the restricted program text."""

    exit_code = limits.EXIT_BAD_INPUT


class ScenarioProblems(ScenarioError):
    """Several problems found in one scenario file, each a ``ScenarioError``, in file order.

    ``one_line()`` is the first problem and how many more there are; ``lines()`` gives one
    ``file:line key: message`` line per problem, the first ``limits.MAX_PROBLEMS_SHOWN`` of
    them, then ``and N more problems``.
    """

    def __init__(self, problems: list[ScenarioError]) -> None:
        self.problems = sorted(problems, key=lambda p: p.line or 0)
        first = self.problems[0]
        super().__init__(first.message, path=first.path, line=first.line, key=first.key)

    def one_line(self) -> str:
        more = len(self.problems) - 1
        return f"{self.problems[0].one_line()} (and {plural(more, 'more problem')})"

    def lines(self) -> list[str]:
        shown = [p.one_line() for p in self.problems[:limits.MAX_PROBLEMS_SHOWN]]
        hidden = len(self.problems) - len(shown)
        return shown + ([f"and {plural(hidden, 'more problem')}"] if hidden else [])


class TraceError(DistvizError):
    """A trace file cannot be read: not JSON, wrong schema version, missing or bad fields."""

    exit_code = limits.EXIT_BAD_INPUT


class UsageError(DistvizError):
    """Command-line options that conflict or make no sense together."""

    exit_code = limits.EXIT_BAD_INPUT


class OutputError(DistvizError):
    """A file distviz was asked to write is a folder or another thing it will not replace."""

    exit_code = limits.EXIT_BAD_INPUT


class RecordError(DistvizError):
    """``distviz.record`` was called where there is no graph to record: outside the context,
    after its backward pass, or with a context the forward pass did not run in."""

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


class TorchVersionError(DistvizError):
    """The installed torch is missing or outside the releases distviz supports."""

    exit_code = limits.EXIT_BAD_INPUT
