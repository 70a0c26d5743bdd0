"""Node references a traced program's workers still hold after its contexts end: five
training contexts on a parameter server, each recorded (``--contexts all``), then every worker
says how many recorded contexts distviz keeps there (-1 when distviz is not loaded). The
initiator lets go of a context when it ends; the other workers at their next recording, once
PyTorch has released the context there: at most the last context is left.

Usage: python held_records.py
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


def held():
    graph = sys.modules.get("distviz.recorder.graph")
    return -1 if graph is None else len(graph._RECORDS)


def run_worker(rank, world_size):
    options = rpc.TensorPipeRpcBackendOptions(
        init_method=os.environ.get("RPC_INIT_METHOD", "tcp://127.0.0.1:29500"))
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world_size, rpc_backend_options=options)
    if rank == 0:
        for _ in range(5):
            x = torch.rand((3, 3), requires_grad=True)
            with dist_autograd.context() as context_id:
                y = rpc.rpc_sync("worker1", times_weight, args=(x,))
                dist_autograd.backward(context_id, [y.sum()])
        print(f"held: worker0 {held()} worker1 {rpc.rpc_sync('worker1', held)}", flush=True)
    rpc.shutdown()


if __name__ == "__main__":
    mp.spawn(run_worker, args=(2,), nprocs=2, join=True)
