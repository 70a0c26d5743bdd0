"""Small RPC programs that go wrong, one per mode, for distviz trace's fault handling.

Usage: python faults.py MODE, with MODE one of
  raise            a custom autograd Function on worker1 raises in its backward (the program
                   fails with PyTorch's error)
  late-raise       worker1's backward takes 8 s, then raises (a hang for --hang-timeout 2
                   that PyTorch ends with an error)
  crash            worker1 is killed in the middle of the second iteration's backward
  no-backward      the forward runs over RPC, nothing ever calls backward
  outside-context  dist_autograd.backward is called with a context id that does not exist
"""

import os
import signal
import sys
import time

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp
import torch.nn as nn


class Checked(torch.autograd.Function):
    """Scales by 2; its backward rejects the gradient."""

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        raise ValueError("gradient rejected by Checked.backward")


class Late(torch.autograd.Function):
    """Scales by 2; its backward takes 8 s, then rejects the gradient."""

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        time.sleep(8)
        raise ValueError("gradient rejected late by Late.backward")


class Fragile(torch.autograd.Function):
    """Scales by 2; in the second iteration its backward kills the worker that runs it."""

    calls = 0

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        Fragile.calls += 1
        if Fragile.calls == 2:
            os.kill(os.getpid(), signal.SIGKILL)
        return grad * 2


def checked(x):
    return Checked.apply(x)


def late(x):
    return Late.apply(x)


def fragile(x):
    return Fragile.apply(x)


class Model(nn.Module):
    def __init__(self, remote_fn):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.remote_fn = remote_fn

    def forward(self, x):
        y = rpc.rpc_sync("worker1", self.remote_fn, args=(self.fc(x),))
        return y.sum()


def run_worker(rank, mode):
    options = rpc.TensorPipeRpcBackendOptions(
        init_method=os.environ.get("RPC_INIT_METHOD", "tcp://127.0.0.1:29500"))
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=2, rpc_backend_options=options)
    if rank == 0:
        model = Model({"raise": checked, "late-raise": late}.get(mode, fragile))
        for _ in range(2):
            with dist_autograd.context() as context_id:
                loss = model(torch.rand(3, 4))
                if mode == "no-backward":
                    continue
                if mode == "outside-context":
                    context_id += 1000
                dist_autograd.backward(context_id, [loss])
    rpc.shutdown()


if __name__ == "__main__":
    mp.start_processes(run_worker, args=(sys.argv[1],), nprocs=2, join=True, start_method="fork")
