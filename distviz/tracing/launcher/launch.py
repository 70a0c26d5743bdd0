"""How ``distviz trace`` starts the traced command, and its early start (torch-free, light:
the console script imports it before typer).

The command runs unchanged in a session of its own, with ``distviz/tracing/boot`` first on
``PYTHONPATH`` (so every Python process it starts imports distviz's ``sitecustomize``) and the
settings in ``DISTVIZ_TRACE`` (``environment``).

**The early start.** Before the command can start, ``distviz trace``'s own process spends
about 100 ms in Python, typer and the checks of its command line; the command, a Python
program, then spends about as long in its interpreter's start-up, ``site`` and the import of
distviz's hooks before its first line. When the command is a Python interpreter that will run
the bootstrap (``gateable``: no ``-I``, ``-E`` or ``-S``), the console script starts it first
thing (``start_early``), behind a gate: ``DISTVIZ_GATE`` names the read end of a pipe, and the
bootstrap imports the hooks, then waits on that pipe before any of the program's code runs.
Once the command line is checked, ``distviz trace`` writes the settings there (``Gated.
release``); on a bad option, ``--help`` or Ctrl-C it closes the pipe (``abort_early``) and the
program's interpreter ends without having run anything of the program. The two start-ups
overlap, and what the program sees is unchanged: the same environment, ``DISTVIZ_TRACE`` set
by the bootstrap before the program runs, ``DISTVIZ_GATE`` gone.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess

from distviz.errors import DistvizError
from distviz.limits import EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND, TRACE_STOP_GRACE

#: The settings' environment variable (``distviz.tracing.config.ENV`` reads it).
SETTINGS_ENV = "DISTVIZ_TRACE"
#: The gate's environment variable: the file descriptor the bootstrap reads the settings from.
#: ``boot/sitecustomize.py`` spells it too (it reads it even where distviz cannot load).
GATE_ENV = "DISTVIZ_GATE"
#: The bootstrap's folder and the folder distviz is imported from (``os.path``: the console
#: script imports this module before it starts the program, ``pathlib`` takes 7 ms to load).
BOOT = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "boot")
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.realpath(__file__)))))

#: Python's short options that keep ``site`` and ``PYTHONPATH`` (so the bootstrap runs and
#: waits at the gate): ``-b -B -d -i -O -P -q -s -u -v -R``.
_KEEP_SITE = frozenset("bBdiOPqsuvR")
#: Short options whose value follows (``-X importtime``, ``-W error``).
_WITH_VALUE = frozenset("XW")
#: Short options after which the rest is the program (``-c CODE``, ``-m MODULE``).
_PROGRAM = frozenset("cm")


class CommandNotFound(DistvizError):
    """The command to trace does not exist (exit 127, as a shell)."""

    exit_code = EXIT_NOT_FOUND


class CommandNotExecutable(DistvizError):
    """The command to trace exists but cannot be run (exit 126, as a shell)."""

    exit_code = EXIT_NOT_EXECUTABLE


def resolve(argv: list[str]) -> list[str]:
    """The command with its program found on ``PATH``; raises ``CommandNotFound`` or
    ``CommandNotExecutable``."""
    if not argv:
        raise CommandNotFound("no command given; usage: distviz trace [OPTIONS] -- COMMAND...")
    program = argv[0]
    if os.sep in program:
        if not os.path.exists(program):
            raise CommandNotFound(f"{program}: no such file")
        if os.path.isdir(program) or not os.access(program, os.X_OK):
            raise CommandNotExecutable(f"{program}: not an executable file")
        return list(argv)
    found = shutil.which(program)
    if found is None:
        raise CommandNotFound(f"{program}: command not found (not on PATH)")
    return [found, *argv[1:]]


def pythonpath() -> str:
    """``PYTHONPATH`` for the command: the bootstrap first, distviz importable, then the
    user's own."""
    parts = [BOOT]
    if os.path.isfile(os.path.join(PACKAGE_ROOT, "distviz", "__init__.py")):
        parts.append(PACKAGE_ROOT)
    old = os.environ.get("PYTHONPATH")
    if old:
        parts.append(old)
    return os.pathsep.join(parts)


