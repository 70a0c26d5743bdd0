"""P1: PyTorch's own RPC and dist autograd test classes, plain and under distviz's plugin.

    python bench/bench_pytorch_tests.py [--suite dist_autograd|rpc] [--how both|plain|traced]
                                        [-k EXPR] [--timeout SECONDS] [--keep DIR] [--reuse]
                                        [--json] [CLASS | CLASS::TEST ...]

Runs ``bench/pytorch_tests/suite_dist_autograd.py`` (``DistAutogradTest``,
``DistOptimizerTest``, ``TensorPipeAgentDistAutogradTest`` on the TensorPipe agent and
``FaultyAgentDistAutogradTest`` on the faulty agent, 100 tests) or, with ``--suite rpc``,
``suite_rpc.py`` (every RPC test class PyTorch ships: ``GENERIC_TESTS`` and
``TENSORPIPE_TESTS`` on the TensorPipe agent, ``FAULTY_AGENT_TESTS`` on the faulty agent, 464
tests), from the torch wheel, CPU only, twice: ``pytest`` and ``pytest --distviz=DIR`` with
default options, each with junit XML, then compares them test by test and prints the table of
``bench/README.md``: tests whose result changes (target 0), contexts recorded, agree, hang
predicted (and seen), error, not compared (each reason counted), differs (target 0), the tests
that call backward from TorchScript (counted by the plugin, not recorded), and the wall time
traced over plain (pytest's own seconds per test, summed over the tests run both ways).
``--how plain`` or ``traced`` runs one side now and reads the other from ``--keep DIR``
(``--reuse``: both). ``-k`` selects tests as pytest's does, and ``CLASS`` or ``CLASS::TEST``
arguments name them (``TensorPipeDistAutogradTest::test_backward_simple``); the 100 take about
30 minutes on an idle 2-core machine, the 464 some hours.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

from common import BENCH, REPO, emit

SUITE = BENCH / "pytorch_tests"


def outcomes(junit: Path) -> dict[str, str]:
    """``{classname::name: passed|failure|error|skipped}`` from a junit XML file."""
    out: dict[str, str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        kinds = [c.tag for c in case if c.tag in ("failure", "error", "skipped")]
        out[f"{case.get('classname')}::{case.get('name')}"] = kinds[0] if kinds else "passed"
    return out


def run_pytest(work: Path, how: str, select: str | None, timeout: float | None,
               tests: list[str] | None = None, suite: str = "dist_autograd"
               ) -> tuple[float, int]:
    """One pytest run of ``suite_<suite>.py`` (or of its ``tests``, ``CLASS`` or
    ``CLASS::TEST``); returns ``(wall seconds, exit status)``; its output goes to
    ``work/<how>.log``."""
    module = f"suite_{suite}.py"
    targets = [f"{module}::{t}" for t in tests or []] or [module]
    argv = [sys.executable, "-m", "pytest", *targets, "-p", "no:cacheprovider",
            f"--junitxml={work / (how + '.xml')}", "-rA"]
    if select:
        argv += ["-k", select]
    if how == "traced":
        argv.append(f"--distviz={work / 'traces'}")
    path = [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = dict(os.environ, TP_SOCKET_IFNAME="lo", GLOO_SOCKET_IFNAME="lo", NO_COLOR="1",
               PYTHONPATH=os.pathsep.join(path))
    t0 = time.perf_counter()
    with open(work / f"{how}.log", "w", encoding="utf-8") as log:
        proc = subprocess.run(argv, cwd=SUITE, env=env, stdout=log, stderr=subprocess.STDOUT,
                              timeout=timeout, check=False)
    return time.perf_counter() - t0, proc.returncode


def table(plain: dict[str, str], traced: dict[str, str], index: dict[str, Any],
          walls: tuple[float, float], codes: tuple[int, int]) -> dict[str, Any]:
    """The comparison as one flat object (the rows of the README's table)."""
    from distviz.tracing.pytest_plugin import category
    from distviz.tracing.shared.journal import ContextRow

    rows = [ContextRow.from_json({**c, "index": c["context"]}) for c in index.get("contexts", [])]
    counts = Counter(category(r) for r in rows)
    reasons = Counter(r.agreement_text for r in rows if category(r) == "not compared")
    both = plain.keys() & traced.keys()     # a run stopped early has run only some
    changed = sorted(t for t in both if plain[t] != traced[t])
    unnamed = sum(1 for r in rows if not r.test)
    return {
        "tests": len(both), "passed_plain": sum(plain[t] == "passed" for t in both),
        "skipped_plain": sum(plain[t] == "skipped" for t in both),
        "run_one_way_only": len(plain.keys() ^ traced.keys()),
        "failed_plain": sorted(t for t in both if plain[t] in ("failure", "error")),
        "results_changed": len(changed), "changed": changed,
        "exit_plain": codes[0], "exit_traced": codes[1],
        "tests_with_contexts": len({r.test for r in rows}),
        "contexts": len(rows), "contexts_without_test": unnamed,
        **{k.replace(" ", "_"): counts[k] for k in
           ("agrees", "hang predicted and seen", "hang predicted", "error", "unfinished",
            "not compared", "differs")},
        "not_compared_reasons": dict(reasons),
        "differs_tests": sorted({str(r.test) for r in rows if category(r) == "differs"}),
        "wall_plain_s": round(walls[0], 1), "wall_traced_s": round(walls[1], 1),
        "traced_over_plain": round(walls[1] / walls[0], 3) if walls[0] else None,
    }


_SCRIPTED = re.compile(r"^  note: \S+: (\d+) backward calls? from TorchScript, not recorded")


def scripted(log: Path) -> dict[str, int]:
    """``{test: backward calls from TorchScript}`` from the plugin's summary in a traced log."""
    out: dict[str, int] = {}
    test = None
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.startswith(" ") and "::" in line and ": " in line:
            test = line.split(": ", 1)[0]
        found = _SCRIPTED.match(line)
        if found and test:
            out[test] = out.get(test, 0) + int(found.group(1))
    return out


def seconds(junit: Path) -> dict[str, float]:
    """``{classname::name: pytest's own seconds}`` from a junit XML file."""
    return {f"{case.get('classname')}::{case.get('name')}": float(case.get("time") or 0.0)
            for case in ET.parse(junit).getroot().iter("testcase")}


def _kept(work: Path, how: str) -> int:
    """The exit status of a kept run (from its junit XML)."""
    suite = next(ET.parse(work / f"{how}.xml").getroot().iter("testsuite"))
    bad = int(suite.get("failures") or 0) + int(suite.get("errors") or 0)
    return 1 if bad else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", dest="select", default=None, help="pytest -k expression")
    parser.add_argument("--suite", choices=("dist_autograd", "rpc"), default="dist_autograd",
                        help="pytorch_tests/suite_SUITE.py (rpc: every RPC test class)")
    parser.add_argument("--how", choices=("both", "plain", "traced"), default="both",
                        help="run only one side now (the other is read from --keep DIR)")
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds per pytest run (default: none; a run killed by it leaves "
                             "no junit XML)")
    parser.add_argument("--keep", type=Path, default=None, help="keep logs, XML, traces here")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--reuse", action="store_true",
                        help="read the runs kept in --keep DIR again")
    parser.add_argument("tests", nargs="*", help="CLASS or CLASS::TEST (default: every test)")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-pytorch-tests-"))
    work.mkdir(parents=True, exist_ok=True)
    codes = {}
    for how in ("plain", "traced"):
        if not args.reuse and args.how in ("both", how):
            codes[how] = run_pytest(work, how, args.select, args.timeout, args.tests,
                                    args.suite)[1]
    if not (work / "traced.xml").exists() or not (work / "plain.xml").exists():
        done = "plain" if (work / "plain.xml").exists() else "traced"
        emit({"work": str(work), done: dict(Counter(outcomes(work / f"{done}.xml").values()))},
             args.json)
        return
    for how in ("plain", "traced"):
        codes.setdefault(how, _kept(work, how))
    index_file = work / "traces" / "index.json"
    index = json.loads(index_file.read_text()) if index_file.exists() else {}
    plain, traced = seconds(work / "plain.xml"), seconds(work / "traced.xml")
    both = plain.keys() & traced.keys()
    walls = (sum(plain[t] for t in both), sum(traced[t] for t in both))
    result = table(outcomes(work / "plain.xml"), outcomes(work / "traced.xml"), index,
                   walls, (codes["plain"], codes["traced"]))
    found = scripted(work / "traced.log") if (work / "traced.log").exists() else {}
    result["torchscript_backward_calls"] = sum(found.values())
    result["torchscript_backward_tests"] = sorted(found)
    result["work"] = str(work)
    emit(result, args.json)


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
