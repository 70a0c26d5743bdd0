"""PyTorch's own error texts, produced for real: each error distviz reads the text of.

Usage: python tests/scripts/torch_errors.py OUT.json. Three RPC workers (``worker2`` dies last,
to see what a call to a gone worker raises); writes, for each case, ``[type name, str(exc)]`` of
what PyTorch raised (``null`` when nothing did).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp

#: A context id no worker has (worker 0's first id is 0; worker ids sit in the top 16 bits).
NO_SUCH_CONTEXT = 123456


class Fails(torch.autograd.Function):
    """The identity whose backward raises, on the worker that ran it."""

    @staticmethod
    def forward(ctx: Any, t: torch.Tensor) -> torch.Tensor:
        return t.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        raise ValueError("the backward of Fails raised")


def fails_remotely(t: torch.Tensor) -> torch.Tensor:
    return Fails.apply(t)


def raises() -> None:
    raise ValueError("raised on the callee")


def raises_two_hops_away() -> None:
    rpc.rpc_sync("worker0", raises)


def end_process() -> None:
    os._exit(0)


DONE = threading.Event()


def done() -> None:
    DONE.set()


def attempt(fn: Callable[[], Any]) -> list[str] | None:
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - the point is to see what it raises
        return [type(exc).__name__, str(exc)]
    return None


def twice_without_retain_graph() -> None:
    x = torch.rand(3, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    y.backward()


def distributed_backward_twice() -> None:
    with dist_autograd.context() as cid:
        x = torch.rand(3, requires_grad=True)
        y = rpc.rpc_sync("worker1", torch.mul, args=(x, x)).sum()
        dist_autograd.backward(cid, [y])
        dist_autograd.backward(cid, [y])


def backward_raises_on_another_worker() -> None:
    with dist_autograd.context() as cid:
        x = torch.rand(3, requires_grad=True)
        y = rpc.rpc_sync("worker1", fails_remotely, args=(x,)).sum()
        dist_autograd.backward(cid, [y])


def too_much_memory() -> None:
    torch.empty(1 << 50, dtype=torch.uint8)


def cases() -> dict[str, list[str] | None]:
    x = torch.rand(3, requires_grad=True)
    found = {
        "no_context": attempt(lambda: dist_autograd.backward(NO_SUCH_CONTEXT, [(x * x).sum()])),
        "no_context_gradients": attempt(lambda: dist_autograd.get_gradients(NO_SUCH_CONTEXT)),
        "no_current_context": attempt(dist_autograd._current_context),
        "rpc_timeout": attempt(lambda: rpc.rpc_sync("worker1", time.sleep, args=(2.0,),
                                                    timeout=0.2)),
        "remote": attempt(lambda: rpc.rpc_sync("worker1", raises)),
        "remote_two_hops": attempt(lambda: rpc.rpc_sync("worker1", raises_two_hops_away)),
        "freed": attempt(twice_without_retain_graph),
        "freed_distributed": attempt(distributed_backward_twice),
        "error_on_node": attempt(backward_raises_on_another_worker),
        "out_of_memory": attempt(too_much_memory),
    }
    rpc.rpc_async("worker2", end_process)
    time.sleep(1.0)
    found["worker_gone"] = attempt(lambda: rpc.rpc_sync("worker2", time.sleep, args=(0.0,),
                                                        timeout=10.0))
    return found


def worker(rank: int, init_file: str, out: str) -> None:
    torch.set_num_interop_threads(1)
    os.environ["TP_SOCKET_IFNAME"] = "lo"
    opts = rpc.TensorPipeRpcBackendOptions(init_method=f"file://{init_file}", _transports=["uv"],
                                           num_worker_threads=8)
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=3, rpc_backend_options=opts)
    if rank == 0:
        with open(out, "w", encoding="utf-8") as fh:
            json.dump(cases(), fh, indent=1)
        rpc.rpc_async("worker1", done)
        time.sleep(0.5)
    elif rank == 1:
        DONE.wait(120)
    else:
        time.sleep(120)   # until worker0 ends it (end_process)
    # worker2 is gone: a graceful shutdown would wait for it, and a forced one races with the
    # other worker's; what was found is written, so each process just ends
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(worker, args=(os.path.join(tmp, "rdv"), sys.argv[1]), nprocs=3)
