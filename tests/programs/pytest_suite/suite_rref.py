"""``RRef.backward`` as tests (``tests/e2e/test_rref_backward.py`` runs them with
``pytest --distviz``): a trainer asks ``head`` for the loss with ``rpc.remote`` and calls
``loss_rref.backward(context_id)`` from the trainer (not the RRef's owner), or owns the RRef
itself; each test checks the gradient PyTorch leaves in the context.
"""


import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp


def double(x):
    return x * 2


def head_loss(h):
    return (h * h).sum()


def _run(rank, folder, owner):
    rpc.init_rpc(("trainer", "head")[rank], rank=rank, world_size=2, rpc_backend_options=
                 rpc.TensorPipeRpcBackendOptions(init_method=f"file://{folder}/rendezvous"))
    if rank == 0:
        w = torch.ones(3, requires_grad=True)
        with dist_autograd.context() as context_id:
            if owner:
                hidden = rpc.rpc_sync("head", double, args=(w,))
                loss_rref = rpc.RRef(head_loss(hidden))
            else:
                loss_rref = rpc.remote("head", head_loss, args=(w * 2,))
            assert loss_rref.backward(context_id) is None
            assert dist_autograd.get_gradients(context_id)[w].tolist() == [8.0, 8.0, 8.0]
    rpc.shutdown()


def test_rref_backward_from_another_worker(tmp_path):
    mp.spawn(_run, args=(str(tmp_path), False), nprocs=2, join=True)


def test_rref_backward_on_the_owner(tmp_path):
    mp.spawn(_run, args=(str(tmp_path), True), nprocs=2, join=True)
