"""A distributed backward called from TorchScript (``tests/e2e/test_rref_backward.py``).

Usage: python scripted_backward.py MODE

worker0 runs a forward through worker1 in a dist autograd context and calls a scripted
function that runs ``dist_autograd.backward`` (``aten::dist_backward``):

* ``ok``: the loss uses the RPC's result; the backward completes;
* ``hang``: the loss leaves the RPC's result out: FAST mode's hang, which PyTorch ends at its
  RPC time-out (``RPC_TIMEOUT`` seconds, default 60) with an error.

Prints ``backward done`` or ``backward raised``; exits 0 either way.
"""

import os
import sys

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp


@torch.jit.script
def scripted_backward(context_id: int, loss: torch.Tensor):
    dist_autograd.backward(context_id, [loss])


def scale(x):
    return x * 2


def run_worker(rank, mode):
    options = rpc.TensorPipeRpcBackendOptions(
        init_method=os.environ.get("RPC_INIT_METHOD", "tcp://127.0.0.1:29500"),
        rpc_timeout=float(os.environ.get("RPC_TIMEOUT", "60")))
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=2, rpc_backend_options=options)
    if rank == 0:
        x = torch.ones(2, requires_grad=True)
        with dist_autograd.context() as context_id:
            remote = rpc.rpc_sync("worker1", scale, args=(x,))
            loss = x.sum() if mode == "hang" else (x + remote).sum()
            try:
                scripted_backward(context_id, loss)
                print("backward done", flush=True)
            except RuntimeError:
                print("backward raised", flush=True)
    rpc.shutdown()


if __name__ == "__main__":
    mp.spawn(run_worker, args=(sys.argv[1],), nprocs=2, join=True)
