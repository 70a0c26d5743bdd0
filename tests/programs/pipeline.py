"""Pipeline parallelism in the style of PyTorch's tutorial "Distributed Pipeline Parallelism
Using RPC": two nn.Module shards on two workers, held by RRefs; the master splits each batch
into micro-batches, shard 1 fetches its input with to_here(), shard 2 is called with
rpc_async; DistributedOptimizer; one dist_autograd context per batch.

Usage: python pipeline.py [BATCHES]
"""

import os
import sys
import threading

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp
import torch.nn as nn
import torch.optim as optim
from torch.distributed.optim import DistributedOptimizer
from torch.distributed.rpc import RRef


class Shard1(nn.Module):
    def __init__(self):
        super().__init__()
        self._lock = threading.Lock()
        self.seq = nn.Sequential(nn.Linear(8, 16), nn.ReLU())

    def forward(self, x_rref):
        x = x_rref.to_here()
        with self._lock:
            out = self.seq(x)
        return out

    def parameter_rrefs(self):
        return [RRef(p) for p in self.parameters()]


class Shard2(nn.Module):
    def __init__(self):
        super().__init__()
        self._lock = threading.Lock()
        self.fc = nn.Linear(16, 4)

    def forward(self, x_rref):
        x = x_rref.to_here()
        with self._lock:
            out = self.fc(x)
        return out

    def parameter_rrefs(self):
        return [RRef(p) for p in self.parameters()]


class DistNet(nn.Module):
    """Assemble two parts as an nn.Module and define pipelining logic."""

    def __init__(self, split_size, workers):
        super().__init__()
        self.split_size = split_size
        self.p1_rref = rpc.remote(workers[0], Shard1)
        self.p2_rref = rpc.remote(workers[1], Shard2)

    def forward(self, xs):
        out_futures = []
        for x in iter(xs.split(self.split_size, dim=0)):
            x_rref = RRef(x)
            y_rref = self.p1_rref.remote().forward(x_rref)
            z_fut = self.p2_rref.rpc_async().forward(y_rref)
            out_futures.append(z_fut)
        return torch.cat(torch.futures.wait_all(out_futures))

    def parameter_rrefs(self):
        remote_params = []
        remote_params.extend(self.p1_rref.remote().parameter_rrefs().to_here())
        remote_params.extend(self.p2_rref.remote().parameter_rrefs().to_here())
        return remote_params


def run_master(split_size, batches):
    model = DistNet(split_size, ["worker1", "worker2"])
    loss_fn = nn.MSELoss()
    opt = DistributedOptimizer(optim.SGD, model.parameter_rrefs(), lr=0.05)
    for _ in range(batches):
        inputs = torch.randn(6, 8)
        labels = torch.randn(6, 4)
        with dist_autograd.context() as context_id:
            outputs = model(inputs)
            dist_autograd.backward(context_id, [loss_fn(outputs, labels)])
            opt.step(context_id)


def run_worker(rank, world_size, batches):
    torch.manual_seed(rank)
    options = rpc.TensorPipeRpcBackendOptions(
        init_method=os.environ.get("RPC_INIT_METHOD", "tcp://127.0.0.1:29500"))
    if rank == 0:
        rpc.init_rpc("master", rank=rank, world_size=world_size, rpc_backend_options=options)
        run_master(2, batches)
    else:
        rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world_size,
                     rpc_backend_options=options)
    rpc.shutdown()


if __name__ == "__main__":
    batches = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    mp.spawn(run_worker, args=(3, batches), nprocs=3, join=True)
