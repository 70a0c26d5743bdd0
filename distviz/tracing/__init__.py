"""``distviz trace``: record, check and explain the user's own, unchanged RPC program.

A room per job, in data-flow order:

* ``parent`` (torch-free): ``launch`` and ``command`` run the command with ``boot/`` first on
  ``PYTHONPATH`` and the settings (``config``) in ``DISTVIZ_TRACE``, a Python program started
  early, behind a gate, while the command line is read; stop the program on a hang, Ctrl-C or
  SIGTERM; leave no process behind. ``summary`` prints ``index.json`` and the summary table.
* ``boot/sitecustomize.py`` and ``hooks.inject`` (torch-free): loaded by every Python process of
  the program; arm ``hooks.patches`` for when the program imports torch.
* ``hooks`` (torch side, inside the program): the patches, ``dispatch`` (where each
  ``dist_autograd.backward`` goes), ``local_backward`` (a local backward inside a context, and
  the parameters whose ``.grad`` a local backward nested in a distributed one wrote).
* ``callsites``: the call sites of the program's RPCs, a module per job (the wrappers, the calls
  kept per context, the threads' stacks, message ids, labels, the program's source).
* ``shared``: the journal, the in-flight table, ``slots`` (``--max-contexts`` over the
  processes), and inside the program its state (``process``), the side thread's rounds to every
  worker (``fanout``), ``live`` output, ``stop`` on a hang, leaf names (``naming``).
* ``recording``: a context recorded in full: the graph (``assemble``), the replay's
  prediction, the observed real backward, the trace file and its summary row (``capture``, the
  one capture pipeline, which the watch and the snapshot use too), the verdict in words
  (``report``).
* ``watch``: every backward not recorded in full, with a deadline, recorded late when it passes.
* ``snapshot``: ``distviz snapshot DIR`` of a running job, each process's live contexts, their
  graphs so far and its threads' stacks, answered from a thread of its own.
"""
