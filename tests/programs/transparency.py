"""Small RPC programs that call ``dist_autograd.backward`` in unusual ways, for the tests that
``distviz trace`` changes nothing a program sees: each one logs what every call returned or
raised, and the gradients ``get_gradients`` holds, to a file, and exits with status 7.

Usage: python transparency.py MODE OUT_FILE, with MODE one of
  invalid-args   wrong arguments to backward (PyTorch's test_backward_invalid_args), then a
                 good backward in the same context
  dummy-context  backward and get_gradients with a context id that does not exist, then a good
                 backward
  many-passes    105 passes with retain_graph=True in one context (more than distviz records)
  after-failed   a pass that raises in a custom Function, then passes after it
  async          an RPC to an @rpc.functions.async_execution function that calls back, then
                 the backward through it
  script         TorchScript: a scripted backward and get_gradients, RPCs made from scripted
                 code (rpc_async, rpc_sync, remote), and a torch.jit.trace of a function that
                 calls backward
"""

import os
import sys

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp

LOG: list = []


def log(what, fn):
    """Call ``fn`` and log what it returned or raised (type and message, without the C++
    frames, whose addresses differ from one process to the next)."""
    try:
        value = fn()
    except Exception as exc:  # noqa: BLE001 - the point is to see it
        text = " ".join(str(exc).split()).split(" Exception raised from ")[0]
        LOG.append(f"{what}: raised {type(exc).__name__}: {text}")
        return None
    LOG.append(f"{what}: returned {value!r}")
    return value


def grads(context_id, label):
    got = dist_autograd.get_gradients(context_id)
    sums = sorted(repr(round(float(g.double().sum()), 9)) for g in got.values())
    LOG.append(f"{label}: get_gradients {len(got)} tensors, sums {sums}")


def scale(x):
    return x * 3


class Flaky(torch.autograd.Function):
    """Doubles; its backward raises the first time only."""

    calls = 0

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        Flaky.calls += 1
        if Flaky.calls == 1:
            raise ValueError("Flaky.backward refuses the first gradient")
        return grad * 2


@rpc.functions.async_execution
def add_then_scale(to, x, y):
    """On worker1: call back ``to`` for the sum, and scale it when it arrives."""
    return rpc.rpc_async(to, torch.add, args=(x, y)).then(lambda fut: fut.wait() * 2)


@torch.jit.script
def script_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.add(x, y)


@torch.jit.script
def script_backward(context_id: int, loss: torch.Tensor):
    dist_autograd.backward(context_id, [loss])


@torch.jit.script
def script_gradients(context_id: int) -> dict[torch.Tensor, torch.Tensor]:
    return dist_autograd.get_gradients(context_id)


