"""T1's fixed cost in parts: what ``distviz trace --contexts none`` adds to a program once,
whatever its length, each part measured where a shared machine's noise cannot hide it.

    python bench/bench_trace_fixed.py [--repeat 15] [--plain-s S] [--on-path K] [--json]

A whole run of the RNN program (``bench_trace_cmd.py``) varies by 5 to 15 % from one run to the
next on a shared 2-core machine, more than the 2 % to be resolved; these runs are short and
many, alternating plain and traced:

* ``parent_start_ms``, ``parent_end_ms``: ``distviz trace``'s own process, at the start (the
  launch to the program's first line) and at the end (the program's last line to distviz's
  exit), traced minus plain, over a Python program that loads nothing (``python -c``) and
  sleeps ``RUN_S`` between the two. The start includes that program's bootstrap of distviz's
  hooks (the ``sitecustomize``, which arms an import hook for torch), and, where the program
  is started early (``distviz.tracing.launcher.launch``), only what of the two start-ups does not
  overlap.
* ``process_import_ms``: what the hooks add to each traced Python process that imports torch:
  the self times (``python -X importtime``) of the modules that a traced ``import torch,
  torch.distributed.rpc, torch.distributed.autograd`` loads and the plain one does not, under
  ``--contexts none`` (every backward watched: the recording machinery is not loaded).

With ``--plain-s`` (a plain run's wall time) and ``--on-path K`` (how many of the program's
processes start one after another: the RNN program's launcher, then its two workers side by
side on two cores, is 2), ``fixed_ratio`` is ``1 + (start + end + K * import) / plain``, the
whole-run ratio less the cost per step (``bench_trace_cmd.py --step-cost``).

distviz is byte-compiled first, as ``bench_trace_cmd.py`` does.
"""

from __future__ import annotations

import argparse
import compileall
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import REPO, emit

TORCH = "import torch, torch.distributed.rpc, torch.distributed.autograd"
#: A program that prints the wall clock at its first and last lines (on stderr), ``RUN_S``
#: apart: as long as the parent's imports for the end (which it makes while the program runs,
#: on the other core, as a torch program's import of torch takes a second and more) need, so
#: that the end measured is the end's own.
RUN_S = 0.3
STAMPS = ("import sys, time; print(time.time(), file=sys.stderr, flush=True); "
          f"time.sleep({RUN_S}); print(time.time(), file=sys.stderr, flush=True)")


def _traced(out: Path, program: list[str]) -> list[str]:
    return [sys.executable, "-m", "distviz", "trace", "-o", str(out), "--contexts", "none",
            "--", *program]


def _stamped(argv: list[str]) -> tuple[float, float]:
    """``(launch -> first line, last line -> exit)`` in seconds for ``argv``, a ``STAMPS``
    program, traced or not."""
    t0 = time.time()
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120,
                          check=True)
    t1 = time.time()
    first, last = (float(x) for x in proc.stderr.split()[-2:])
    return first - t0, t1 - last


def _self_times(stderr: str) -> dict[str, int]:
    """Module -> self import time in microseconds, from ``-X importtime``'s lines."""
    out: dict[str, int] = {}
    for line in stderr.splitlines():
        if line.startswith("import time:") and "self [us]" not in line:
            own, _cumulative, name = line[len("import time:"):].split("|")
            out[name.strip()] = int(own)
    return out


def _imports(out: Path, traced: bool) -> dict[str, int]:
    """The self import times of a plain or traced process that imports torch's RPC."""
    argv = [sys.executable, "-X", "importtime", "-c", TORCH]
    proc = subprocess.run(_traced(out, argv) if traced else argv, cwd=REPO,
                          capture_output=True, text=True, timeout=300, check=True)
    return _self_times(proc.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--plain-s", type=float, default=None,
                        help="A plain run's wall time, for fixed_ratio.")
    parser.add_argument("--on-path", type=int, default=2,
                        help="The program's processes that start one after another.")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    compileall.compile_dir(str(REPO / "distviz"), quiet=1)
    starts: dict[bool, list[float]] = {False: [], True: []}
    ends: dict[bool, list[float]] = {False: [], True: []}
    added: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-trace-fixed-") as tmp:
        out = Path(tmp) / "traces"
        plain_modules = set(_imports(out, traced=False))
        program = [sys.executable, "-c", STAMPS]
        for k in range(max(1, args.repeat)):
            for traced in ((False, True) if k % 2 == 0 else (True, False)):
                start, end = _stamped(_traced(out, program) if traced else program)
                starts[traced].append(start)
                ends[traced].append(end)
            got = _imports(out, traced=True)
            added.append(sum(v for m, v in got.items() if m not in plain_modules) / 1000)
    result: dict[str, Any] = {
        "parent_start_ms": round(1000 * (statistics.median(starts[True])
                                         - statistics.median(starts[False])), 1),
        "parent_end_ms": round(1000 * (statistics.median(ends[True])
                                       - statistics.median(ends[False])), 1),
        "process_import_ms": round(statistics.median(added), 1),
        "process_import_all_ms": [round(a, 1) for a in added],
    }
    fixed_s = (result["parent_start_ms"] + result["parent_end_ms"]
               + args.on_path * result["process_import_ms"]) / 1000
    result["fixed_s"] = round(fixed_s, 3)
    if args.plain_s:
        result["fixed_ratio"] = round(1 + fixed_s / args.plain_s, 4)
    emit(result, args.json)


if __name__ == "__main__":
    main()
