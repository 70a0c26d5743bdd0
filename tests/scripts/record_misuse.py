"""``distviz.record`` called where there is no graph to record, with torch RPC written by hand.

Usage: python tests/scripts/record_misuse.py OUT.json. Writes, for each misuse, the class and
the message of what ``distviz.record`` raised (or ``null`` when it returned a trace).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp

import distviz


def my_add(t1: torch.Tensor, t2: torch.Tensor) -> torch.Tensor:
    return torch.add(t1, t2)


def forward() -> torch.Tensor:
    t1 = torch.rand((3, 3), requires_grad=True)
    t2 = torch.rand((3, 3), requires_grad=True)
    t3 = rpc.rpc_sync("worker1", my_add, args=(t1, t2))
    return torch.mul(t3, t1).sum()


def attempt(fn: Callable[[], Any]) -> list[str] | None:
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - the point is to see what it raises
        return [type(exc).__name__, str(exc)]
    return None


def misuses() -> dict[str, list[str] | None]:
    found: dict[str, list[str] | None] = {}
    with dist_autograd.context() as cid:
        loss = forward()
        found["in_context"] = attempt(lambda: distviz.record(cid, [loss]))
        dist_autograd.backward(cid, [loss])
        found["after_backward"] = attempt(lambda: distviz.record(cid, [loss]))
    found["after_the_context"] = attempt(lambda: distviz.record(cid, [loss]))
    loss = forward()  # outside any context: the RPC adds no send/recv pair
    with dist_autograd.context() as cid:
        found["forward_outside"] = attempt(lambda: distviz.record(cid, [loss]))
    with dist_autograd.context():
        loss = forward()
    with dist_autograd.context() as cid:
        found["other_context"] = attempt(lambda: distviz.record(cid, [loss]))
    return found


def worker(rank: int, init_file: str, out: str) -> None:
    torch.set_num_interop_threads(1)
    os.environ["TP_SOCKET_IFNAME"] = "lo"
    opts = rpc.TensorPipeRpcBackendOptions(init_method=f"file://{init_file}", _transports=["uv"])
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=2, rpc_backend_options=opts)
    if rank == 0:
        with open(out, "w", encoding="utf-8") as fh:
            json.dump(misuses(), fh)
    rpc.shutdown()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(worker, args=(os.path.join(tmp, "rdv"), sys.argv[1]), nprocs=2)
