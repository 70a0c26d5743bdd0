"""Backwards started by ``RRef.backward(context_id)`` (``tests/e2e/test_rref_backward.py``): a
trainer, a ``body`` worker and a ``head`` worker that computes the loss.

Usage: python rref_backward.py MODE [ARG...]

* ``late [BAD_STEP [STEPS]]``: each step the trainer sends its data through ``body``, asks
  ``head`` for the loss (``rpc.remote``); ``head`` calls ``rpc_sync`` back to ``body`` for
  ``extra`` and adds it to the loss, and the trainer calls ``loss_rref.backward(context_id)``.
  At step BAD_STEP (default 15, of STEPS, default 20) ``head`` leaves ``extra`` out of the
  loss: FAST mode's hang, late, through ``RRef.backward``;
* ``owner``: the trainer owns the RRef (``rpc.RRef(loss)``) and calls its ``backward``;
* ``errors``: ``RRef.backward`` from a non-owner and from the owner in the ways PyTorch
  completes or refuses (a custom backward that raises on ``head``, a root that does not
  require grad, a context that does not exist on the owner, a value that is not a tensor, a
  remote call that raised, no context id); prints each outcome (the exception's type and
  message without PyTorch's C++ backtrace, which differs from process to process) and the
  gradients in the context.

* ``api FOLDER``: ``distviz.backward(context_id, loss_rref, path=...)`` in place of
  ``loss_rref.backward(context_id)``, from a non-owner and from the owner (the Python API, not
  under ``distviz trace``); prints what each returned trace says.
* ``api-hang FOLDER``: under the Python API, the same FAST-mode hang (an RPC result left out
  of the loss, armed with ``distviz.record(..., observe=True)``) through
  ``dist_autograd.backward`` and through ``RRef.backward`` from another worker; prints what
  each raised.

``errors`` and ``api-hang`` also print each raised exception's traceback (file, line,
function per frame).

Each step or case prints one line; the program exits 0 when every one ran.
"""

import os
import sys
import traceback

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp


def through_body(x):
    return x * 2


def get_extra(h):
    return h * 3


def head_loss(h, step, bad_step):
    extra = rpc.rpc_sync("body", get_extra, args=(h,))
    loss = h.sum()
    if step != bad_step:     # at the bad step the loss leaves the remote term out
        loss = loss + extra.sum()
    return loss


def train(bad_step, steps):
    weight = torch.ones(4, requires_grad=True)
    for step in range(1, steps + 1):
        with dist_autograd.context() as context_id:
            hidden = rpc.rpc_sync("body", through_body, args=(weight * step,))
            loss_rref = rpc.remote("head", head_loss, args=(hidden, step, bad_step))
            loss_rref.backward(context_id)
            grads = dist_autograd.get_gradients(context_id)
        print(f"step {step} done: {grads[weight].tolist()}", flush=True)


def owner():
    weight = torch.ones(4, requires_grad=True)
    with dist_autograd.context() as context_id:
        hidden = rpc.rpc_sync("body", through_body, args=(weight,))
        loss = (hidden * hidden).sum()
        loss_rref = rpc.RRef(loss)
        print(f"owner backward returned {loss_rref.backward(context_id)!r}", flush=True)
        print(f"owner gradient {dist_autograd.get_gradients(context_id)[weight].tolist()}",
              flush=True)


class Refuse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        raise ValueError("Refuse.backward refuses this batch")


def head_value(h, how):
    if how == "refuse":
        return Refuse.apply(h).sum()
    if how == "no-grad":
        return h.detach().sum()
    if how == "list":
        return [h.sum()]
    if how == "raise":
        raise KeyError("head has no loss for this batch")
    return (h * h).sum()


def outcome(label, fn, args, context_id=None):
    try:
        result = fn(*args)
        said = f"returned {result!r}"
    except Exception as exc:  # noqa: BLE001 - the outcome is what is printed
        message = str(exc).split("\nException raised from")[0]
        said = f"raised {type(exc).__module__}.{type(exc).__name__}: {message!r}"
        frames = traceback.extract_tb(exc.__traceback__)
        print(f"frames {label}: " + " < ".join(
            f"{os.path.basename(f.filename)}:{f.lineno} in {f.name}" for f in frames),
            flush=True)
    grads = ""
    if context_id is not None:
        got = dist_autograd.get_gradients(context_id)
        grads = f"; gradients {sorted(g.tolist() for g in got.values())}"
    print(f"{label}: {said}{grads}", flush=True)


