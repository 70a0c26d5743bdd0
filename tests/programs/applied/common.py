"""What the programs under tests/programs/applied share: starting RPC on 127.0.0.1, and the
truth a plain run prints about each parameter at a step (what
``dist_autograd.get_gradients(context_id)`` holds for it on its owner, and its ``.grad``)."""

import os

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc

_LAST = {}


def start(name, rank, world_size):
    options = rpc.TensorPipeRpcBackendOptions(
        init_method=os.environ.get("RPC_INIT_METHOD", "tcp://127.0.0.1:29500"))
    rpc.init_rpc(name, rank=rank, world_size=world_size, rpc_backend_options=options)


def truth(prefix, module, context_id):
    """Print ``truth <prefix>.<param>: context=none|zero|value grad=none|stale|fresh`` for each
    parameter of ``module`` (``stale``: the same .grad tensor at the same version as at the
    previous call)."""
    try:
        held = dist_autograd.get_gradients(context_id)
    except RuntimeError:
        held = {}
    for name, p in module.named_parameters():
        g = held.get(p)
        ctx = "none" if g is None else ("zero" if not bool(g.any()) else "value")
        key = None if p.grad is None else (id(p.grad), p.grad._version)
        state = "none" if key is None else ("stale" if _LAST.get(id(p)) == key else "fresh")
        _LAST[id(p)] = key
        print(f"truth {prefix}.{name}: context={ctx} grad={state}", flush=True)


def copy_gradients(context_id):
    """The fix: the context's gradients into .grad."""
    for p, g in dist_autograd.get_gradients(context_id).items():
        p.grad = g


def weights(module):
    return [round(float(p.detach().sum()), 5) for p in module.parameters()]


def torch_seed():
    torch.manual_seed(0)
