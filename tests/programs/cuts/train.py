"""A trainer, a parameter server and a pipeline shard, with one mistake that cuts a parameter's
gradient (``tests/e2e/test_cuts.py``; each mistake's line carries ``# cut: MISTAKE``).

``trainer`` (rank 0) holds a local ``head`` and a ``shift`` it adds to the shard's input;
``ps`` (rank 1) an embedding table, a layer ``fc``, a layer ``extra`` and a ``gain``, behind an RRef; ``shard`` (rank 2) a pipeline stage behind an
RRef. Each step, in a dist autograd context: the embedding of some ids (``ps``), ``fc`` and
``extra`` on it (``ps``), the shard, the local head, times a scale from ``gain`` (``ps``);
``dist_autograd.backward`` and a ``DistributedOptimizer`` step over every parameter. Some
``.item()``, ``.detach()`` and ``torch.no_grad()`` along the way cut nothing (their tensors also
go on into the loss): distviz must not name them. After each
backward each owner reads ``dist_autograd.get_gradients`` and the trainer prints the
parameters that got none (``no gradient: ps.fc.weight, ...``): the truth.

MISTAKES: ``none`` (correct), or some of ``no_grad``, ``detach``, ``tolist``, ``item``,
``data``, ``requires_grad``, ``parameter``, ``outside``, ``argument``, ``unused_layer``,
comma-separated;
``all``: each group of ``GROUPS`` and each of their mistakes alone, one after the other in one
run (``MISTAKES: no gradient: ...``).
``detach`` (a pipeline stage) and ``item`` leave an RPC's send without a gradient: PyTorch's
backward hangs until the RPC time-out (``CUTS_RPC_TIMEOUT`` seconds, default 60).

Usage: python train.py MISTAKES [STEPS]
"""

import os
import sys

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.optim import DistributedOptimizer

#: the mistakes PyTorch's backward survives, in groups that cut different parameters (``all``
#: runs each group and each mistake of a group, one after the other)
GROUPS = ("no_grad,data,unused_layer", "tolist,requires_grad", "parameter,outside,argument")


class ParameterServer(nn.Module):
    def __init__(self, mistakes):
        super().__init__()
        torch.manual_seed(0)
        self.mistakes = mistakes
        self.emb = nn.Embedding(10, 4)
        self.fc = nn.Linear(4, 4)
        self.extra = nn.Linear(4, 4)  # cut: unused_layer
        self.gain = nn.Parameter(torch.ones(1))
        if "requires_grad" in mistakes:
            self.fc.weight.requires_grad_(False)  # cut: requires_grad

    def embed(self, ids):
        if "no_grad" in self.mistakes:
            with torch.no_grad():  # cut: no_grad
                out = self.emb(ids)
            return out
        out = self.emb(ids)
        if "tolist" in self.mistakes:
            return out.tolist()  # cut: tolist
        return out

    def forward(self, e, skip_fc=False):
        if skip_fc:
            h = 0
        elif "data" in self.mistakes:
            h = F.linear(e, self.fc.weight.data, self.fc.bias)  # cut: data
        else:
            h = self.fc(e)
        if torch.is_tensor(h):
            self.last = h.detach()  # not a cut: h goes on into the result
        if "unused_layer" in self.mistakes:
            return torch.relu(h)
        return torch.relu(h + self.extra(e))

    def fc_parameters(self):
        return [self.fc.weight, self.fc.bias]  # cut: parameter

    def scale(self, x):
        return (x * self.gain).mean()


class Shard(nn.Module):
    def __init__(self, mistakes):
        super().__init__()
        torch.manual_seed(1)
        self.mistakes = mistakes
        self.fc = nn.Linear(4, 4)

    def forward(self, h):
        out = torch.tanh(self.fc(h))
        if "detach" in self.mistakes:
            return out.detach()  # cut: detach
        return out

    def forward_shifted(self, h, shift):
        return self.forward(h + shift)


class Shift(nn.Module):
    """The trainer's shift of the shard's input."""

    def __init__(self):
        super().__init__()
        self.value = nn.Parameter(torch.zeros(4))


def param_rrefs(module):
    return [rpc.RRef(p) for p in module.parameters()]


def no_gradient(module, prefix, context_id):
    """The truth, read on the owner: the parameters without a gradient in the context."""
    grads = dist_autograd.get_gradients(context_id)
    return [f"{prefix}.{n}" for n, p in module.named_parameters() if p not in grads]


