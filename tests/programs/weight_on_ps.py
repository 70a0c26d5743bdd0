"""``x @ W`` with ``x`` on worker0 and ``W`` on worker1, in two ways:

* ``zero-grads``: gradients changed in place right after the backward. The program zeroes every
  gradient of its context, on both workers, as soon as ``dist_autograd.backward`` returns (an
  optimizer step could scale or clip them the same way). What PyTorch's backward produced is
  what distviz must compare, so it reads the gradients before the backward returns to the
  program: the context agrees, and the program still sees the zeros it wrote.
* ``held``: node references a traced program's workers still hold after its contexts end.
  Five contexts, each recorded (``--contexts all``), then every worker says how many recorded
  contexts distviz keeps there (-1 when distviz is not loaded). The initiator lets go of a
  context when it ends; the other workers at their next recording, once PyTorch has released
  the context there: at most the last context is left.

Usage: python weight_on_ps.py zero-grads|held
"""

import os
import sys

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


def held():
    contexts = sys.modules.get("distviz.recorder.contexts")
    return -1 if contexts is None else len(contexts.recorded_contexts())


def zero_after_backward():
    x = torch.rand((3, 3), requires_grad=True)
    with dist_autograd.context() as context_id:
        y = rpc.rpc_sync("worker1", times_weight, args=(x,))
        dist_autograd.backward(context_id, [y.sum()])
        grads = dist_autograd.get_gradients(context_id)
        grads[x].zero_()
        rpc.rpc_sync("worker1", zero_grads, args=(context_id,))
        assert bool((dist_autograd.get_gradients(context_id)[x] == 0).all())


def five_contexts():
    for _ in range(5):
        x = torch.rand((3, 3), requires_grad=True)
        with dist_autograd.context() as context_id:
            y = rpc.rpc_sync("worker1", times_weight, args=(x,))
            dist_autograd.backward(context_id, [y.sum()])
    print(f"held: worker0 {held()} worker1 {rpc.rpc_sync('worker1', held)}", flush=True)


def run_worker(rank, world_size, mode):
    options = rpc.TensorPipeRpcBackendOptions(
        init_method=os.environ.get("RPC_INIT_METHOD", "tcp://127.0.0.1:29500"))
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world_size, rpc_backend_options=options)
    if rank == 0:
        {"zero-grads": zero_after_backward, "held": five_contexts}[mode]()
    rpc.shutdown()


if __name__ == "__main__":
    mp.start_processes(run_worker, args=(2, sys.argv[1]), nprocs=2, join=True, start_method="fork")
