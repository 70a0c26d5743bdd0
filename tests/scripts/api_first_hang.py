"""distviz.backward on the first context of a process, whose forward ran before distviz was
used: a predicted hang still names the RPC by its call site and variable, as distviz trace does.

Usage: python tests/scripts/api_first_hang.py OUT_DIR
Prints "hang: predicted: <explanation>" (or "hang: not predicted").
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


def mult(x: torch.Tensor) -> torch.Tensor:
    return x * 3


def worker(rank: int, init_file: str, out: str) -> None:
    torch.set_num_interop_threads(1)
    os.environ["TP_SOCKET_IFNAME"] = "lo"
    opts = rpc.TensorPipeRpcBackendOptions(init_method=f"file://{init_file}", _transports=["uv"])
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=2, rpc_backend_options=opts)
    if rank == 0:
        head = torch.nn.Linear(3, 1)
        w = torch.rand(3, requires_grad=True)
        with dist_autograd.context() as context_id:
            y = rpc.rpc_sync("worker1", mult, args=(w * 2,))
            side = rpc.rpc_sync("worker1", mult, args=(w,))
            loss = head(y).sum()
            try:
                distviz.backward(context_id, [loss], path=os.path.join(out, "first.json"))
                print("hang: not predicted", flush=True)
            except distviz.HangPredicted as exc:
                print(f"hang: predicted: {' '.join(str(exc).split())}", flush=True)
        del side
    rpc.shutdown()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(worker, args=(os.path.join(tmp, "rdv"), sys.argv[1]), nprocs=2)
