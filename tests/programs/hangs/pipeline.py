"""A pipeline of two shards behind RRefs, fed micro-batches, in the style of PyTorch's tutorial
"Distributed Pipeline Parallelism Using RPC", with the mistakes that make FAST mode hang: an RPC
result that the loss does not use leaves a send on the shards whose gradient never comes.

Usage: python pipeline.py MODE [BATCHES]

* ``correct``: every micro-batch's output is in the loss; prints each owner's gradients;
* ``skip-first``: micro-batch 0 is left out of the loss (``range(1, len(outputs))``): hangs;
* ``skip-first-late``: the same at the last of BATCHES steps only (a context ``--contexts first``
  does not record: distviz's watch explains it live);
* ``validate``: a validation forward runs inside the training context, its result not in the
  loss: hangs;
* ``validate-no-grad``: the same validation forward under ``torch.no_grad()``, still inside the
  training context: hangs too (the shards' forward runs with grad enabled on their RPC threads);
* ``validate-after``: the validation forward after the backward, outside the training context:
  completes;
* ``item``: the training loss is printed from ``model(inputs)`` called again and turned into a
  Python number with ``.item()`` inside the context: hangs.

With ``WATCHDOG_S`` set, a backward that has not returned after that many seconds prints
``backward did not return after N s`` and ends the process (exit status 3): a plain run's truth
for a hang, without waiting for PyTorch's RPC timeout.
"""

import os
import sys
import threading

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp
import torch.nn as nn
from torch.distributed.rpc import RRef


class Shard1(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self._lock = threading.Lock()
        self.seq = nn.Sequential(nn.Linear(8, 16), nn.ReLU())

    def forward(self, x_rref):
        x = x_rref.to_here()
        with self._lock:
            out = self.seq(x)
        return out

    def parameter_rrefs(self):
        return [RRef(p) for p in self.parameters()]


class Shard2(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(2)
        self._lock = threading.Lock()
        self.fc = nn.Linear(16, 4)

    def forward(self, x_rref):
        x = x_rref.to_here()
        with self._lock:
            out = self.fc(x)
        return out

    def parameter_rrefs(self):
        return [RRef(p) for p in self.parameters()]


class DistNet(nn.Module):
    """Two shards behind RRefs; one output per micro-batch."""

    def __init__(self, split_size, workers):
        super().__init__()
        self.split_size = split_size
        self.p1_rref = rpc.remote(workers[0], Shard1)
        self.p2_rref = rpc.remote(workers[1], Shard2)

    def forward(self, xs):
        out_futures = []
        for x in iter(xs.split(self.split_size, dim=0)):
            x_rref = RRef(x)
            y_rref = self.p1_rref.remote().forward(x_rref)
            z_fut = self.p2_rref.rpc_async().forward(y_rref)
            out_futures.append(z_fut)
        return torch.futures.wait_all(out_futures)

    def parameter_rrefs(self):
        remote_params = []
        remote_params.extend(self.p1_rref.remote().parameter_rrefs().to_here())
        remote_params.extend(self.p2_rref.remote().parameter_rrefs().to_here())
        return remote_params


def owner_gradients(context_id):
    """The gradients this worker's leaves got in ``context_id``, as sums (the plain truth)."""
    grads = dist_autograd.get_gradients(context_id)
    return sorted(round(float(g.sum()), 4) for g in grads.values())


def backward(context_id, loss):
    seconds = os.environ.get("WATCHDOG_S")
    timer = None
    if seconds:
        def give_up():
            print(f"backward did not return after {seconds} s", flush=True)
            os._exit(3)
        timer = threading.Timer(float(seconds), give_up)
        timer.daemon = True
        timer.start()
    dist_autograd.backward(context_id, [loss])
    if timer is not None:
        timer.cancel()


def train(mode, batches):
    model = DistNet(2, ["worker1", "worker2"])
    loss_fn = nn.MSELoss()
    # as the tutorial does for its DistributedOptimizer; it also asks each RRef's type before
    # the first context (an RRef whose type is not known yet makes its first rpc_async() from
    # an RPC thread, outside the context: the result then gets no RecvRpcBackward at all)
    params = model.parameter_rrefs()
    torch.manual_seed(0)
    for step in range(batches):
        late = mode == "skip-first-late" and step == batches - 1
        first = 1 if mode == "skip-first" or late else 0
        inputs, labels = torch.randn(6, 8), torch.randn(6, 4)
        val_inputs = torch.randn(4, 8)
        with dist_autograd.context() as context_id:
            outputs = model(inputs)
            targets = labels.split(2)
            loss = sum(loss_fn(outputs[i], targets[i]) for i in range(first, len(outputs)))
            if mode == "validate":
                val_outputs = model(val_inputs)
            if mode == "validate-no-grad":
                with torch.no_grad():
                    val_outputs = model(val_inputs)
            if mode == "item":
                print(f"loss {loss_fn(torch.cat(model(inputs)), labels).item():.4f}")
            backward(context_id, loss)
            grads = [rpc.rpc_sync(w, owner_gradients, args=(context_id,))
                     for w in ("worker1", "worker2")]
            print(f"step {step} gradients {grads} of {len(params)} parameters", flush=True)
        if mode == "validate-after":
            with torch.no_grad():
                val_outputs = model(val_inputs)
            print(f"step {step} validation {float(torch.cat(val_outputs).sum()):.4f}",
                  flush=True)


def run_worker(rank, world_size, mode, batches):
    options = rpc.TensorPipeRpcBackendOptions(
        init_method=os.environ.get("RPC_INIT_METHOD", "tcp://127.0.0.1:29500"))
    if rank == 0:
        rpc.init_rpc("master", rank=rank, world_size=world_size, rpc_backend_options=options)
        train(mode, batches)
    else:
        rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world_size,
                     rpc_backend_options=options)
    rpc.shutdown()


if __name__ == "__main__":
    mode = sys.argv[1]
    batches = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    mp.start_processes(run_worker, args=(3, mode, batches), nprocs=3, join=True, start_method="fork")
