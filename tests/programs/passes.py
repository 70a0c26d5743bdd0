"""Several backward passes in one dist autograd context, for distviz trace.

Usage: python passes.py MODE, with MODE one of
  retain     the first dist_autograd.backward keeps the graph (retain_graph=True), the second
             runs through it again, the third from a new root computed since; then one more
             RPC, and a fourth pass through both results. Prints get_gradients' sums after each
             pass.
  no-retain  the first backward frees the saved tensors (no retain_graph); the second raises
             PyTorch's "Trying to backward through the graph a second time"
"""

import os
import sys

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp


def show(context_id, k, x, w):
    sums = {"x" if t is x else "w": g.double().sum().item()
            for t, g in dist_autograd.get_gradients(context_id).items()}
    print(f"pass {k}: x {sums['x']!r} w {sums['w']!r}", flush=True)


def run_worker(rank, mode):
    options = rpc.TensorPipeRpcBackendOptions(
        init_method=os.environ.get("RPC_INIT_METHOD", "tcp://127.0.0.1:29500"))
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=2, rpc_backend_options=options)
    if rank == 0:
        x = torch.rand(3, 3, requires_grad=True)
        w = torch.rand(3, 3, requires_grad=True)
        with dist_autograd.context() as context_id:
            y = rpc.rpc_sync("worker1", torch.mul, args=(x, w))
            sq = y * y
            loss = sq.sum()
            dist_autograd.backward(context_id, [loss], retain_graph=mode == "retain")
            show(context_id, 1, x, w)
            dist_autograd.backward(context_id, [loss], retain_graph=mode == "retain")
            show(context_id, 2, x, w)
            scaled = (y * 3).sum()
            dist_autograd.backward(context_id, [scaled], retain_graph=True)
            show(context_id, 3, x, w)
            z = rpc.rpc_sync("worker1", torch.add, args=(x, 1))
            total = (y * z).sum()
            dist_autograd.backward(context_id, [total])
            show(context_id, 4, x, w)
    rpc.shutdown()


if __name__ == "__main__":
    mp.spawn(run_worker, args=(sys.argv[1],), nprocs=2, join=True)
