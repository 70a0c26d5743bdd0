"""A small training loop whose backward goes wrong only late, at a data-dependent step: the
case of a long job that hangs at step 40,000 (distviz's watch, ``tests/e2e/test_watch.py``).

Usage: python late_hang.py MODE [STEPS]   (or torchrun --nproc-per-node 2 late_hang.py MODE)

* ``late``: at step 7 (of STEPS, default 10) the batch is empty of positives, and the loop
  leaves the remote call's result out of the loss: FAST mode's hang, in a context that
  ``--contexts first`` does not record;
* ``slow``: at step 3 a custom autograd Function's backward sleeps ``SLOW_SECONDS`` (default
  3): slower than a short ``--hang-timeout``, not a hang;
* ``raise``: at step 4 that Function's backward raises;
* ``raises``: at steps 2 to 9 it raises, and the loop goes on; each prints ``step K raised``;
* ``kill``: at step 5 the backward SIGKILLs worker1 before sending it its gradient;
* ``stop``: at step 5 the backward SIGSTOPs worker1 before sending it its gradient, and
  worker0 lets it go on (SIGCONT) ``STOP_SECONDS`` later (default 10): a worker that does not
  answer for a while.

Each step prints one line; the program exits 0 when every step ran.
"""

import os
import signal
import sys
import threading
import time

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp


def scale(x):
    return x * 2


class Checked(torch.autograd.Function):
    """The identity, whose backward is slow or raises at the steps the mode picks."""

    @staticmethod
    def forward(ctx, x, what):
        ctx.what = what
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        if ctx.what == "slow":
            time.sleep(float(os.environ.get("SLOW_SECONDS", "3")))
        elif ctx.what == "raise":
            raise ValueError("a bad batch reached Checked.backward")
        return grad, None


class SignalPeer(torch.autograd.Function):
    """The identity, whose backward sends signal ``sig`` to process ``pid`` (the other
    worker): SIGKILL ends it; SIGSTOP stops it, and it is continued ``STOP_SECONDS`` later."""

    @staticmethod
    def forward(ctx, x, pid, sig):
        ctx.pid, ctx.sig = pid, sig
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        os.kill(ctx.pid, ctx.sig)
        if ctx.sig == signal.SIGSTOP:
            seconds = float(os.environ.get("STOP_SECONDS", "10"))
            threading.Timer(seconds, os.kill, args=(ctx.pid, signal.SIGCONT)).start()
        else:
            time.sleep(0.5)
        return grad, None, None


def batch(step, mode):
    """The step's data: at the late step of ``late`` mode, no positive value."""
    x = torch.arange(1.0, 5.0) * step
    return -x if mode == "late" and step == 7 else x


def train(mode, steps):
    weight = torch.ones(4, requires_grad=True)
    for step in range(1, steps + 1):
        with dist_autograd.context() as context_id:
            data = batch(step, mode)
            what = {("slow", 3): "slow", ("raise", 4): "raise"}.get((mode, step), "")
            if mode == "raises" and 2 <= step <= 9:
                what = "raise"
            hidden = Checked.apply(data * weight, what)
            remote = rpc.rpc_sync("worker1", scale, args=(hidden,))
            if mode in ("kill", "stop") and step == 5:
                sig = signal.SIGKILL if mode == "kill" else signal.SIGSTOP
                remote = SignalPeer.apply(remote, rpc.rpc_sync("worker1", os.getpid), sig)
            loss = hidden.sum()
            if bool((data > 0).any()):     # a batch without positives skips the remote term
                loss = loss + remote.sum()
            try:
                dist_autograd.backward(context_id, [loss])
            except RuntimeError:
                if mode != "raises":
                    raise
                print(f"step {step} raised", flush=True)
            rpc.rpc_async("worker1", scale, args=(data,)).wait()   # as an optimizer's step
        print(f"step {step} done", flush=True)


def run_worker(rank, world_size, mode, steps):
    options = rpc.TensorPipeRpcBackendOptions(
        init_method=os.environ.get("RPC_INIT_METHOD", "tcp://127.0.0.1:29500"),
        rpc_timeout=float(os.environ.get("RPC_TIMEOUT", "60")))
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world_size, rpc_backend_options=options)
    if rank == 0:
        train(mode, steps)
    rpc.shutdown()


if __name__ == "__main__":
    mode = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    if "LOCAL_RANK" in os.environ:     # started by torchrun --nproc-per-node 2
        run_worker(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), mode, steps)
    else:
        mp.spawn(run_worker, args=(2, mode, steps), nprocs=2, join=True)
