"""Limits, time-outs and exit codes, in one place (pure: never imports torch).

Every side reads them from here: the scenario checker (file size, nesting, workers), the
run-time guards in the workers (tensor size, step budget), the parent's time limits, the exit
status of a worker, and the CLI's exit codes (``EXIT_CODES``, the table README.md shows). The
CLI's option defaults are these values, so ``--help`` shows them.
"""

from __future__ import annotations

from typing import Final

# -- scenario files (checked before anything runs) -------------------------------------------------

#: Largest scenario file read, in bytes.
MAX_FILE_BYTES: Final = 1_000_000
#: Deepest nesting of YAML lists and mappings accepted.
MAX_YAML_DEPTH: Final = 32
#: Most workers a scenario may declare (each one is a process).
MAX_WORKERS: Final = 32
#: Most problems of one scenario file printed (``distviz check``); the rest are counted.
MAX_PROBLEMS_SHOWN: Final = 20

# -- what a scenario program may do at run time (per worker) ---------------------------------------

#: Default cap on the elements one tensor-creation call may allocate (``--max-numel``).
DEFAULT_MAX_NUMEL: Final = 50_000_000
#: Default step budget: loop steps, function calls and comprehension steps (``--max-steps``).
DEFAULT_MAX_STEPS: Final = 1_000_000
#: Largest string, list or tuple that ``*`` may build, in items.
MAX_SEQUENCE_LEN: Final = 10_000_000
#: Largest integer that ``**`` may build, in bits.
MAX_INT_BITS: Final = 100_000

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
#: RPC threads per worker (``TensorPipeRpcBackendOptions.num_worker_threads``).
RPC_THREADS: Final = 16

# -- exit status of a worker process ----------------------------------------------------------------

#: A worker reported an error to the parent and ended.
WORKER_ERROR_EXIT: Final = 3
#: ``crash_backward`` ended the worker in the backward pass.
CRASH_EXIT_CODE: Final = 17
#: The parent is gone (the worker's lifeline pipe closed).
PARENT_GONE_EXIT: Final = 70

# -- exit codes of the distviz command ---------------------------------------------------------------

EXIT_OK: Final = 0
EXIT_INTERNAL: Final = 1
EXIT_BAD_INPUT: Final = 2
EXIT_RUN_FAILED: Final = 3
EXIT_TIMEOUT: Final = 4
EXIT_RENDER: Final = 5
EXIT_HANG: Final = 6
EXIT_BACKWARD_ERROR: Final = 7
EXIT_DISAGREE: Final = 8
EXIT_INTERRUPTED: Final = 130

EXIT_CODES: Final[dict[int, str]] = {
    EXIT_OK: "the run (or replay) completed and, where PyTorch ran, the replay agrees with it",
    EXIT_INTERNAL: "a bug in distviz (please report it with the trace file)",
    EXIT_BAD_INPUT: "bad input: scenario, trace file or options; nothing was run",
    EXIT_RUN_FAILED: "the run failed: an op raised in the forward pass, or a worker died",
    EXIT_TIMEOUT: "start-up or the forward pass took longer than its time limit",
    EXIT_RENDER: "a picture could not be made (Graphviz missing, crashed or timed out)",
    EXIT_HANG: "the FAST-mode backward hangs (predicted by the replay, or observed)",
    EXIT_BACKWARD_ERROR: "the backward pass raised (fail_backward, crash_backward, second pass)",
    EXIT_DISAGREE: "the replay and PyTorch's real backward disagree (an order difference "
                   "counts only with one inter-op thread)",
    EXIT_INTERRUPTED: "interrupted by Ctrl-C; every worker was stopped",
}
