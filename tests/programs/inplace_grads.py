"""Gradients changed in place right after the backward: the program zeroes every gradient of
its context, on both workers, as soon as ``dist_autograd.backward`` returns (an optimizer step
could scale or clip them the same way). What PyTorch's backward produced is what distviz must
compare, so it reads the gradients before the backward returns to the program: the context
agrees, and the program still sees the zeros it wrote.

Usage: python inplace_grads.py
"""

import os

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp

WEIGHT = None


def times_weight(x):
    global WEIGHT
    if WEIGHT is None:
        WEIGHT = torch.ones((3, 3), requires_grad=True)
    return x @ WEIGHT


def zero_grads(context_id):
    for grad in dist_autograd.get_gradients(context_id).values():
        grad.zero_()
    return True


def run_worker(rank, world_size):
    options = rpc.TensorPipeRpcBackendOptions(
        init_method=os.environ.get("RPC_INIT_METHOD", "tcp://127.0.0.1:29500"))
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world_size, rpc_backend_options=options)
    if rank == 0:
        x = torch.rand((3, 3), requires_grad=True)
        with dist_autograd.context() as context_id:
            y = rpc.rpc_sync("worker1", times_weight, args=(x,))
            dist_autograd.backward(context_id, [y.sum()])
            grads = dist_autograd.get_gradients(context_id)
            grads[x].zero_()
            rpc.rpc_sync("worker1", zero_grads, args=(context_id,))
            assert bool((dist_autograd.get_gradients(context_id)[x] == 0).all())
    rpc.shutdown()


if __name__ == "__main__":
    mp.spawn(run_worker, args=(2,), nprocs=2, join=True)