def errors():
    weight = torch.ones(2, requires_grad=True)
    for how in ("ok", "refuse", "no-grad", "list", "raise"):
        with dist_autograd.context() as context_id:
            hidden = rpc.rpc_sync("body", through_body, args=(weight,))
            loss_rref = rpc.remote("head", head_value, args=(hidden, how))
            outcome(f"non-owner {how}", loss_rref.backward, (context_id,), context_id)
    with dist_autograd.context() as context_id:
        loss_rref = rpc.remote("head", head_value, args=(weight * 2, "ok"))
        outcome("non-owner other context", loss_rref.backward, (context_id + 1000,))
        outcome("non-owner no context id", loss_rref.backward, ())
        outcome("non-owner retain_graph", loss_rref.backward, (context_id, True),
                context_id)
    for how in ("ok", "refuse", "no-grad"):
        with dist_autograd.context() as context_id:
            hidden = rpc.rpc_sync("head", through_body, args=(weight,))
            loss_rref = rpc.RRef(head_value(hidden, how))
            outcome(f"owner {how}", loss_rref.backward, (context_id,), context_id)
    with dist_autograd.context() as context_id:
        loss_rref = rpc.RRef(torch.ones(1))
        outcome("owner other context", loss_rref.backward, (context_id + 1000,))


def api(folder):
    import distviz
    from distviz.trace import load

    weight = torch.ones(2, requires_grad=True)
    for where in ("non-owner", "owner"):
        with dist_autograd.context() as context_id:
            hidden = rpc.rpc_sync("body", through_body, args=(weight,))
            if where == "owner":
                loss_rref = rpc.RRef(head_value(hidden, "ok"))
            else:
                loss_rref = rpc.remote("head", head_value, args=(hidden, "ok"))
            trace = distviz.backward(context_id, loss_rref, path=f"{folder}/{where}.json")
            on_disk = load(f"{folder}/{where}.json").real     # written when the call returns
            grads = sorted(g.tolist() for g in dist_autograd.get_gradients(context_id).values())
        print(f"api {where}: initiator {trace.initiator}, workers {trace.workers}, roots "
              f"{trace.passes[0].root_vars}, real {trace.real.outcome}, on disk "
              f"{on_disk.outcome if on_disk is not None else None}, gradients {grads}",
              flush=True)


def armed_loss(h):
    """``head``'s loss leaving ``extra`` out, armed for ``distviz.record(..., observe=True)``
    in the context the trainer's RPC runs in."""
    import distviz

    extra = rpc.rpc_sync(to="body", func=get_extra, args=(h,))  # noqa: F841 - left out of the loss
    loss = h.sum()
    context_id = dist_autograd._current_context()._context_id()
    distviz.record(context_id, [loss], observe=True)
    return loss


def api_hang():
    """The same FAST-mode hang (an RPC result left out of the loss) under the Python API,
    through ``dist_autograd.backward`` and through ``RRef.backward`` from another worker."""
    import distviz

    weight = torch.ones(2, requires_grad=True)
    with dist_autograd.context() as context_id:   # distviz's hooks in the trainer too
        hidden = rpc.rpc_sync("body", through_body, args=(weight,))
        distviz.backward(context_id, [hidden.sum()], path=os.devnull)
    with dist_autograd.context() as context_id:
        hidden = rpc.rpc_sync("body", through_body, args=(weight,))
        extra = rpc.rpc_sync("body", get_extra, args=(hidden,))  # noqa: F841 - left out
        loss = hidden.sum()
        distviz.record(context_id, [loss], observe=True)
        outcome("hang dist_autograd.backward", dist_autograd.backward, (context_id, [loss]))
    with dist_autograd.context() as context_id:
        hidden = rpc.rpc_sync("body", through_body, args=(weight,))
        loss_rref = rpc.remote("head", armed_loss, args=(hidden,))
        loss_rref.to_here()
        outcome("hang RRef.backward", loss_rref.backward, (context_id,))


def run_worker(rank, mode, args):
    options = rpc.TensorPipeRpcBackendOptions(
        init_method=os.environ.get("RPC_INIT_METHOD", "tcp://127.0.0.1:29500"),
        rpc_timeout=float(os.environ.get("RPC_TIMEOUT", "60")))
    name = ("trainer", "body", "head")[rank]
    rpc.init_rpc(name, rank=rank, world_size=3, rpc_backend_options=options)
    if rank == 0:
        if mode == "late":
            bad = int(args[0]) if args else 15
            train(bad, int(args[1]) if len(args) > 1 else max(20, bad))
        elif mode == "owner":
            owner()
        elif mode == "api":
            api(args[0])
        elif mode == "api-hang":
            os.chdir(args[0])     # the traces distviz.record writes
            api_hang()
        else:
            errors()
    rpc.shutdown()


if __name__ == "__main__":
    mp.start_processes(run_worker, args=(sys.argv[1], sys.argv[2:]), nprocs=3, join=True, start_method="fork")