def step(mistakes, ps, shard, head, shift, opt, ids, x, early):
    with dist_autograd.context() as context_id:
        if "outside" in mistakes:
            e = early
        elif "tolist" in mistakes:
            e = torch.tensor(ps.rpc_sync().embed(ids))
        else:
            e = ps.rpc_sync().embed(ids)
        if "parameter" in mistakes:
            w, b = ps.rpc_sync().fc_parameters()
            h = torch.relu(F.linear(e, w, b) + ps.rpc_sync().forward(e, True))
        else:
            h = ps.rpc_sync().forward(e)
        if "argument" in mistakes:
            h = shard.rpc_sync().forward_shifted(h, shift.value)  # cut: argument
        else:
            h = shard.rpc_sync().forward(h + shift.value)
        if "item" in mistakes:
            scale = ps.rpc_sync().scale(x).item()  # cut: item
        else:
            scale = ps.rpc_sync().scale(x)
        loss = head(h).sum() * scale
        # not cuts: each of these tensors also goes on into the loss
        logged = loss.item()
        norm = h.sum().item()
        with torch.no_grad():
            probe = head(h).mean()
        del logged, norm, probe
        dist_autograd.backward(context_id, [loss])
        missing = (ps.rpc_sync().no_gradient_of(context_id)
                   + shard.rpc_sync().no_gradient_of(context_id)
                   + no_gradient(head, "trainer.head", context_id)
                   + no_gradient(shift, "trainer.shift", context_id))
        opt.step(context_id)
    return missing


def train(mistakes, steps):
    ps = rpc.remote("ps", Owned, args=(ParameterServer, "ps", mistakes))
    shard = rpc.remote("shard", Owned, args=(Shard, "shard", mistakes))
    torch.manual_seed(2)
    head = nn.Linear(4, 1)
    shift = Shift()
    params = (ps.rpc_sync().param_rrefs() + shard.rpc_sync().param_rrefs() + param_rrefs(head)
              + param_rrefs(shift))
    opt = DistributedOptimizer(torch.optim.SGD, params, lr=0.05)
    ids = torch.tensor([1, 2, 3])
    x = torch.randn(3, 4)
    early = ps.rpc_sync().embed(ids) if "outside" in mistakes else None  # cut: outside
    missing = set()
    for k in range(steps):
        got = step(mistakes, ps, shard, head, shift, opt, ids, x, early)
        missing = set(got) if k == 0 else missing & set(got)
    return ", ".join(sorted(missing)) or "-"


class Owned:
    """A module of the owner's, with what the trainer asks of it over RPC."""

    def __init__(self, cls, prefix, mistakes):
        self.module, self.prefix = cls(mistakes), prefix

    def param_rrefs(self):
        return param_rrefs(self.module)

    def no_gradient_of(self, context_id):
        return no_gradient(self.module, self.prefix, context_id)

    def embed(self, ids):
        return self.module.embed(ids)

    def forward(self, x, skip_fc=False):
        return self.module(x, skip_fc) if skip_fc else self.module(x)

    def fc_parameters(self):
        return self.module.fc_parameters()

    def forward_shifted(self, h, shift):
        return self.module.forward_shifted(h, shift)

    def scale(self, x):
        return self.module.scale(x)


def run_worker(rank, mistakes, steps):
    options = rpc.TensorPipeRpcBackendOptions(
        init_method=os.environ.get("RPC_INIT_METHOD", "tcp://127.0.0.1:29500"),
        rpc_timeout=float(os.environ.get("CUTS_RPC_TIMEOUT", "60")))
    name = ("trainer", "ps", "shard")[rank]
    rpc.init_rpc(name, rank=rank, world_size=3, rpc_backend_options=options)
    if rank == 0:
        if "all" in mistakes:
            for group in ("none", *GROUPS, *",".join(GROUPS).split(",")):
                print(f"{group}: no gradient: {train(set(group.split(',')), steps)}",
                      flush=True)
        else:
            print(f"no gradient: {train(mistakes, steps)}", flush=True)
    rpc.shutdown()


if __name__ == "__main__":
    mp.start_processes(run_worker, args=(set(sys.argv[1].split(",")),
                                         int(sys.argv[2]) if len(sys.argv) > 2 else 2),
                       nprocs=3, join=True, start_method="fork")
