"""The runner: a scenario on real worker processes, recorded into a trace, and its single-process reference run.

Torch side, apart from the parent process (``supervisor``), which forks workers from a fork
server. Imports go one way: ``supervisor`` -> ``worker`` -> ``reference`` -> ``sandbox``.
"""

#: The modules that never import torch (a package here stands for every module in it): the
#: parent forks the workers from a fork server that imports torch once, and the CLI checks the
#: torch release before anything imports it. ``tests/pure/project/test_imports.py`` holds them to it.
TORCH_FREE: tuple[str, ...] = ("distviz.runner.supervisor", "distviz.runner.procs",
                               "distviz.runner.protocol")

#: Modules that import torch only when they run, never when they are loaded: the worker's
#: entry point, which the parent names to the fork server.
TORCH_FREE_AT_LOAD: tuple[str, ...] = ("distviz.runner.worker.main",)
