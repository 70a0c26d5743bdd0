"""The bootstrap of ``distviz trace`` (torch-free).

``distviz trace`` puts this folder first on ``PYTHONPATH``, so Python imports this module at
start-up in every process the traced command starts: the command itself, processes made by
``torch.multiprocessing.spawn`` or ``subprocess``, ``torchrun``'s workers (forked processes
inherit what their parent loaded). When ``DISTVIZ_TRACE`` is set it installs distviz's hooks
(``distviz.tracing.inject``: nothing is patched before the program imports torch), then it runs
the ``sitecustomize`` module it shadows, if there is one further on ``sys.path``. It never stops
the program: a problem here is one line on stderr.
"""

import os
import sys


def _chain(here: str) -> None:
    """Run the next ``sitecustomize.py`` on ``sys.path`` (the one this module shadows)."""
    import importlib.util

    for entry in sys.path:
        folder = os.path.abspath(entry or os.getcwd())
        candidate = os.path.join(folder, "sitecustomize.py")
        if folder == here or not os.path.isfile(candidate):
            continue
        spec = importlib.util.spec_from_file_location("_distviz_shadowed_sitecustomize",
                                                      candidate)
        if spec is not None and spec.loader is not None:
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        return


def _boot() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    if os.environ.get("DISTVIZ_TRACE"):
        try:
            try:
                from distviz.tracing import inject
            except ImportError:   # the program's Python does not have distviz installed
                sys.path.append(os.path.dirname(os.path.dirname(os.path.dirname(here))))
                from distviz.tracing import inject
            inject.install()
        except Exception as exc:  # noqa: BLE001 - the program must run even if distviz cannot
            print(f"distviz: hooks not installed in process {os.getpid()}: "
                  f"{type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
    try:
        _chain(here)
    except Exception as exc:  # noqa: BLE001
        print(f"distviz: the shadowed sitecustomize failed: {type(exc).__name__}: {exc}",
              file=sys.stderr, flush=True)


_boot()
