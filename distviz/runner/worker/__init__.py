"""One worker process of a run (torch side): ``main`` (its entry point), ``initiator`` (rank 0
of a plain run), ``session`` and ``training`` (the training form)."""
