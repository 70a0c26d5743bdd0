"""A parameter server whose ``DistributedOptimizer`` holds a parameter that may get no gradient
(``tests/e2e/test_optimizer_no_grad.py``).

worker1 (``ps``) holds ``Net``: ``encoder`` and ``extra``, two ``nn.Linear(4, 4)``; worker0
(``trainer``) runs STEPS steps: in a context, ``ps.forward`` over RPC, ``dist_autograd.backward``
on the sum, ``DistributedOptimizer.step(context_id)``. MODE says when ``extra``'s output enters
the result:

* ``unused``: never (its output is computed and dropped): ``extra.weight`` and ``extra.bias``
  get no gradient in any step;
* ``all``: always: every parameter gets one;
* ``sometimes``: in the last step only: every parameter gets one, ``extra``'s once.

OPTIMIZER is ``sgd`` (PyTorch steps it in TorchScript, ``_ScriptLocalOptimizer``) or ``asgd``
(no functional form: PyTorch's Python ``_LocalOptimizer``). The trainer prints the parameters'
values after training (they must be the same plain and traced); from 1,000 steps on, also the
parameter server's peak resident set at a tenth of the steps and at the end, and the loop's
wall time.

Usage: python optimizer_no_grad.py unused|all|sometimes [STEPS] [sgd|asgd]
"""

import os
import resource
import sys
import time

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp
import torch.nn as nn
from torch.distributed.optim import DistributedOptimizer


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.encoder = nn.Linear(4, 4)
        self.extra = nn.Linear(4, 4)

    def forward(self, x, use_extra):
        h = self.encoder(x)
        e = self.extra(x)
        return h + e if use_extra else h


NET = None


def net():
    global NET
    if NET is None:
        NET = Net()
    return NET


def forward(x, use_extra):
    return net()(x, use_extra)


def parameter_rrefs():
    return [rpc.RRef(p) for p in net().parameters()]


def values():
    return [round(float(p.detach().sum()), 5) for p in net().parameters()]


def peak_kib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def train(mode, steps, optimizer):
    params = rpc.rpc_sync("ps", parameter_rrefs)
    kind = torch.optim.SGD if optimizer == "sgd" else torch.optim.ASGD
    opt = DistributedOptimizer(kind, params, lr=0.05)
    torch.manual_seed(1)
    start = time.perf_counter()
    for k in range(steps):
        if steps >= 1000 and k == steps // 10:
            print(f"ps peak at step {k}: {rpc.rpc_sync('ps', peak_kib)} KiB", flush=True)
        use_extra = mode == "all" or (mode == "sometimes" and k == steps - 1)
        x = torch.randn(2, 4)
        with dist_autograd.context() as context_id:
            y = rpc.rpc_sync("ps", forward, args=(x, use_extra))
            dist_autograd.backward(context_id, [y.sum()])
            opt.step(context_id)
    if steps >= 1000:
        print(f"ps peak at step {steps}: {rpc.rpc_sync('ps', peak_kib)} KiB; "
              f"{steps} steps in {time.perf_counter() - start:.2f} s", flush=True)
    print("values:", rpc.rpc_sync("ps", values), flush=True)


def run_worker(rank, mode, steps, optimizer):
    options = rpc.TensorPipeRpcBackendOptions(
        init_method=os.environ.get("RPC_INIT_METHOD", "tcp://127.0.0.1:29500"))
    name = "trainer" if rank == 0 else "ps"
    rpc.init_rpc(name, rank=rank, world_size=2, rpc_backend_options=options)
    if rank == 0:
        train(mode, steps, optimizer)
    rpc.shutdown()


if __name__ == "__main__":
    mode = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    optimizer = sys.argv[3] if len(sys.argv) > 3 else "sgd"
    mp.start_processes(run_worker, args=(mode, steps, optimizer), nprocs=2, join=True, start_method="fork")
