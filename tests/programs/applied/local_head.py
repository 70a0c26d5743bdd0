"""A trainer with a remote model and a local head that steps a local optimizer
(``tests/e2e/test_applied_rpc.py``).

``ps`` owns ``Body`` (``nn.Linear(4, 3)``) behind an RRef; ``trainer`` owns ``head``
(``nn.Linear(3, 1)``) and a local ``torch.optim.SGD`` over it. Each of STEPS steps: in a
context, the body's forward over RPC, the head, ``dist_autograd.backward`` on the loss. MODE:

* ``plain``: ``opt.step()`` inside the context, with ``.grad`` never filled;
* ``stale``: a local warm-up backward fills ``.grad`` once before training; every step then
  applies that same stale ``.grad`` (``opt.zero_grad(set_to_none=False)`` is never called);
* ``after``: ``opt.step()`` after the ``with`` block (the context is gone by then);
* ``copy``: ``dist_autograd.get_gradients(context_id)`` copied into ``.grad`` first: correct.

Each step prints the truth on the trainer; the end prints the head's weights before and after.

Usage: python local_head.py plain|stale|after|copy [STEPS]
"""

import sys

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp
import torch.nn as nn
from common import copy_gradients, start, truth, weights


class Body(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu(self.fc(x))


def train(mode, steps):
    body = rpc.remote("ps", Body)
    torch.manual_seed(2)
    head = nn.Linear(3, 1)
    opt = torch.optim.SGD(head.parameters(), lr=0.1)
    if mode == "stale":
        head(torch.ones(1, 3)).sum().backward()
    before = weights(head)
    for _ in range(steps):
        x = torch.randn(2, 4)
        with dist_autograd.context() as context_id:
            h = body.rpc_sync().forward(x)
            loss = head(h).sum()
            dist_autograd.backward(context_id, [loss])
            truth("trainer.head", head, context_id)
            if mode == "copy":
                copy_gradients(context_id)
            if mode != "after":
                opt.step()
        if mode == "after":
            opt.step()
        if mode in ("plain", "after", "copy"):
            opt.zero_grad()
    print(f"weights before: {before}", flush=True)
    print(f"weights after: {weights(head)}", flush=True)


def run_worker(rank, mode, steps):
    start("trainer" if rank == 0 else "ps", rank, 2)
    if rank == 0:
        train(mode, steps)
    rpc.shutdown()


if __name__ == "__main__":
    mode = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    mp.start_processes(run_worker, args=(mode, steps), nprocs=2, join=True, start_method="fork")
