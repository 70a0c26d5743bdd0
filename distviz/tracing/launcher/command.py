"""``distviz trace``'s parent: run the user's command with distviz's hooks and stop it cleanly
(torch-free).

The command runs unchanged in a session of its own, with distviz's bootstrap on ``PYTHONPATH``
and the settings in ``DISTVIZ_TRACE``, or started early behind a gate that the settings open
(``distviz.tracing.launcher.launch``). This process becomes a child subreaper, so a process the program
leaves behind is re-parented here rather than to init, and is stopped at the end. It:

* forwards Ctrl-C (SIGINT) and SIGTERM to the program's process group, and kills what is left
  when a second Ctrl-C comes or a grace period ends;
* on SIGUSR1 (a traced process predicted or saw a hang, with ``--on-hang stop``) stops every
  process of the program (SIGTERM, then SIGKILL);
* at the end reads the session's event log and returns what the summary needs.

While the command runs, ``<out>/running.json`` names the session, so that ``distviz snapshot
<out>`` finds the program's processes (``distviz.tracing.snapshot.client``).

What only the end needs (the summary's modules) is imported on a side thread once the program
has started, so it is not on the program's way in or out.

Traces are written by the traced processes themselves, atomically, as each context ends, so
every trace recorded before a crash, a Ctrl-C or a kill is intact.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from distviz.limits import TRACE_INTERRUPT_GRACE, TRACE_SETTLE, TRACE_STOP_GRACE
from distviz.tracing.config import TraceConfig
from distviz.tracing.launcher import launch
from distviz.tracing.launcher.launch import CommandNotExecutable, resolve
from distviz.tracing.shared import job_files

if TYPE_CHECKING:  # pragma: no cover - the end's modules are imported while the program runs
    from distviz.tracing.shared import inflight, journal

_PR_SET_CHILD_SUBREAPER = 36

#: Imported while the program runs (see the module docstring).
AFTER_START = ("distviz.tracing.shared.journal", "distviz.tracing.shared.inflight", "rich.console",
               "distviz.tracing.launcher.run_summary",
               "distviz.tracing.launcher.backward_counts", "distviz.cuts", "rich.table",
               "rich.text")


@dataclass
class Finished:
    """How the traced command ended: its return code (negative: killed by that signal),
    whether distviz stopped it for a hang or the user interrupted it, the processes it left
    behind, and the session's events."""

    returncode: int
    stopped_for_hang: bool
    interrupted: bool
    leftovers: int
    events: list[journal.Event] = field(default_factory=list)
    seconds: float = 0.0
    terminated: bool = False     # distviz itself got SIGTERM (else Ctrl-C, when interrupted)
    in_flight: list[inflight.Stuck] = field(default_factory=list)   # backwards never returned


@dataclass
class _Flags:
    """What the signal handlers saw."""

    stop: bool = False
    interrupts: int = 0
    term: bool = False


