"""Baseline for B1: scenarios/design_note.yaml written as a plain torch.distributed.rpc script.

    python bench/baseline_design_note.py [--json]

What a user writes without distviz: ``torch.multiprocessing.spawn`` starts 2 fresh Python
processes (each pays its own ``import torch``), they rendezvous through a file store, connect over
TensorPipe on the loopback interface, worker0 runs ``t5 = (t1 + t2) * t4`` with the addition done
on worker1 by ``rpc_sync``, calls ``dist_autograd.backward`` on ``t5.sum()``, and both shut down.
``--json`` prints ``{"forward_s", "backward_s"}`` measured on worker0.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from typing import Any

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp

WORKERS = ["worker0", "worker1"]


def my_add(t1: torch.Tensor, t2: torch.Tensor) -> torch.Tensor:
    return torch.add(t1, t2)


def run(rank: int, init_method: str, result_path: str) -> None:
    """One worker: init RPC, worker0 drives forward + dist backward, everyone shuts down."""
    os.environ["TP_SOCKET_IFNAME"] = "lo"
    torch.manual_seed(rank)
    opts = rpc.TensorPipeRpcBackendOptions(init_method=init_method)
    rpc.init_rpc(WORKERS[rank], rank=rank, world_size=len(WORKERS), rpc_backend_options=opts)
    if rank == 0:
        with dist_autograd.context() as cid:
            t0 = time.perf_counter()
            t1 = torch.rand((3, 3), requires_grad=True)
            t2 = torch.rand((3, 3), requires_grad=True)
            t3 = rpc.rpc_sync("worker1", my_add, args=(t1, t2))
            t4 = torch.rand((3, 3), requires_grad=True)
            t5 = torch.mul(t3, t4)
            loss = t5.sum()
            t1_ = time.perf_counter()
            dist_autograd.backward(cid, [loss])
            t2_ = time.perf_counter()
            grads = dist_autograd.get_gradients(cid)
            assert t1 in grads and t4 in grads
        with open(result_path, "w", encoding="utf-8") as fh:
            json.dump({"forward_s": t1_ - t0, "backward_s": t2_ - t1_}, fh)
    rpc.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the timings as JSON")
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench-baseline-")
    try:
        result = os.path.join(tmp, "result.json")
        mp.spawn(run, args=("file://" + os.path.join(tmp, "store"), result),
                 nprocs=len(WORKERS), join=True)
        with open(result, encoding="utf-8") as fh:
            out: dict[str, Any] = json.load(fh)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        print(json.dumps(out))


if __name__ == "__main__":
    main()
