"""The design-note example written by hand with torch RPC, recorded with ``distviz.record``.

Usage: python tests/scripts/design_note_api.py OUT.json (the second iteration goes to OUT.json.2)
"""

from __future__ import annotations

import os
import sys
import tempfile

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp

import distviz


def my_add(t1: torch.Tensor, t2: torch.Tensor) -> torch.Tensor:
    return torch.add(t1, t2)


def worker(rank: int, init_file: str, out: str) -> None:
    torch.set_num_interop_threads(1)
    os.environ["TP_SOCKET_IFNAME"] = "lo"
    opts = rpc.TensorPipeRpcBackendOptions(init_method=f"file://{init_file}", _transports=["uv"])
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=2, rpc_backend_options=opts)
    if rank == 0:
        for iteration in range(2):  # a training loop records every iteration
            with dist_autograd.context() as context_id:
                t1 = torch.rand((3, 3), requires_grad=True)
                t2 = torch.rand((3, 3), requires_grad=True)
                t3 = rpc.rpc_sync("worker1", my_add, args=(t1, t2))
                t4 = torch.rand((3, 3), requires_grad=True)
                t5 = torch.mul(t3, t4)
                loss = t5.sum()
                trace = distviz.record(context_id, [loss],
                                       names={"t1": t1, "t2": t2, "t3": t3, "t4": t4, "t5": t5,
                                              "loss": loss})
                trace.save(out if iteration == 0 else out + ".2")
                dist_autograd.backward(context_id, [loss])
    rpc.shutdown()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(worker, args=(os.path.join(tmp, "rdv"), sys.argv[1]), nprocs=2)
