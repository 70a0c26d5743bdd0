"""Analyses built on the replay engine (pure): they read a trace and the engine's replay, never
the judge (``distviz.judge``), and the engine (``distviz.replay``) never reads them.

* ``timing.analyze(trace) -> Timing``: where the real backward spent its time.
* ``whatif.predict(trace, WhatIf) -> Prediction``: the replay's schedule timed with a changed
  network or slower workers (``changes``: what a what-if changes).
* ``why.why(trace, name) -> Why``: why a leaf gets a gradient or not.
* ``contexts.shared_workers(...)``: several contexts on one worker's engine thread.

Kept import-cheap: nothing is imported here.
"""
