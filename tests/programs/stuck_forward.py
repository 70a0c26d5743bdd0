"""A trainer stuck in its forward pass, two RPCs deep: worker0 calls ``relay`` on worker1,
which calls ``wait_forever`` on worker2, which waits for an event that never comes. worker0
waits in ``rpc_sync`` inside its context for good, and so does worker1 inside the RPC it
serves (``distviz snapshot`` shows where, and which call each waits in).

Usage: python stuck_forward.py   (stop it with Ctrl-C)
"""

import os
import threading
from pathlib import Path

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp

never = threading.Event()


def scale(x):
    return x * 2


def wait_forever(x):
    marker = os.environ.get("STUCK_MARKER")
    if marker:
        Path(marker).touch()
    never.wait()
    return x + 1


def relay(x):
    y = rpc.rpc_sync("worker2", wait_forever, args=(x * 3,))
    return y


def run_worker(rank, world_size):
    options = rpc.TensorPipeRpcBackendOptions(
        init_method=os.environ.get("RPC_INIT_METHOD", "tcp://127.0.0.1:29500"))
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world_size, rpc_backend_options=options)
    if rank == 0:
        w = torch.rand(3, 3, requires_grad=True)
        with dist_autograd.context() as context_id:
            h = rpc.rpc_sync("worker1", scale, args=(w,))
            y = rpc.rpc_sync("worker1", relay, args=(h,))
            dist_autograd.backward(context_id, [y.sum()])
    rpc.shutdown()


if __name__ == "__main__":
    mp.spawn(run_worker, args=(3,), nprocs=3, join=True)
