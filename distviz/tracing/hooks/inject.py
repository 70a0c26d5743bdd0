"""Install distviz's hooks in a traced process, lazily (torch-free).

Loaded by the bootstrap (``boot/sitecustomize.py``) when a traced process first imports
torch (the command ``distviz trace`` started early loads it at start-up, while it waits at its
gate). Its import hook (``finder``) applies the torch-side patches of
``distviz.tracing.hooks.patches`` right after torch's own ``__init__`` ran (which loads
``torch.distributed.rpc`` and ``torch.distributed.autograd`` with it) and before the program's
next line. A process that never imports torch does not load it.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

from distviz.tracing.config import TraceConfig
from distviz.tracing.hooks.after_import import AfterImport

if TYPE_CHECKING:  # pragma: no cover
    import importlib.abc

_WATCHED = "torch"
#: The class name of the bootstrap's own finder that waits for torch (``boot/sitecustomize.py``
#: spells it in its ``class`` line; it cannot import distviz to share it, a test checks both).
BOOT_FINDER = "_OnTorch"
#: The hooks' modules that do not import torch. A process started early imports them while its
#: gate is still closed (``preload``), so that they are not on its way once it imports torch.
PRELOAD = ("distviz.tracing.shared.journal", "distviz.tracing.shared.inflight", "distviz.tracing.watch.entry",
           "distviz.tracing.watch.hook", "distviz.tracing.shared.backward_stats",
           "distviz.tracing.snapshot.listener", "distviz.tracing.shared.fanout", "distviz.tracing.shared.live",
           "distviz.tracing.shared.slots")


class _AfterTorch(AfterImport):
    """``on_torch`` right after torch's own ``__init__`` ran."""

    def __init__(self, config: TraceConfig) -> None:
        super().__init__(_WATCHED)
        self.config = config

    def then(self, module: ModuleType) -> None:
        on_torch(self.config)


def on_torch(config: TraceConfig) -> None:
    """Apply the torch-side patches (torch is loaded); a failure is one line on stderr."""
    try:
        from distviz.tracing.hooks import patches
        patches.install(config)
    except Exception as exc:  # noqa: BLE001 - never break the program
        print(f"distviz: hooks not installed: {type(exc).__name__}: {exc}", file=sys.stderr,
              flush=True)


def preload(stop: Callable[[], bool]) -> None:
    """Import ``PRELOAD`` until ``stop()`` says to (a failure is left to the import that
    needs the module)."""
    for name in PRELOAD:
        if stop():
            return
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - raised again, where it matters, by the real import
            continue


def finder() -> _AfterTorch | None:
    """The import hook that patches torch once it is loaded, with the settings of
    ``DISTVIZ_TRACE`` (``None`` without them); the bootstrap hands it the process's first
    ``import torch``."""
    config = TraceConfig.from_env()
    return None if config is None else _AfterTorch(config)


def install() -> bool:
    """Arm the hooks for this process from ``DISTVIZ_TRACE``; returns whether it did."""
    hook = finder()
    if hook is None:
        return False
    if _WATCHED in sys.modules:     # torch already loaded (a fork of a torch process)
        on_torch(hook.config)
        return True
    sys.meta_path.insert(0, hook)
    return True


def reconfigure(config: TraceConfig) -> bool:
    """Give this process's hooks new settings (the pytest plugin: a test run never stops for
    a hang), whether they still wait for torch or are installed; returns whether there were
    any (``install`` arms them otherwise)."""
    found = False
    for k, hook in enumerate(sys.meta_path):
        if isinstance(hook, _AfterTorch):
            hook.config = config
            found = True
        elif type(hook).__name__ == BOOT_FINDER:   # the bootstrap's, still waiting for torch
            sys.meta_path[k] = _AfterTorch(config)
            found = True
    state = sys.modules.get("distviz.tracing.shared.process")
    proc = getattr(state, "PROCESS", None)
    if proc is not None:
        proc.config = config
        found = True
    return found
