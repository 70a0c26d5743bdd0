"""distviz.backward and distviz.record(..., observe=True) in a hand-written RPC program.

Usage: python tests/scripts/api_observe.py OUT_DIR
  iteration 1: distviz.backward(context_id, [loss], path=OUT_DIR/backward.json)
  iteration 2: distviz.record(..., observe=True, path=OUT_DIR/record.json), then PyTorch's own
               dist_autograd.backward, which distviz observes
  iteration 3: an RPC result left unused: distviz.backward raises distviz.HangPredicted
Prints one line per iteration; exits 0 when all three behave as described.
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


class Scale(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x)


MODEL: Scale | None = None


def remote_forward(x: torch.Tensor) -> torch.Tensor:
    global MODEL
    if MODEL is None:
        MODEL = Scale()
    return MODEL(x)


def worker(rank: int, init_file: str, out: str) -> None:
    torch.set_num_interop_threads(1)
    os.environ["TP_SOCKET_IFNAME"] = "lo"
    opts = rpc.TensorPipeRpcBackendOptions(init_method=f"file://{init_file}", _transports=["uv"])
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=2, rpc_backend_options=opts)
    if rank == 0:
        # --8<-- [start:backward]
        w = torch.rand(3, requires_grad=True)
        with dist_autograd.context() as context_id:
            y = rpc.rpc_sync("worker1", remote_forward, args=(w * 2,))
            loss = y.sum()
            trace = distviz.backward(context_id, [loss], path=os.path.join(out, "backward.json"))
            print(f"backward: {trace.real['outcome']}", flush=True)
        # --8<-- [end:backward]
        with dist_autograd.context() as context_id:
            y = rpc.rpc_sync("worker1", remote_forward, args=(w * 2,))
            loss = y.sum()
            trace = distviz.record(context_id, [loss], observe=True,
                                   path=os.path.join(out, "record.json"))
            print(f"record before: {trace.real}", flush=True)
            dist_autograd.backward(context_id, [loss])
            print(f"record after: {trace.real['outcome']}", flush=True)
        with dist_autograd.context() as context_id:
            y = rpc.rpc_sync("worker1", remote_forward, args=(w * 2,))
            unused = rpc.rpc_sync("worker1", remote_forward, args=(w * 3,))  # noqa: F841
            loss = y.sum()
            try:
                distviz.backward(context_id, [loss], path=os.path.join(out, "hang.json"))
                print("hang: not predicted", flush=True)
            except distviz.HangPredicted as exc:
                print(f"hang: predicted: {exc}", flush=True)
    rpc.shutdown()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(worker, args=(os.path.join(tmp, "rdv"), sys.argv[1]), nprocs=2)
