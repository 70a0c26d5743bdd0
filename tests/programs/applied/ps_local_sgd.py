"""A parameter server that steps a local ``torch.optim.SGD`` after a distributed backward
(``tests/e2e/test_applied_rpc.py``).

``ps`` holds ``Net`` (``fc``, ``nn.Linear(4, 2)``) and a local SGD over it; ``trainer`` runs
STEPS steps: in a context, ``forward`` over RPC, ``dist_autograd.backward``, then asks ``ps``
to step. MODE:

* ``plain``: the PS steps with ``.grad``, which ``dist_autograd.backward`` never fills: every
  gradient stays in the context and the weights never change;
* ``copy``: the PS copies ``dist_autograd.get_gradients(context_id)`` into ``.grad`` first:
  the model trains.

Each step prints the truth on the PS (what the context holds, the ``.grad`` state); the end
prints the weights before and after.

Usage: python ps_local_sgd.py plain|copy [STEPS]
"""

import sys

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp
import torch.nn as nn
from common import copy_gradients, start, truth, weights


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)


NET = None
OPT = None


def net():
    global NET, OPT
    if NET is None:
        NET = Net()
        OPT = torch.optim.SGD(NET.parameters(), lr=0.1)
    return NET


def forward(x):
    return net()(x)


def ps_step(context_id, mode):
    truth("ps", net(), context_id)
    if mode == "copy":
        copy_gradients(context_id)
    OPT.step()
    OPT.zero_grad()


def ps_weights():
    return weights(net())


def train(mode, steps):
    before = rpc.rpc_sync("ps", ps_weights)
    torch.manual_seed(1)
    for _ in range(steps):
        x = torch.randn(3, 4)
        with dist_autograd.context() as context_id:
            y = rpc.rpc_sync("ps", forward, args=(x,))
            dist_autograd.backward(context_id, [y.sum()])
            rpc.rpc_sync("ps", ps_step, args=(context_id, mode))
    after = rpc.rpc_sync("ps", ps_weights)
    print(f"weights before: {before}", flush=True)
    print(f"weights after: {after}", flush=True)


def run_worker(rank, mode, steps):
    start("trainer" if rank == 0 else "ps", rank, 2)
    if rank == 0:
        train(mode, steps)
    rpc.shutdown()


if __name__ == "__main__":
    mode = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    mp.start_processes(run_worker, args=(mode, steps), nprocs=2, join=True, start_method="fork")