@torch.jit.script
def script_rpcs(to: str, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = rpc.rpc_async(to, script_add, (x, y)).wait()
    b = rpc.rpc_sync(to, script_add, (a, y))
    return rpc.remote(to, script_add, (b, x)).to_here()


def forward(w, x):
    h = w * x
    y = rpc.rpc_sync("worker1", scale, args=(h,))
    return (y * w).sum()


def invalid_args(w, x):
    with dist_autograd.context() as context_id:
        loss = forward(w, x)
        log("backward(ctx, None)", lambda: dist_autograd.backward(context_id, None))
        log("backward(None, None)", lambda: dist_autograd.backward(None, None))
        log("backward(ctx, [])", lambda: dist_autograd.backward(context_id, []))
        log("backward(ctx, [no grad])",
            lambda: dist_autograd.backward(context_id, [torch.rand(3, 3)]))
        log("backward(ctx, [not scalar])",
            lambda: dist_autograd.backward(context_id, [torch.rand(3, 3, requires_grad=True)]))
        log("backward(ctx, [leaf])",
            lambda: dist_autograd.backward(context_id, [torch.rand(1, requires_grad=True)]))
        log("backward(ctx, loss)", lambda: dist_autograd.backward(context_id, loss))
        log("backward(ctx, (loss,), 'yes')",
            lambda: dist_autograd.backward(context_id, (loss,), "yes"))
        log("backward('ctx', [loss])", lambda: dist_autograd.backward(str(context_id), [loss]))
        log("backward(ctx, [loss])", lambda: dist_autograd.backward(context_id, [loss]))
        grads(context_id, "after the good backward")


def dummy_context(w, x):
    with dist_autograd.context() as context_id:
        loss = forward(w, x)
        log("backward(ctx + 1000, [loss])",
            lambda: dist_autograd.backward(context_id + 1000, [loss], retain_graph=True))
        log("get_gradients(ctx + 1000)", lambda: dist_autograd.get_gradients(context_id + 1000))
        log("backward(ctx, [loss])", lambda: dist_autograd.backward(context_id, [loss]))
        grads(context_id, "after the good backward")


def many_passes(w, x):
    with dist_autograd.context() as context_id:
        loss = forward(w, x)
        for k in range(1, 106):
            log(f"pass {k}", lambda: dist_autograd.backward(context_id, [loss], retain_graph=True))
            if k in (1, 100, 101, 105):
                grads(context_id, f"after pass {k}")


def after_failed(w, x):
    with dist_autograd.context() as context_id:
        h = rpc.rpc_sync("worker1", scale, args=(w * x,))
        loss = Flaky.apply(h).sum()
        for k in range(1, 4):
            log(f"pass {k}", lambda: dist_autograd.backward(context_id, [loss], retain_graph=True))
            grads(context_id, f"after pass {k}")


def async_call(w, x):
    with dist_autograd.context() as context_id:
        y = log("rpc_sync(add_then_scale)", lambda: rpc.rpc_sync(
            "worker1", add_then_scale, args=("worker0", w, x)))
        loss = (y * w).sum()
        LOG.append(f"loss {round(float(loss), 9)!r}")
        log("backward(ctx, [loss])", lambda: dist_autograd.backward(context_id, [loss]))
        grads(context_id, "after the backward")


def scripted(w, x):
    LOG.append(f"compiled: {'aten::dist_backward' in str(script_backward.graph)} "
               f"{'aten::get_gradients' in str(script_gradients.graph)} "
               f"{'prim::rpc_async' in str(script_rpcs.graph)}")
    with dist_autograd.context() as context_id:
        loss = forward(w, x)
        log("script_backward(ctx, loss)", lambda: script_backward(context_id, loss))
        grads(context_id, "after the scripted backward")
        log("len(script_gradients(ctx))", lambda: len(script_gradients(context_id)))
    with dist_autograd.context() as context_id:
        y = log("script_rpcs(worker1, w, x)", lambda: script_rpcs("worker1", w, x))
        loss = (y * w).sum()
        log("backward(ctx, [loss])", lambda: dist_autograd.backward(context_id, [loss]))
        grads(context_id, "after the backward through scripted RPCs")
    with dist_autograd.context() as context_id:
        def step(w, x):
            loss = (w * x).sum()
            dist_autograd.backward(context_id, [loss])
            return loss * 2
        made = []

        def trace_step():
            made.append(torch.jit.trace(step, (w, x), check_trace=False))
            return type(made[0]).__name__
        log("torch.jit.trace(step)", trace_step)
        grads(context_id, "after the traced backward")
        if made:
            LOG.append("traced graph: " + " ".join(str(made[0].graph).split()))
            log("traced(w, x)", lambda: round(float(made[0](w, x).detach()), 6))
        grads(context_id, "after the traced function ran")


MODES = {"invalid-args": invalid_args, "dummy-context": dummy_context,
         "many-passes": many_passes, "after-failed": after_failed, "async": async_call,
         "script": scripted}


def run_worker(rank, mode, out):
    options = rpc.TensorPipeRpcBackendOptions(
        init_method=os.environ.get("RPC_INIT_METHOD", "tcp://127.0.0.1:29500"))
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=2, rpc_backend_options=options)
    if rank == 0:
        torch.manual_seed(0)
        w = torch.rand(4, requires_grad=True)
        x = torch.rand(4, requires_grad=True)
        MODES[mode](w, x)
        with open(out, "w", encoding="utf-8") as fh:
            fh.write("\n".join(LOG) + "\n")
    rpc.shutdown()


if __name__ == "__main__":
    mp.start_processes(run_worker, args=(sys.argv[1], sys.argv[2]), nprocs=2, join=True, start_method="fork")
    sys.exit(7)
