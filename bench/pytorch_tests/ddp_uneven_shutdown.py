"""PyTorch's ``DdpComparisonTest.test_ddp_comparison_uneven_inputs`` as a plain program, to time
``rpc.shutdown`` with and without distviz (``bench/README.md``, P1: the DDP comparison time-out).

    python bench/pytorch_tests/ddp_uneven_shutdown.py PORT OUT_FILE
    distviz trace -o DIR -- python bench/pytorch_tests/ddp_uneven_shutdown.py PORT OUT_FILE

Four workers, RPC and gloo on 127.0.0.1 (ports PORT and PORT + 1), DDP with ``join`` and
uneven inputs (even ranks 3 inputs, odd ranks 1), each input in a dist autograd context and then
through local autograd, gradients compared, as the test does. Each rank appends to OUT_FILE when
it starts, when RPC and gloo are ready, when it has trained, and how long ``rpc.shutdown`` took.
"""

import sys
import time

import torch
import torch.distributed as dist
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel

WORLD = 4


def note(out: str, rank: int, what: str) -> None:
    with open(out, "a", encoding="utf-8") as fh:
        fh.write(f"{time.strftime('%H:%M:%S')} rank {rank} {what}\n")


def compare_step(ddp: DistributedDataParallel, net: nn.Module, x: torch.Tensor) -> None:
    """One input as the test does: through dist autograd in a context, then through local
    autograd; the two gradients of every parameter must be equal."""
    with dist_autograd.context() as cid:
        loss = ddp(x).norm()
        dist_autograd.backward(cid, [loss])
        grads = dist_autograd.get_gradients(cid)
    ddp.zero_grad()
    ddp(x).norm().backward()
    assert all(torch.allclose(grads[p], p.grad) for p in net.parameters())


def run(rank: int, port: int, out: str) -> None:
    note(out, rank, "started")
    torch.manual_seed(rank)
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=WORLD,
                 rpc_backend_options=rpc.TensorPipeRpcBackendOptions(
                     init_method=f"tcp://127.0.0.1:{port}"))
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port + 1}",
                            world_size=WORLD, rank=rank)
    note(out, rank, "rpc and gloo ready")
    net = nn.Linear(2, 3)
    ddp = DistributedDataParallel(net)
    inputs = [torch.rand((3, 2)) for _ in range(3 if rank % 2 == 0 else 1)]
    with ddp.join(True):
        for x in inputs:
            compare_step(ddp, net, x)
    note(out, rank, "trained")
    dist.destroy_process_group()
    t = time.monotonic()
    rpc.shutdown()
    note(out, rank, f"shutdown {time.monotonic() - t:.2f}s")


if __name__ == "__main__":
    mp.spawn(run, args=(int(sys.argv[1]), sys.argv[2]), nprocs=WORLD, join=True)
