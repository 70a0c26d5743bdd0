"""Baseline for B2/B4: scenarios/pipeline.yaml written as a plain torch.distributed.rpc script.

    python bench/baseline_pipeline.py [--micro 200] [--depth 8] [--width 8] [--json]

The same program as the scenario, without distviz: ``torch.multiprocessing.spawn`` starts 4
fresh Python processes (stage0..stage3), each holding ``depth`` weights of shape
``(width, width)`` as leaves; stage0 pushes ``micro`` microbatches of shape ``(2, width)``
through ``tanh(h @ w)`` layers on every stage (``rpc_sync`` to the next stage), sums the losses
and runs one ``dist_autograd.backward``. ``--json`` prints ``{"forward_s", "backward_s"}``
measured on stage0 (``backward_s`` is PyTorch's own backward on that graph, no hooks).
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

STAGES = ["stage0", "stage1", "stage2", "stage3"]
ws: list[torch.Tensor] = []     # this stage's weights (set in each process by ``run``)


def make_weights(n: int, width: int) -> list[torch.Tensor]:
    return [torch.randn((width, width), requires_grad=True) for _ in range(n)]


def stage_forward(x: torch.Tensor) -> torch.Tensor:
    h = x
    for w in ws:
        h = torch.tanh(torch.matmul(h, w))
    return h


def run(rank: int, init_method: str, result_path: str, micro: int, depth: int,
        width: int) -> None:
    """One stage: make its weights, init RPC; stage0 drives forward + dist backward."""
    global ws
    os.environ["TP_SOCKET_IFNAME"] = "lo"
    torch.manual_seed(rank)
    ws = make_weights(depth, width)
    opts = rpc.TensorPipeRpcBackendOptions(init_method=init_method)
    rpc.init_rpc(STAGES[rank], rank=rank, world_size=len(STAGES), rpc_backend_options=opts)
    if rank == 0:
        with dist_autograd.context() as cid:
            t0 = time.perf_counter()
            losses = []
            for _ in range(micro):
                h = stage_forward(torch.rand((2, width)))
                for s in range(1, len(STAGES)):
                    h = rpc.rpc_sync(STAGES[s], stage_forward, args=(h,))
                losses.append(h.sum())
            loss = torch.stack(losses).sum()
            t1 = time.perf_counter()
            dist_autograd.backward(cid, [loss])
            t2 = time.perf_counter()
            assert all(w in dist_autograd.get_gradients(cid) for w in ws)
        with open(result_path, "w", encoding="utf-8") as fh:
            json.dump({"forward_s": t1 - t0, "backward_s": t2 - t1}, fh)
    rpc.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--micro", type=int, default=200)
    parser.add_argument("--depth", type=int, default=8)
    parser.add_argument("--width", type=int, default=8)
    parser.add_argument("--json", action="store_true", help="print the timings as JSON")
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench-baseline-")
    try:
        result = os.path.join(tmp, "result.json")
        mp.spawn(run, args=("file://" + os.path.join(tmp, "store"), result, args.micro,
                            args.depth, args.width), nprocs=len(STAGES), join=True)
        with open(result, encoding="utf-8") as fh:
            out: dict[str, Any] = json.load(fh)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        print(json.dumps(out))


if __name__ == "__main__":
    main()