def environment(settings: str | None) -> dict[str, str]:
    """The command's environment: ``pythonpath()``, and ``DISTVIZ_TRACE`` set to ``settings``
    (``TraceConfig.to_env()``; ``None`` for a command started early, whose bootstrap sets it
    from the gate)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = pythonpath()
    env.pop(GATE_ENV, None)
    if settings is None:
        env.pop(SETTINGS_ENV, None)
    else:
        env[SETTINGS_ENV] = settings
    return env


def _is_python(program: str) -> bool:
    """``python``, ``python3``, ``python3.11``."""
    name = os.path.basename(program)
    version = name[len("python"):]
    return name.startswith("python") and (version == "" or version.replace(".", "").isdigit())


def gateable(command: list[str]) -> bool:
    """Whether ``command`` (resolved) is a Python interpreter that runs the bootstrap, and so
    waits at the gate before the program: its options before the program are all in
    ``_KEEP_SITE`` (anything else, ``-I``, ``-E``, ``-S`` or a long option, is started the
    usual way, once the command line is checked)."""
    if not _is_python(command[0]):
        return False
    args = iter(command[1:])
    for arg in args:
        if arg == "-" or not arg.startswith("-"):
            return True                     # a script, or the program on stdin
        if arg.startswith("--"):
            return False
        for k, letter in enumerate(arg[1:], start=2):
            if letter in _PROGRAM:
                return True
            if letter in _WITH_VALUE:
                if k == len(arg):           # ``-X importtime``: the value is the next one
                    next(args, None)
                break
            if letter not in _KEEP_SITE:
                return False
    return True                             # the interactive interpreter


class Gated:
    """The command, started early, waiting at its gate (the pipe's write end ``gate``)."""

    def __init__(self, command: list[str], proc: subprocess.Popen[bytes], gate: int) -> None:
        self.command = command
        self.proc = proc
        self.gate: int | None = gate

    def release(self, settings: str) -> subprocess.Popen[bytes]:
        """Let the program run with ``settings`` (``TraceConfig.to_env()``)."""
        assert self.gate is not None, "released twice"
        data = settings.encode()
        try:
            while data:                     # one write: the settings are far below a pipe's
                data = data[os.write(self.gate, data):]
        except BrokenPipeError:             # it ended before the gate; its status says how
            pass
        self._close()
        return self.proc

    def abort(self) -> None:
        """The program must not run: close the gate (its interpreter ends at once, having
        run nothing of the program) and wait for it; killed if it does not end in time."""
        self._close()
        try:
            self.proc.wait(TRACE_STOP_GRACE)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            self.proc.wait()

    def _close(self) -> None:
        if self.gate is not None:
            os.close(self.gate)
            self.gate = None


_EARLY: list[Gated] = []


def start_early(args: list[str]) -> None:
    """Start the command of ``distviz trace ARGS`` (what follows ``--``) behind its gate, if
    it is ``gateable``; anything unusual (no ``--``, a command not found) is left to the
    checks that follow, which start it the usual way."""
    if "--" not in args:
        return
    try:
        command = resolve(args[args.index("--") + 1:])
    except DistvizError:
        return
    if not gateable(command):
        return
    read, write = os.pipe()
    env = environment(None)
    env[GATE_ENV] = str(read)
    try:
        proc = subprocess.Popen(command, env=env, start_new_session=True, pass_fds=(read,))
    except OSError:
        os.close(write)
        return
    finally:
        os.close(read)
    _EARLY.append(Gated(command, proc, write))


def take_early(command: list[str]) -> Gated | None:
    """The command started early, if it is ``command`` (resolved); one started early for
    another command line is aborted."""
    if not _EARLY:
        return None
    gated = _EARLY.pop()
    if gated.command == command:
        return gated
    gated.abort()
    return None


def abort_early() -> None:
    """Abort the command started early, if it was never taken (``take_early``)."""
    while _EARLY:
        _EARLY.pop().abort()
