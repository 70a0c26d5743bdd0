"""Scenario files: YAML + restricted program text -> a validated, instrumented ``Scenario``.

Pure: never imports torch. A scenario is YAML whose ``code``, ``main`` and per-worker ``init``
values are programs in a small subset of Python (see ``distviz.scenario.lang`` for the names it may use).
Every program is parsed with ``ast.parse`` and its syntax tree is checked against a whitelist
before anything runs; nothing here ever executes user text. Every problem is a
``ScenarioError`` whose one line names the file, the line in the YAML file and the key::

    scenarios/x.yaml:14 main: unknown worker 'wroker1' (did you mean 'worker1'?)

The package, in the order a file goes through it:

* ``yaml_reader``: YAML values with the line of every value and key;
* ``loader``: ``load_scenario`` / ``load_scenario_text``, the sections and the ``--set``
  overrides;
* ``checker`` (with ``rules`` and ``messages``): each program against the scenario language;
* ``instrument``: step ticks, guarded ``*`` and ``**``, source lines on RPC calls (for the
  runtime in ``distviz.runner.sandbox.base``);
* ``model``: the values, ``Scenario``, ``Program``, ``PassSpec``.

Line numbers in the instrumented trees are lines of the YAML file, so tracebacks and runtime
errors point into the scenario file (``compile(tree, filename=path)``).
"""

from __future__ import annotations

from distviz.limits import MAX_WORKERS
from distviz.scenario.loader import load_scenario, load_scenario_text
from distviz.scenario.model import PassSpec, Program, Scenario

__all__ = ["MAX_WORKERS", "PassSpec", "Program", "Scenario", "load_scenario", "load_scenario_text"]
