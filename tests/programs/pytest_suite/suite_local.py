"""Local backwards inside dist autograd contexts, as tests (``tests/e2e/test_local_backward.py``
runs them with ``pytest --distviz``): each test passes, and distviz's section of each says what
the local backward did.

* ``test_local_backward_over_an_rpc_result`` expects PyTorch's internal assert from
  ``loss.backward()`` over an RPC's result;
* ``test_local_backward_without_rpc`` checks that a local backward inside a context leaves
  ``get_gradients`` empty and fills ``.grad``.
"""


import pytest
import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp


def scale(x):
    return x * 2


def _over_rpc(rank, folder):
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=2, rpc_backend_options=
                 rpc.TensorPipeRpcBackendOptions(init_method=f"file://{folder}/rendezvous"))
    if rank == 0:
        x = torch.ones(3, requires_grad=True)
        with dist_autograd.context():
            y = rpc.rpc_sync("worker1", scale, args=(x,))
            loss = y.sum()
            with pytest.raises(RuntimeError, match="graphTask_ INTERNAL ASSERT FAILED"):
                loss.backward()
    rpc.shutdown()


def _without_rpc(rank, folder):
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=2, rpc_backend_options=
                 rpc.TensorPipeRpcBackendOptions(init_method=f"file://{folder}/rendezvous"))
    if rank == 0:
        w = torch.ones(3, requires_grad=True)
        with dist_autograd.context() as context_id:
            loss = (w * 2).sum()
            loss.backward()
            assert dist_autograd.get_gradients(context_id) == {}
        assert w.grad.tolist() == [2.0, 2.0, 2.0]
    rpc.shutdown()


def test_local_backward_over_an_rpc_result(tmp_path):
    mp.spawn(_over_rpc, args=(str(tmp_path),), nprocs=2, join=True)


def test_local_backward_without_rpc(tmp_path):
    mp.spawn(_without_rpc, args=(str(tmp_path),), nprocs=2, join=True)
