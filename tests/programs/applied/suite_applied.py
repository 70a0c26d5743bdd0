"""Two tests for distviz's pytest plugin under ``--distviz-strict``
(``tests/e2e/test_applied_rpc.py``): each trains ``local_head.py`` in real RPC workers and passes
plainly; under ``--distviz-strict`` the one whose local optimizer steps after the context
(never applying the context's gradients) fails, the one that copies them passes."""

import os

import torch.multiprocessing as mp
from local_head import run_worker


def _train(mode):
    # a rendezvous of its own for each test (the workers inherit the environment)
    base = os.environ.get("RPC_INIT_METHOD", "file:///tmp/distviz-suite-applied")
    os.environ["RPC_INIT_METHOD"] = f"{base}-{mode}"
    try:
        mp.start_processes(run_worker, args=(mode, 3), nprocs=2, join=True, start_method="fork")
    finally:
        os.environ["RPC_INIT_METHOD"] = base


def test_local_head_stepped_after_the_context():
    _train("after")


def test_local_head_with_the_gradients_copied():
    _train("copy")
