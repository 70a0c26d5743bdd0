"""Custom autograd Functions across RPC, written the way users write theirs: one context per
case, for distviz trace's zero-gradient reasoning (PyTorch's gradients are the oracle).

Usage: python custom_functions.py

Each context of worker0 is one case; worker1 runs the Functions:
  1 sluggish   Sluggish.apply(x, delay).sum() on worker1 is the loss (the root is the RPC's
               result); backward returns g * 3 and None for the float argument
  2 second     the RPC returns two sums and only the second is the loss: x gets zeros
  3 split      a Function with two outputs, only the first used
  4 nondiff    a Function whose second output is marked non-differentiable
  5 zeros      a Function whose backward really returns zeros
  6 constant   an unused RPC output whose zeros reach a Function whose backward ignores them
  7 none       set_materialize_grads(False) and a backward that returns None for its input,
               on worker1 (the RPC turns the None into zeros)
  8 none-here  the same Function on worker0, on a leaf of worker0 (no gradient at all)
  9 square     a backward built of differentiable operations on a saved tensor
"""

import os
import time

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp
from torch.autograd.function import once_differentiable


class Sluggish(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, delay):
        time.sleep(delay)
        return x * 3

    @staticmethod
    def backward(ctx, g):
        return g * 3, None


class Split(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2, x * 5

    @staticmethod
    def backward(ctx, g1, g2):
        return g1 * 2 + g2 * 5


class NonDiff(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ranks = x.argsort().to(x.dtype)
        ctx.mark_non_differentiable(ranks)
        return x * 4, ranks

    @staticmethod
    @once_differentiable
    def backward(ctx, g, _):
        return g * 4


class Zeros(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return torch.zeros_like(g)


class Constant(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return torch.ones_like(g)


class Dropped(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return None


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


def sluggish(x):
    return Sluggish.apply(x, 0.01).sum()


def two_sums(x, y):
    return (x * 2).sum(), (y * 3).sum()


def split(x):
    first, _ = Split.apply(x)
    return first


def nondiff(x):
    out, _ = NonDiff.apply(x)
    return out


def zeros(x):
    return Zeros.apply(x)


def constant_first(x, y):
    return Constant.apply(x).sum(), (y * 3).sum()


def dropped(x):
    return Dropped.apply(x)


def square(x):
    return Square.apply(x)


def case(k, x, y):
    if k == 1:
        return rpc.rpc_sync("worker1", sluggish, args=(x,))
    if k == 2:
        _, second = rpc.rpc_sync("worker1", two_sums, args=(x, y))
        return second
    if k == 3:
        return rpc.rpc_sync("worker1", split, args=(x,)).sum()
    if k == 4:
        return rpc.rpc_sync("worker1", nondiff, args=(x,)).sum()
    if k == 5:
        return rpc.rpc_sync("worker1", zeros, args=(x,)).sum() + y.sum()
    if k == 6:
        _, used = rpc.rpc_sync("worker1", constant_first, args=(x, y))
        return used
    if k == 7:
        return rpc.rpc_sync("worker1", dropped, args=(x,)).sum() + y.sum()
    if k == 8:
        return rpc.rpc_sync("worker1", sluggish, args=(x,)) + Dropped.apply(y).sum()
    return rpc.rpc_sync("worker1", square, args=(x,)).sum()


def run_worker(rank):
    options = rpc.TensorPipeRpcBackendOptions(
        init_method=os.environ.get("RPC_INIT_METHOD", "tcp://127.0.0.1:29500"))
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=2, rpc_backend_options=options)
    if rank == 0:
        for k in range(1, 10):
            x = torch.arange(1.0, 5.0, requires_grad=True)
            y = torch.ones(4, requires_grad=True)
            with dist_autograd.context() as context_id:
                loss = case(k, x, y)
                dist_autograd.backward(context_id, [loss])
                grads = dist_autograd.get_gradients(context_id)
                print(k, [grads[t].tolist() if t in grads else None for t in (x, y)])
    rpc.shutdown()


if __name__ == "__main__":
    mp.start_processes(run_worker, nprocs=2, join=True, start_method="fork")
