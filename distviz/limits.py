"""Limits, time-outs and exit codes, in one place (pure: never imports torch).

Every side reads them from here: the scenario checker (file size, nesting, workers), the
run-time guards in the workers (tensor size, step budget), the parent's time limits, the exit
status of a worker, and the CLI's exit codes (``ExitCode``, from which the table of
docs/reference/exit-codes.md is generated). The CLI's option defaults are these values, so
``--help`` shows them.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum
from typing import Final

from distviz.words import plural

# -- scenario files (checked before anything runs) -------------------------------------------------

#: Largest scenario file read, in bytes.
MAX_FILE_BYTES: Final = 1_000_000
#: Deepest nesting of YAML lists and mappings accepted.
MAX_YAML_DEPTH: Final = 32
#: Most workers a scenario may declare (each one is a process).
MAX_WORKERS: Final = 32
#: Most problems of one scenario file printed (``distviz check``); the rest are counted.
MAX_PROBLEMS_SHOWN: Final = 20
#: Most steps the step log of ``distviz replay`` and ``distviz run`` prints when no ``--from`` or
#: ``--to`` is given: the first and last halves of it, and how many steps are left out between.
LOG_STEPS_SHOWN: Final = 4_000

# -- what a scenario program may do at run time (per worker) ---------------------------------------

#: Default cap on the elements one tensor-creation call may allocate (``--max-numel``).
DEFAULT_MAX_NUMEL: Final = 50_000_000
#: Default step budget: loop steps, function calls and comprehension steps (``--max-steps``).
DEFAULT_MAX_STEPS: Final = 1_000_000
#: Largest string, list or tuple that ``*`` may build, in items.
MAX_SEQUENCE_LEN: Final = 10_000_000
#: Largest integer that ``**`` may build, in bits.
MAX_INT_BITS: Final = 100_000
#: Default limit on how deep RPC calls made by scenario functions may nest (``--max-rpc-depth``):
#: ``main`` calling ``f`` over RPC is depth 1, ``f`` calling ``g`` over RPC depth 2. Each nested
#: call holds an RPC thread on its worker until it returns, so a recursion across workers
#: would otherwise take every thread and hang (no worker's step budget ever trips).
DEFAULT_MAX_RPC_DEPTH: Final = 10
#: RPC threads a worker has beyond the deepest nesting allowed: one chain nested to the limit on
#: a single worker still leaves threads to answer other calls and deliver the results.
RPC_SPARE_THREADS: Final = 6

#: Default memory limit of one worker, in bytes (``--max-memory``): the private writable
#: memory of the process (``RLIMIT_DATA``: heap, tensors, thread stacks). An idle worker
#: with torch and RPC up uses about 0.55 GiB of it, the 15,000-node pipeline about 0.6 GiB.
DEFAULT_MAX_MEMORY: Final = 4 * 2**30
#: The smallest ``--max-memory`` accepted: torch, RPC and their threads need about 0.55 GiB.
MIN_MAX_MEMORY: Final = 2**30

# -- time limits, in seconds -------------------------------------------------------------------------

#: Start-up: forking the workers, importing, each worker's ``init``, the rendezvous.
STARTUP_TIMEOUT: Final = 90.0
#: The forward pass (``main``), from the moment every worker is ready (``--timeout``).
FORWARD_TIMEOUT: Final = 300.0
#: How long one real backward pass may take before it counts as hung (``--hang-timeout``).
HANG_TIMEOUT: Final = 5.0
#: Time given to the backward phase beyond the hang time-outs and one RPC time-out (collecting
#: the observed events, the reference run).
BACKWARD_SLACK: Final = 120.0
#: A clean shutdown of every worker after the results are in.
SHUTDOWN_TIMEOUT: Final = 20.0
#: Default time-out of every RPC (``TensorPipeRpcBackendOptions.rpc_timeout``).
RPC_TIMEOUT: Final = 60.0
#: Installing hooks on every worker before the real backward.
HOOKS_TIMEOUT: Final = 30.0
#: Collecting the observed events and gradients from every worker after it.
COLLECT_TIMEOUT: Final = 10.0
#: Waiting for a traced process's writer thread to finish the traces and rows it was given
#: (before RPC shuts down, before the pytest plugin reads the rows, at exit).
WRITE_SETTLE_TIMEOUT: Final = 30.0
#: Recording waits at most this long for the forward pass's messages still on their way (sent,
#: not yet read by their receiver: an ``rpc.remote`` or ``rpc_async`` nobody waited for).
RECORD_SETTLE_TIMEOUT: Final = 5.0
#: How long the watch's recording of a backward past its deadline waits for each worker's part
#: of the graph (an RPC that takes milliseconds): a worker that has not answered by then is
#: named as not answering (stopped, overloaded, or its RPC threads all busy), well before the
#: program's own RPC time-out.
LATE_RECORD_TIMEOUT: Final = 5.0
#: RPC threads per worker at least (``TensorPipeRpcBackendOptions.num_worker_threads``); more
#: when ``--max-rpc-depth`` needs them (``rpc_threads``).
RPC_THREADS: Final = 16

# -- distviz fuzz -----------------------------------------------------------------------------------

#: How long a fuzz program's real backward may take before it counts as hung: generated graphs
#: are tiny (a backward takes milliseconds), and every predicted hang waits this long.
FUZZ_HANG_TIMEOUT: Final = 2.0
#: Start-up and forward-pass limits for one fuzz program.
FUZZ_RUN_TIMEOUT: Final = 60.0
#: Runs the shrinker may spend on one disagreement (``--max-shrink-tries``).
FUZZ_MAX_SHRINK_TRIES: Final = 80
#: Workers per generated program (``--workers``), and the deepest chain of nested RPCs.
FUZZ_MIN_WORKERS: Final = 2
FUZZ_MAX_WORKERS: Final = 6
FUZZ_MAX_DEPTH: Final = 3

# -- distviz trace (your own program) ----------------------------------------------------------------

#: How long a traced program's real backward may take before it counts as hung (``--hang-timeout``).
TRACE_HANG_TIMEOUT: Final = 30.0
#: After Ctrl-C or SIGTERM, how long the program may take to end before it is killed.
TRACE_INTERRUPT_GRACE: Final = 5.0
#: After a hang stops the program (SIGTERM to its processes), before SIGKILL.
TRACE_STOP_GRACE: Final = 2.0
#: After the command ends, how long its helper processes may take to leave by themselves.
TRACE_SETTLE: Final = 2.0
#: Backward passes recorded per context: each later pass replays all the earlier ones again, so
#: a loop of a thousand ``retain_graph`` passes would cost quadratic time; the rest run unrecorded.
TRACE_MAX_PASSES: Final = 100
#: Traces one traced process writes (one pytest test, under the plugin) for watched backwards
#: that were slow or raised; a hang is always written. A job whose backward raises or runs past
#: ``--hang-timeout`` at every step would otherwise write a file per step: the rest are counted
#: (every backward is, in the summary), not written. A context whose backward raises again (a
#: ``retain_graph`` loop) is written once.
TRACE_WATCHED_WRITES: Final = 5
#: Contexts a traced process remembers the number of (for a later pass in the same context):
#: the most recent ones, so that a job of a million steps holds no more than this many.
TRACE_RECENT_CONTEXTS: Final = 1024
#: Autograd nodes a traced process walks to explain a local backward inside a distributed
#: context (``distviz.tracing.hooks.local_explain``): the walk stops there and says so.
TRACE_LOCAL_WALK: Final = 50_000
#: How many recent dist autograd contexts of a traced process a local optimizer's step reads
#: the gradients of (``distviz.tracing.hooks.applied``).
APPLIED_CONTEXTS: Final = 8
#: Cuts of a parameter's path one traced process notes and logs (``distviz.tracing.hooks.cut_watch``:
#: each kind, line and set of parameters once); later ones are not noted.
CUTS_KEPT: Final = 64
#: Autograd nodes walked from a cut tensor to the parameters it came from.
CUT_WALK: Final = 10_000
#: Contexts whose parameters used with grad enabled a process keeps (to tell a harmless cut).
CUT_CONTEXTS_KEPT: Final = 64
#: On a callee, the first contexts of each initiator whose RPCs are watched for cuts (besides
#: those ``--contexts`` selects by number): a callee cannot tell which ones are recorded.
CUT_CALLEE_CONTEXTS: Final = 2
#: A process's own contexts watched for cuts, the first ones: under ``--contexts all`` every
#: context is recorded, but a program's mistake is the same in each step, and the watch sees
#: every torch function the thread calls (its cost per step is that of the first steps only).
CUT_WATCHED_CONTEXTS: Final = 4
#: Results of RPCs made outside any context kept (weakly) to tell their use inside one.
CUT_OUTSIDE_KEPT: Final = 64

# -- distviz snapshot (a running traced job) ---------------------------------------------------------

#: How long ``distviz snapshot`` waits for each process of the job to answer; one that has not
#: answered by then is named as such, and the others are still reported.
SNAPSHOT_TIMEOUT: Final = 30.0
#: How long a process spends recording the graphs of its contexts for a snapshot, all of them
#: (over the program's RPC agent; a worker whose RPC threads are all stuck never answers); the
#: stacks are sent without the graphs not recorded by then.
SNAPSHOT_GRAPH_TIMEOUT: Final = 10.0

# -- pictures -------------------------------------------------------------------------------------------

#: The largest picture the default view draws, in pixels on a side at 100 % zoom (96 dpi): a
#: larger one is not something a person reads (its text, 10 pt, would stay readable only by
#: scrolling across many screens), and a bitmap much larger than this would be shrunk by Graphviz.
PICTURE_MAX_PX: Final = 10_000
#: The most boxes a default picture lays out to see whether it is readable; more never are.
PICTURE_MAX_BOXES: Final = 600
#: Bitmaps Graphviz's cairo renderer draws without shrinking them, in pixels on a side.
BITMAP_MAX_PX: Final = 32_767

# -- the torch releases distviz supports ---------------------------------------------------------

#: The oldest torch release (major, minor) distviz supports: it reads PyTorch's internal graph
#: (node hooks, ``_current_graph_task_id``, a context's send and recv functions), which every
#: release from this one on has (``tests/torch_matrix.sh`` checks one version; docs/torch-versions.md).
TORCH_OLDEST: Final = (2, 4)
#: The newest torch release (major, minor) distviz supports; ``pyproject.toml`` says ``<2.16``.
TORCH_NEWEST: Final = (2, 15)
#: Set to ``1``, distviz runs with a torch outside that range instead of refusing to start.
TORCH_ANY_ENV: Final = "DISTVIZ_ANY_TORCH"

# -- exit status of a worker process ----------------------------------------------------------------

class WorkerStatus(IntEnum):
    """How a worker process of ``distviz run`` ends by itself: the status the parent reads from
    it (never the command's: no value is an ``ExitCode``'s, ``tests/pure/cli/test_limits.py``
    checks)."""

    #: The process did its work and ended (success, as for any process).
    DONE = 0
    #: ``crash_backward`` ended the worker in the backward pass (the trace's ``real.deaths``).
    CRASHED = 17
    #: The worker reported an error to the parent and ended.
    REPORTED_ERROR = 18
    #: The parent is gone (the worker's lifeline pipe closed).
    PARENT_GONE = 19

# -- exit codes of the distviz command ---------------------------------------------------------------

class ExitCode(IntEnum):
    """The distviz command's exit codes, each with its meaning (the table of
    docs/reference/exit-codes.md is generated from them) and, for a verdict's code, its
    ``severity`` (higher is more severe; ``None``: not a verdict's code). A recording's,
    ``distviz trace``'s and a training run's code is the most severe of its contexts'
    (``most_severe``)."""

    meaning: str
    severity: int | None

    def __new__(cls, value: int, meaning: str, severity: int | None = None) -> ExitCode:
        member = int.__new__(cls, value)
        member._value_ = value
        member.meaning = meaning
        member.severity = severity
        return member

    @classmethod
    def of(cls, value: int) -> ExitCode:
        """The member whose value is ``value`` (``ValueError`` for none): Enum's lookup by
        value, which mypy reads as a call of ``__new__``."""
        return cls(value)  # type: ignore[call-arg]

    OK = (0, "the run (or replay) completed and, where PyTorch ran, the replay agrees with it",
          0)
    BAD_INPUT = 2, "bad input: scenario, trace file or options; nothing was run"
    RUN_FAILED = (3, "the run failed: an op raised in the forward pass, a worker died, or a "
                     "worker hit its memory limit or the RPC nesting limit")
    TIMEOUT = 4, "start-up or the forward pass took longer than its time limit"
    RENDER = 5, "a picture could not be made (Graphviz missing, crashed or timed out)"
    HANG = 6, "the FAST-mode backward hangs (predicted by the replay, or observed)", 3
    BACKWARD_ERROR = (7, "the backward pass raised (fail_backward, crash_backward, second pass)",
                      2)
    DISAGREE = (8, "the replay and PyTorch's real backward disagree (an order difference "
                   "counts only with one inter-op thread; `distviz fuzz`: any program disagrees)",
                1)
    #: ``distviz trace --strict``: the program succeeded, but a gradient went wrong.
    GRADIENT = (9, "distviz trace --strict: the program succeeded and the replay agrees, but a "
                   "parameter got no gradient, an all-zero one, one left in .grad, or one a "
                   "local optimizer never applied (the notes name it)")
    NOT_EXECUTABLE = 126, "distviz trace: the command exists but is not executable"
    NOT_FOUND = 127, "distviz trace: the command was not found"
    #: A bug in distviz (sysexits' EX_SOFTWARE): apart from 1, which under ``distviz trace`` is
    #: the traced program's own status.
    INTERNAL = (70, "a bug in distviz (EX_SOFTWARE; please report it with the trace file); "
                    "never the status of a traced program, which `distviz trace` passes on")
    INTERRUPTED = 130, "interrupted by Ctrl-C; every worker was stopped"
    #: ``distviz trace`` got SIGTERM (128 + 15, as a shell reports it).
    TERMINATED = 143, "distviz trace got SIGTERM and passed it on; every worker was stopped"


EXIT_OK: Final = ExitCode.OK
EXIT_INTERNAL: Final = ExitCode.INTERNAL
EXIT_BAD_INPUT: Final = ExitCode.BAD_INPUT
EXIT_RUN_FAILED: Final = ExitCode.RUN_FAILED
EXIT_TIMEOUT: Final = ExitCode.TIMEOUT
EXIT_RENDER: Final = ExitCode.RENDER
EXIT_HANG: Final = ExitCode.HANG
EXIT_BACKWARD_ERROR: Final = ExitCode.BACKWARD_ERROR
EXIT_DISAGREE: Final = ExitCode.DISAGREE
EXIT_GRADIENT: Final = ExitCode.GRADIENT
EXIT_NOT_EXECUTABLE: Final = ExitCode.NOT_EXECUTABLE
EXIT_NOT_FOUND: Final = ExitCode.NOT_FOUND
EXIT_INTERRUPTED: Final = ExitCode.INTERRUPTED
EXIT_TERMINATED: Final = ExitCode.TERMINATED

#: Python's own status for ``sys.exit("message")``: a traced program's, passed on (never one of
#: distviz's: see ``ExitCode.INTERNAL``).
PYTHON_EXIT_MESSAGE: Final = 1

#: Every code's meaning, as docs/reference/exit-codes.md's table says it (``ExitCode.meaning``).
EXIT_CODES: Final[dict[int, str]] = {int(c): c.meaning for c in ExitCode}

#: Verdicts' exit codes from the least to the most severe (``ExitCode.severity``).
SEVERITY: Final = tuple(sorted((c for c in ExitCode if c.severity is not None),
                               key=lambda c: c.severity or 0))


def most_severe(codes: Iterable[ExitCode]) -> ExitCode:
    """The most severe of verdicts' exit codes (``ExitCode.severity``; ``EXIT_OK`` for none)."""
    return max(codes, key=SEVERITY.index, default=EXIT_OK)


def rpc_threads(max_rpc_depth: int) -> int:
    """RPC threads per worker for a nesting limit of ``max_rpc_depth``."""
    return max(RPC_THREADS, max_rpc_depth + RPC_SPARE_THREADS)


_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_size(text: str) -> int:
    """Bytes in ``512M``, ``4G``, ``1.5GiB``, ``4gb`` or ``1073741824`` (units are binary).

    Raises ``ValueError`` with the expected form.
    """
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    unit = t[-1] if t and t[-1] in "KMGT" else ""
    number = t[: len(t) - len(unit)].strip()
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"expected a size like 4G, 512M or 1.5GiB, found {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise ValueError(f"expected a positive size like 4G, found {text!r}")
    return int(value * _UNITS[unit])


def format_size(n: int) -> str:
    """``4 GiB``, ``1.5 GiB``, ``512 MiB``, ``100 bytes``."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f}".removesuffix(".0") + f" {unit}"
    return plural(n, "byte")