def _exit_fd(pid: int) -> int | None:
    """A file descriptor that becomes readable when process ``pid`` ends (Linux's pidfd), or
    ``None`` where there is none."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _pause(ended: int | None, seconds: float) -> None:
    """Wait ``seconds``, or less when the command ends (``ended``: ``_exit_fd``); one wake-up,
    and signal handlers run at once."""
    if ended is None:
        time.sleep(seconds)
    else:
        select.select([ended], [], [], seconds)


def _import_all(names: tuple[str, ...]) -> None:
    """Import ``names`` (a failure is left to the import that needs the module).

    At the thread's normal priority: a thread of the lowest (niceness 19) gets about 1 % of a
    core that a busy program wants, so on a loaded machine its 50 ms of imports took seconds,
    and the end of the run, which waits for a module it holds, waited for it."""
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - raised again, where it matters, by the real import
            continue


def _descendants(pid: int) -> list[int]:
    """Live descendants of ``pid`` (zombies left out: they are gone but for their exit
    status, which ``_reap`` collects), from ``/proc/*/stat``: one pass over the process table
    (what ``psutil`` does, without its 40 ms of import on every run). Where there is no
    ``/proc`` (not Linux), ``psutil``'s."""
    try:
        entries = [e.name for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:  # pragma: no cover - not Linux
        return _descendants_psutil(pid)
    children: dict[int, list[int]] = {}
    for name in entries:
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:     # gone since the listing
            continue
        state, ppid = stat[stat.rindex(b")") + 2:].split(maxsplit=2)[:2]
        if state not in (b"Z", b"X"):   # a zombie's children were re-parented already
            children.setdefault(int(ppid), []).append(int(name))
    out: list[int] = []
    todo = [pid]
    while todo:
        found = children.get(todo.pop(), [])
        out.extend(found)
        todo.extend(found)
    return out


def _descendants_psutil(pid: int) -> list[int]:
    import psutil

    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []
    out: list[int] = []
    for child in children:
        try:
            if child.status() not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
                out.append(child.pid)
        except psutil.Error:
            continue
    return out


def _signal_all(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except OSError:
        pass
    for pid in _descendants(os.getpid()):
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _stop_everything(pgid: int, grace: float, settle: float = 0.0) -> int:
    """Wait up to ``settle`` seconds for the program's processes to end by themselves (a
    helper such as multiprocessing's resource tracker leaves when its parent has), then
    SIGTERM them and SIGKILL what is left after ``grace``; returns how many were running."""
    deadline = time.monotonic() + settle
    pause = 0.002       # a helper usually leaves within milliseconds of its parent
    while _descendants(os.getpid()) and time.monotonic() < deadline:
        _reap()
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
    left = len(_descendants(os.getpid()))
    if not left:
        return 0
    _signal_all(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and _descendants(os.getpid()):
        _reap()
        time.sleep(0.05)
    _signal_all(pgid, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and _descendants(os.getpid()):
        _reap()
        time.sleep(0.05)
    _reap()
    return left


def run(argv: list[str], config: TraceConfig,
        say: Callable[[str], None] | None = None) -> Finished:
    """Run ``argv`` traced with ``config`` (whose ``session_dir`` and ``parent_pid`` are
    filled in here) until it ends; see the module docstring. Raises ``CommandNotFound`` /
    ``CommandNotExecutable`` before starting anything (or letting the command started early
    run)."""
    command = resolve(argv)
    session = tempfile.mkdtemp(prefix="distviz-trace-")
    cfg = TraceConfig(**{**{k: getattr(config, k) for k in config.__dataclass_fields__},
                         "session_dir": session, "parent_pid": os.getpid()})
    Path(cfg.out_dir).mkdir(parents=True, exist_ok=True)
    job_files.announce(cfg.out_dir, session)     # ``distviz snapshot`` finds the job from -o
    flags = _Flags()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        pass
    t0 = time.monotonic()
    early = launch.take_early(command)
    try:
        proc = (early.release(cfg.to_env()) if early is not None else
                subprocess.Popen(command, env=launch.environment(cfg.to_env()),
                                 start_new_session=True))
    except PermissionError as exc:
        job_files.withdraw(cfg.out_dir)
        shutil.rmtree(session, ignore_errors=True)
        raise CommandNotExecutable(f"{argv[0]}: {exc.strerror}") from None
    pgid = proc.pid
    threading.Thread(target=_import_all, args=(AFTER_START,), name="distviz-imports",
                     daemon=True).start()

    def on_usr1(signum: int, frame: FrameType | None) -> None:
        flags.stop = True

    def on_int(signum: int, frame: FrameType | None) -> None:
        flags.interrupts += 1
        _signal_all(pgid, signal.SIGINT if flags.interrupts == 1 else signal.SIGKILL)

    def on_term(signum: int, frame: FrameType | None) -> None:
        flags.term = True
        _signal_all(pgid, signal.SIGTERM)

    old = {s: signal.signal(s, h) for s, h in ((signal.SIGUSR1, on_usr1),
                                               (signal.SIGINT, on_int),
                                               (signal.SIGTERM, on_term))}
    leftovers = 0
    ended = _exit_fd(proc.pid)
    try:
        stopped = False
        deadline: float | None = None
        while proc.poll() is None:
            if flags.stop and not stopped:
                stopped = True
                if say:
                    say("stopping the program (--on-hang stop)")
                _stop_everything(pgid, TRACE_STOP_GRACE)
            if (flags.interrupts or flags.term) and deadline is None:
                deadline = time.monotonic() + TRACE_INTERRUPT_GRACE
            if deadline is not None and time.monotonic() > deadline:
                _stop_everything(pgid, 0.5)
            _pause(ended, 0.05)
        leftovers = _stop_everything(pgid, TRACE_STOP_GRACE, settle=TRACE_SETTLE)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if ended is not None:
            os.close(ended)
        _reap()
        job_files.withdraw(cfg.out_dir)
    from distviz.tracing.shared import inflight, journal

    events = journal.read(session)
    stuck = inflight.read(session)
    shutil.rmtree(session, ignore_errors=True)
    return Finished(returncode=proc.returncode, stopped_for_hang=flags.stop,
                    interrupted=bool(flags.interrupts) or flags.term, terminated=flags.term,
                    leftovers=leftovers, events=events, seconds=time.monotonic() - t0,
                    in_flight=stuck)
