"""``distviz trace``: record, check and explain the user's own, unchanged RPC program.

In data-flow order:

* ``launch`` and ``command`` (torch-free): the parent. Runs the command with ``boot/`` first on
  ``PYTHONPATH`` and the settings (``config``) in ``DISTVIZ_TRACE``, a Python program started
  early, behind a gate, while the command line is read (``launch``); stops the program on a
  hang, Ctrl-C or SIGTERM; leaves no process behind.
* ``boot/sitecustomize.py`` and ``inject`` (torch-free): loaded by every Python process of the
  program; arm ``patches`` for when the program imports torch.
* ``patches``, ``callsites``, ``naming``, ``observe`` (torch side, inside the program): call
  sites of RPCs, leaf names from ``named_parameters()``, and, at each selected
  ``dist_autograd.backward``, the recorded graph (``assemble``), the replay's prediction, the
  observed real backward, the trace file and its summary row (``journal``). Rounds to every
  worker go from a side thread (``fanout``); ``slots`` counts ``--max-contexts`` over the
  processes, ``live`` prints as things happen, ``stop`` stops the program on a hang.
  ``local_backward`` explains a local backward inside a context, and names the parameters whose
  ``.grad`` a local backward nested in a distributed one wrote (checkpointing).
* ``snapshot_listener``, ``snapshot_take`` (inside the program) and ``snapshot`` (torch-free):
  ``distviz snapshot DIR`` of a running job, each process's live contexts, their graphs so
  far and its threads' stacks, answered from a thread of its own.
* ``report``, ``legality``, ``summary`` (pure): the verdict on each context, the FAST-mode
  rules an observed order must obey, ``index.json`` and the summary table.
"""
