"""The runner: a scenario -> real worker processes -> a trace (and its single-process reference).

By role, in the order a run goes:

* ``parent/`` (torch-free): the ``distviz run`` process. Starts the workers from a fork
  server, drives the phases with time limits, tears everything down (``parent.run``); ends a
  training run (``parent.training``) and collates its messages into a ``Recording``
  (``parent.collate``); checks the torch release before anything starts
  (``parent.torch_range``).
* ``protocol``, ``procs`` (torch-free), ``gradients``, ``observe_real``: shared. The typed
  messages between parent and workers, what every child process does first, gradients in the
  trace, and the one observer of PyTorch's real backward (also used by ``distviz trace``).
* ``worker/``: one worker process (``worker.main``), the initiator of a plain run
  (``worker.initiator``), the training form (``worker.session``, ``worker.training``).
* ``sandbox/``: what a scenario program runs against, in a worker and in the reference: the
  language's base names (``sandbox.base``), the training names (``sandbox.training_names``),
  the module namespace (``sandbox.namespace``), the ``rpc`` object (``sandbox.rpc_proxy``),
  and which worker made each ``nn.Module`` (``sandbox.modules``).
* ``reference/``: the single-process reference runs (``reference.plain``,
  ``reference.training``).

Imports go one way: ``parent`` -> ``worker`` -> ``reference`` -> ``sandbox``, each using the
shared modules; ``tests/pure/project/test_imports.py`` checks that no two packages import each other.
"""

#: The modules that never import torch (a package here stands for every module in it): the
#: parent forks the workers from a fork server that imports torch once, and the CLI checks the
#: torch release before anything imports it. ``tests/pure/project/test_imports.py`` holds them to it.
TORCH_FREE: tuple[str, ...] = ("distviz.runner.parent", "distviz.runner.procs",
                               "distviz.runner.protocol")

#: Modules that import torch only when they run, never when they are loaded: the worker's
#: entry point, which the parent names to the fork server.
TORCH_FREE_AT_LOAD: tuple[str, ...] = ("distviz.runner.worker.main",)
