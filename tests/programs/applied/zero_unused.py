"""An RPC result left out of the loss, which PyTorch answers with all-zero gradients
(``tests/e2e/test_applied_rpc.py``).

``ps`` owns ``Two`` (``main`` and ``aux``, two ``nn.Linear(4, 2)``) and a local SGD over it;
its ``forward`` returns both outputs. ``trainer`` runs STEPS steps: in a context, the forward
over RPC, ``dist_autograd.backward`` on ``main``'s output only (``aux`` is left out of the
loss), then the PS copies ``dist_autograd.get_gradients(context_id)`` into ``.grad`` and
steps: ``aux``'s gradients are in the context, all zeros. MODE ``both`` uses both outputs.

Usage: python zero_unused.py unused|both [STEPS]
"""

import sys

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp
import torch.nn as nn
from common import copy_gradients, start, truth


class Two(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.main = nn.Linear(4, 2)
        self.aux = nn.Linear(4, 2)

    def forward(self, x):
        return self.main(x), self.aux(x)


NET = None
OPT = None


def net():
    global NET, OPT
    if NET is None:
        NET = Two()
        OPT = torch.optim.SGD(NET.parameters(), lr=0.1)
    return NET


def forward(x):
    return net()(x)


def ps_step(context_id):
    truth("ps", net(), context_id)
    copy_gradients(context_id)
    OPT.step()
    OPT.zero_grad()


def train(mode, steps):
    torch.manual_seed(1)
    for _ in range(steps):
        x = torch.randn(3, 4)
        with dist_autograd.context() as context_id:
            main, aux = rpc.rpc_sync("ps", forward, args=(x,))
            loss = main.sum() + (aux.sum() if mode == "both" else 0)
            dist_autograd.backward(context_id, [loss])
            rpc.rpc_sync("ps", ps_step, args=(context_id,))


def run_worker(rank, mode, steps):
    start("trainer" if rank == 0 else "ps", rank, 2)
    if rank == 0:
        train(mode, steps)
    rpc.shutdown()


if __name__ == "__main__":
    mode = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    mp.start_processes(run_worker, args=(mode, steps), nprocs=2, join=True, start_method="fork")
