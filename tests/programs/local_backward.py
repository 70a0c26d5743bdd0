"""Local backwards inside distributed autograd contexts: the mistakes a newcomer makes after
reading how ``get_gradients`` is used (``tests/e2e/test_local_backward.py``).

Usage: python local_backward.py MODE   (MODE: rpc, grad, local or nested)

* ``rpc``: a model behind an RRef on worker1; inside ``with dist_autograd.context()`` the
  trainer calls ``loss.backward()``: PyTorch's local engine meets the RPC's node and fails with
  ``graphTask_ INTERNAL ASSERT FAILED`` (exit 1);
* ``grad``: the same graph, asked with ``torch.autograd.grad`` for the input's gradient: the
  local engine stops at the RPC's node, and PyTorch says the input was not used (exit 1);
* ``local``: a local model's ``loss.backward()`` inside a context: it runs, its gradients go
  to ``.grad``, and ``get_gradients`` holds none of them (exit 0);
* ``nested``: a distributed backward whose custom Function on worker1 recomputes its layer and
  runs a local ``torch.autograd.backward``, as checkpointing does: the layer's parameters get
  ``.grad``, never a gradient in the context (exit 0).

Each mode prints what PyTorch gave it.
"""

import os
import sys

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 1)

    def forward(self, x):
        return self.linear(x)


class Recomputed(torch.autograd.Function):
    """Runs ``layer`` without a graph, and in its backward again with one, then a local
    backward through it: the layer's parameters get ``.grad`` (as fairscale's checkpoint)."""

    @staticmethod
    def forward(ctx, x, layer):
        ctx.save_for_backward(x)
        ctx.layer = layer
        with torch.no_grad():
            return layer(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        leaf = x.detach().requires_grad_(True)
        with torch.enable_grad():
            out = ctx.layer(leaf)
        torch.autograd.backward(out, grad)
        return leaf.grad, None


STAGE = {}


def stage(x):
    layer = STAGE.setdefault("layer", nn.Linear(4, 4))
    return Recomputed.apply(x, layer)


def stage_grads(context_id):
    layer = STAGE["layer"]
    in_context = dist_autograd.get_gradients(context_id)
    return [(p in in_context, p.grad is not None) for p in layer.parameters()]


def train(mode):
    x = torch.ones(2, 4, requires_grad=True)
    if mode in ("rpc", "grad"):
        model = rpc.remote("worker1", Model)
        with dist_autograd.context() as context_id:
            out = model.rpc_sync().forward(x)
            loss = out.sum()
            if mode == "grad":
                torch.autograd.grad(loss, [x])
            else:
                loss.backward()
    elif mode == "local":
        model = Model()
        with dist_autograd.context() as context_id:
            loss = model(x).sum()
            loss.backward()
            print(f"in the context: {len(dist_autograd.get_gradients(context_id))}, "
                  f".grad set: {model.linear.weight.grad is not None}", flush=True)
    else:
        with dist_autograd.context() as context_id:
            out = rpc.rpc_sync("worker1", stage, args=(x,))
            loss = out.sum()
            dist_autograd.backward(context_id, [loss])
            grads = rpc.rpc_sync("worker1", stage_grads, args=(context_id,))
            print(f"worker1 parameters (in the context, .grad set): {grads}", flush=True)


def run_worker(rank, world_size, mode):
    options = rpc.TensorPipeRpcBackendOptions(
        init_method=os.environ.get("RPC_INIT_METHOD", "tcp://127.0.0.1:29500"))
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world_size, rpc_backend_options=options)
    if rank == 0:
        train(mode)
    rpc.shutdown()


if __name__ == "__main__":
    mp.start_processes(run_worker, args=(2, sys.argv[1]), nprocs=2, join=True, start_method="fork")
