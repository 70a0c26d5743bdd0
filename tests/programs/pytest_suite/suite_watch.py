"""A test whose 3rd backward hangs, for distviz's watch under the pytest plugin
(``tests/e2e/test_watch.py`` runs it with ``pytest --distviz``): the first two contexts of the
loop use the remote result, the third leaves it out of the loss, and the test expects the hang
(the backward, in a thread, still runs after a while), as PyTorch's own test of it does.
"""

import os
import threading

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp

WORLD = 2
HANG_WAIT = float(os.environ.get("SUITE_HANG_WAIT", "3"))


def scale(x):
    return x * 2


def _step(weight, k):
    with dist_autograd.context() as context_id:
        remote = rpc.rpc_sync("worker1", scale, args=(weight * k,))
        loss = (weight * 3).sum() if k == 3 else remote.sum()
        dist_autograd.backward(context_id, [loss])


def _loop(rank, folder):
    options = rpc.TensorPipeRpcBackendOptions(init_method=f"file://{folder}/rendezvous",
                                              rpc_timeout=6)
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=WORLD, rpc_backend_options=options)
    if rank == 0:
        weight = torch.ones(3, requires_grad=True)
        _step(weight, 1)
        _step(weight, 2)
        t = threading.Thread(target=_step, args=(weight, 3), daemon=True)
        t.start()
        t.join(HANG_WAIT)
        assert t.is_alive(), "the 3rd backward returned, but FAST mode waits for its send"
    rpc.shutdown()


def test_third_backward_hangs(tmp_path):
    folder = str(tmp_path)
    mp.spawn(_loop, args=(folder,), nprocs=WORLD, join=True)
