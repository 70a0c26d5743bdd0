"""fairscale's ``DistributedPipeline`` with and without activation checkpointing: where each
parameter's gradient goes (``tests/e2e/test_local_backward.py``).

Usage: python fairscale_pipeline.py [STAGES] [CHUNKS]   (defaults 2 and 4)

A trainer (worker0) and one stage of ``nn.Linear(4, 4)`` per worker behind ``RemoteModule``s,
as fairscale's own tests build it (``tests/experimental/nn/test_multiprocess_pipe.py``), MSE
loss on the last stage, ``loss_rref.backward(context_id)``. For each ``checkpoint`` setting,
with the same weights and data, it prints per parameter the norm of
``get_gradients(context_id)`` on its owner, of its ``.grad``, and of the gradient a local
autograd run of the same model gives, whether the context's gradient is the local one, whether
the context's and ``.grad`` add up to it, and whether the context's is the last micro-batch's
part of it alone; then how many parameters ``DistributedOptimizer.step`` changed.
"""

import os
import sys

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp
import torch.nn as nn
from fairscale.experimental.nn.distributed_pipeline import (
    DistributedLoss,
    DistributedPipeline,
    PipelineModulesGraph,
)
from torch.distributed.nn import RemoteModule
from torch.distributed.optim import DistributedOptimizer


def build(checkpoint, stages, chunks):
    layers = [RemoteModule(f"worker{i + 1}/cpu", nn.Linear, args=(4, 4)) for i in range(stages)]
    graph = PipelineModulesGraph()
    graph.add_sequence(layers, [0])
    return DistributedPipeline(graph, chunks=chunks, checkpoint=checkpoint)


def set_weight(param_rref, value):
    with torch.no_grad():
        param_rref.local_value().copy_(value)


def gradients_here(context_id, param_rref):
    """On the parameter's owner: its gradient in the context and its ``.grad``."""
    p = param_rref.local_value()
    return dist_autograd.get_gradients(context_id).get(p), p.grad


def norm(t):
    return "none" if t is None else f"{t.norm():.5f}"


def one(checkpoint, stages, chunks):
    pipe = build(checkpoint, stages, chunks)
    params = pipe.parameter_rrefs()
    for k, p in enumerate(params):
        torch.manual_seed(100 + k)
        rpc.rpc_sync(p.owner(), set_weight, args=(p, torch.randn(p.to_here().shape)))
    weights = [p.to_here().detach().clone().requires_grad_(True) for p in params]
    torch.manual_seed(3)
    x, target = torch.randn(8, 4), torch.randn(8, 4)
    criterion = DistributedLoss(nn.MSELoss)
    with dist_autograd.context() as context_id:
        loss = criterion(pipe(x), rpc.RRef(target))
        loss.backward(context_id)
        got = [rpc.rpc_sync(p.owner(), gradients_here, args=(context_id, p)) for p in params]
        before = [p.to_here().clone() for p in params]
        DistributedOptimizer(torch.optim.SGD, params, lr=0.1).step(context_id)
        moved = sum(not torch.equal(b, p.to_here()) for b, p in zip(before, params, strict=True))
    h = x
    for i in range(stages):
        h = nn.functional.linear(h, weights[2 * i], weights[2 * i + 1])
    local = torch.autograd.grad(nn.MSELoss()(h, target), weights, retain_graph=True)
    # the last micro-batch's part: the same loss, the other rows' outputs held constant
    rows = len(x) // chunks
    held = torch.cat([h[:-rows].detach(), h[-rows:]])
    last = torch.autograd.grad(nn.MSELoss()(held, target), weights)
    for k, ((in_context, dot_grad), want) in enumerate(zip(got, local, strict=True)):
        zero = torch.zeros_like(want)
        whole = (zero if in_context is None else in_context) + \
            (zero if dot_grad is None else dot_grad)
        same = in_context is not None and torch.allclose(in_context, want, atol=1e-5)
        part = in_context is not None and torch.allclose(in_context, last[k], atol=1e-5)
        print(f"checkpoint={checkpoint} param {k}: context {norm(in_context)} .grad "
              f"{norm(dot_grad)} local {norm(want)} context==local {same} "
              f"context+.grad==local {torch.allclose(whole, want, atol=1e-5)} "
              f"context==last micro-batch's part {part}", flush=True)
    print(f"checkpoint={checkpoint} step changed {moved} of {len(params)}", flush=True)


def run_worker(rank, world_size, stages, chunks):
    options = rpc.TensorPipeRpcBackendOptions(
        init_method=os.environ.get("RPC_INIT_METHOD", "tcp://127.0.0.1:29500"))
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world_size, rpc_backend_options=options)
    if rank == 0:
        for checkpoint in ("never", "except_last", "always"):
            one(checkpoint, stages, chunks)
    rpc.shutdown()


if __name__ == "__main__":
    stages = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    chunks = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    mp.spawn(run_worker, args=(stages + 1, stages, chunks), nprocs=stages + 1, join=True)
