"""PyTorch's test_backward_unused_tensors over RPC: three leaves stacked on another worker, two
slices multiplied there, the middle one never used. Its leaf's gradient is all zeros by value
(the backward of narrow fills the unused slice with zeros), not because of an unused RPC output,
so the graph alone cannot tell it is zero.

Usage: python unused_tensors.py
"""

import os

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp


def run_worker(rank, world_size):
    options = rpc.TensorPipeRpcBackendOptions(
        init_method=os.environ.get("RPC_INIT_METHOD", "tcp://127.0.0.1:29500"))
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world_size, rpc_backend_options=options)
    if rank == 0:
        t1 = torch.rand((3, 3), requires_grad=True)
        t2 = torch.rand((3, 3), requires_grad=True)
        t3 = torch.rand((3, 3), requires_grad=True)
        with dist_autograd.context() as context_id:
            s = rpc.rpc_sync("worker1", torch.stack, args=((t1, t2, t3),))
            val = rpc.rpc_sync("worker1", torch.matmul,
                               args=(torch.narrow(s, 0, 0, 1), torch.narrow(s, 0, 2, 1)))
            dist_autograd.backward(context_id, [val.sum()])
            grads = dist_autograd.get_gradients(context_id)
            assert bool((grads[t2] == 0).all()), "t2's gradient should be all zeros"
    rpc.shutdown()


if __name__ == "__main__":
    mp.start_processes(run_worker, args=(2,), nprocs=2, join=True, start_method="fork")
