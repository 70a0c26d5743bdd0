"""Scenario files: YAML and restricted program text, validated and instrumented into a ``Scenario``.

Pure; nothing here executes user text: every program is parsed and checked against a
whitelist before anything runs, and every problem is one line naming file, line and key.
"""

from __future__ import annotations

from distviz.limits import MAX_WORKERS
from distviz.scenario.loader import load_scenario, load_scenario_text
from distviz.scenario.scenario import PassSpec, Program, Scenario

__all__ = ["MAX_WORKERS", "PassSpec", "Program", "Scenario", "load_scenario", "load_scenario_text"]
