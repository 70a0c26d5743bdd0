"""The judge: a replay against what PyTorch did, and the policy of a run that is judged (pure).

Imports go one way: the judge reads the engine (``distviz.replay``) and the analyses built on it
(``distviz.analyses``); neither reads the judge. Renderers and commands read its values.

* ``verdict.judge(trace, replay, watched=None) -> Verdict``: the one verdict, check by check,
  every command, the ``trace`` summary, the pytest plugin and the fuzz read.
* ``agreement.compare(trace, replay) -> Agreement``: the comparisons the verdict calls.
* ``legality.check(trace)``: an observed order against FAST mode's rules.
* ``opaque.python_behind(trace, ids)``: what a Python backward the replay cannot see feeds.
* ``watched``: how a watched backward ended, and what the judge says of it.
* ``analysis.analysis(trace, mode) -> Analysis``: one run's replay, verdict and timing, made once
  for every renderer.
* ``policy.run_and_judge(scenario, options, mode)``: a scenario run on real workers and judged
  (whether to run PyTorch's real backward, the recording, every context's verdict).

Kept import-cheap: nothing is imported here, so a module that needs one part loads that part.
"""
