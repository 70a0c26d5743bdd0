"""A trainer whose model makes an RPC in forward and never uses the result: FAST mode's
classic hang (PyTorch's test_backward_unused_send_function). distviz predicts it before the
backward starts.

Usage: python hang_unused.py
"""

import os

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp
import torch.nn as nn


def scale(x):
    return x * 2


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        h = self.fc(x)
        checked = rpc.rpc_sync("worker1", scale, args=(h,))  # noqa: F841 - never used
        return h.relu()


def run_worker(rank, world_size):
    options = rpc.TensorPipeRpcBackendOptions(
        init_method=os.environ.get("RPC_INIT_METHOD", "tcp://127.0.0.1:29500"))
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world_size, rpc_backend_options=options)
    if rank == 0:
        model = Model()
        for _ in range(2):
            with dist_autograd.context() as context_id:
                loss = model(torch.rand(3, 4)).sum()
                dist_autograd.backward(context_id, [loss])
    rpc.shutdown()


if __name__ == "__main__":
    mp.spawn(run_worker, args=(2,), nprocs=2, join=True)
