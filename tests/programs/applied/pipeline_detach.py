"""A two-shard pipeline without ``DistributedOptimizer`` whose first shard detaches its output
(``tests/e2e/test_applied_rpc.py``).

``shard1`` and ``shard2`` each own a ``nn.Linear(4, 4)`` behind an RRef and a local SGD over
it; ``master`` runs STEPS steps: in a context, ``shard1`` then ``shard2`` over RPC,
``dist_autograd.backward``, then each shard copies ``dist_autograd.get_gradients(context_id)``
into ``.grad`` and steps. MODE ``detach``: ``shard1`` returns ``out.detach()``, so its weights
get no gradient in any context (and never train); ``ok``: it returns ``out``.

Each step prints the truth on both shards.

Usage: python pipeline_detach.py detach|ok [STEPS]
"""

import sys

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp
import torch.nn as nn
from common import copy_gradients, start, truth


class Shard(nn.Module):
    def __init__(self, detach):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 4)
        self.detach = detach
        self.opt = torch.optim.SGD(self.fc.parameters(), lr=0.1)

    def forward(self, x):
        out = torch.relu(self.fc(x))
        return out.detach() if self.detach else out

    def step(self, context_id, label):
        truth(label, self, context_id)
        copy_gradients(context_id)
        self.opt.step()
        self.opt.zero_grad()


def train(mode, steps):
    s1 = rpc.remote("shard1", Shard, args=(mode == "detach",))
    s2 = rpc.remote("shard2", Shard, args=(False,))
    torch.manual_seed(1)
    for _ in range(steps):
        x = torch.randn(2, 4)
        with dist_autograd.context() as context_id:
            h = s1.rpc_sync().forward(x)
            y = s2.rpc_sync().forward(h)
            dist_autograd.backward(context_id, [y.sum()])
            s1.rpc_sync().step(context_id, "shard1")
            s2.rpc_sync().step(context_id, "shard2")


def run_worker(rank, mode, steps):
    start(("master", "shard1", "shard2")[rank], rank, 3)
    if rank == 0:
        train(mode, steps)
    rpc.shutdown()


if __name__ == "__main__":
    mode = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    mp.start_processes(run_worker, args=(mode, steps), nprocs=3, join=True, start_method="fork")
