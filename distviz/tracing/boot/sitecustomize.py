"""The bootstrap of ``distviz trace`` (torch-free).

``distviz trace`` puts this folder first on ``PYTHONPATH``, so Python imports this module at
start-up in every process the traced command starts: the command itself, processes made by
``torch.multiprocessing.spawn`` or ``subprocess``, ``torchrun``'s workers (forked processes
inherit what their parent loaded). When ``DISTVIZ_TRACE`` is set it puts ``_OnTorch`` first
on ``sys.meta_path``, a finder of its own that loads distviz's hooks
(``distviz.tracing.hooks.inject``) when the process first imports torch: a process of the
program that never does (``multiprocessing``'s resource tracker, a tool the program runs) loads
nothing of distviz (importing the hooks at start-up took a bare interpreter from 27 to 54 ms).
Then it runs the ``sitecustomize`` module it shadows, if there is one further on ``sys.path``.
It never stops the program: a problem here is one line on stderr.

A command that ``distviz trace`` started early (``distviz.tracing.launcher.launch``) has ``DISTVIZ_GATE``
instead of ``DISTVIZ_TRACE``: while the gate is closed the hooks' modules are imported, then
the settings are read from the gate before anything else happens; an empty gate means
``distviz trace`` refused its command line, and the interpreter ends at once, having run
nothing of the program.
"""

from __future__ import annotations

import importlib.machinery
import os
import sys
from types import ModuleType


def _chain(here: str) -> None:
    """Run the next ``sitecustomize.py`` on ``sys.path`` (the one this module shadows)."""
    for entry in sys.path:
        folder = os.path.abspath(entry or os.getcwd())
        candidate = os.path.join(folder, "sitecustomize.py")
        if folder == here or not os.path.isfile(candidate):
            continue
        import importlib.util

        spec = importlib.util.spec_from_file_location("_distviz_shadowed_sitecustomize",
                                                      candidate)
        if spec is not None and spec.loader is not None:
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        return


#: ``distviz.tracing.launcher.launch.GATE_ENV``, spelled here: it is read even where distviz cannot load.
_GATE = "DISTVIZ_GATE"


def _wait_at_gate(fd: str) -> None:
    """Read the settings from the gate into ``DISTVIZ_TRACE``; end the interpreter at once if
    there are none (``distviz trace`` refused its command line, or is gone)."""
    data = b""
    try:
        gate = int(fd)
        while True:
            chunk = os.read(gate, 1 << 16)
            if not chunk:
                break
            data += chunk
        os.close(gate)
    except (ValueError, OSError) as exc:
        print(f"distviz: cannot read the settings from {_GATE}={fd}: {exc}; the program did "
              "not run", file=sys.stderr, flush=True)
        from distviz.limits import ExitCode
        os._exit(ExitCode.INTERNAL)   # a bug in distviz
    except KeyboardInterrupt:
        data = b""
    if not data:
        os._exit(os.EX_OK)
    os.environ["DISTVIZ_TRACE"] = data.decode()


def _hooks(here: str) -> ModuleType:
    """``distviz.tracing.hooks.inject``, from this Python's distviz or from the one that runs."""
    try:
        from distviz.tracing.hooks import inject
    except ImportError:   # the program's Python does not have distviz installed
        sys.path.append(os.path.dirname(os.path.dirname(os.path.dirname(here))))
        from distviz.tracing.hooks import inject
    return inject


def _not_installed(exc: Exception) -> None:
    print(f"distviz: hooks not installed in process {os.getpid()}: "
          f"{type(exc).__name__}: {exc}", file=sys.stderr, flush=True)


class _OnTorch:
    """The first finder on ``sys.meta_path`` of a traced process: at the process's first
    ``import torch`` it takes itself off and hands that import to the hooks' own finder
    (``inject.finder``, which patches torch once torch's ``__init__`` has run). The import
    system asks a finder only for ``find_spec``; any other module costs one comparison."""

    def __init__(self, here: str) -> None:
        self.here = here

    def find_spec(self, fullname: str, path: object,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != "torch":
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        try:        # the program must run even if distviz cannot
            finder = _hooks(self.here).finder()
            return None if finder is None else finder.find_spec(fullname, path, target)
        except Exception as exc:  # noqa: BLE001
            _not_installed(exc)
            return None


def _closed(gate: str) -> bool:
    """Whether the gate has nothing to read yet: ``distviz trace`` is still checking its
    command line."""
    import select
    try:
        return not select.select([int(gate)], [], [], 0)[0]
    except (ValueError, OSError):   # ``_wait_at_gate`` says what is wrong
        return False


def _started_early(here: str, gate: str) -> None:
    """The command ``distviz trace`` started early: while its gate is still closed it imports
    the hooks' modules that do not need torch (a module at a time, never past the gate's
    opening: what is left waits for ``import torch``); then it reads the settings from the
    gate into ``DISTVIZ_TRACE``, and ``_boot`` arms ``_OnTorch`` as in any traced process."""
    if _closed(gate):
        try:        # a failure is said by ``_OnTorch``, at the import that needs the hooks
            _hooks(here).preload(lambda: not _closed(gate))
        except Exception:  # noqa: BLE001
            pass
    _wait_at_gate(gate)


def _boot() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    gate = os.environ.pop(_GATE, None)
    if gate is not None:
        _started_early(here, gate)      # sets DISTVIZ_TRACE, or ends the interpreter
    if os.environ.get("DISTVIZ_TRACE"):
        sys.meta_path.insert(0, _OnTorch(here))
    try:
        _chain(here)
    except Exception as exc:  # noqa: BLE001
        print(f"distviz: the shadowed sitecustomize failed: {type(exc).__name__}: {exc}",
              file=sys.stderr, flush=True)


_boot()
