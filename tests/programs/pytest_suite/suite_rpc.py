"""A small test suite of RPC programs, written the way PyTorch's own dist autograd tests are
(each test starts its workers, rank 0 drives, the others serve), for distviz's pytest plugin
(``tests/e2e/test_pytest_plugin.py`` runs it plain, with ``pytest --distviz`` and under
``distviz trace``). Not collected by distviz's own test run: its name does not start with
``test_``.

* ``test_gradient_through_a_remote_call`` agrees;
* ``test_backward_unused_send_function`` expects FAST mode's hang (PyTorch's test of the same
  name: the backward, in a thread, is still running after a while);
* ``test_backward_invalid_args`` expects PyTorch's errors for bad arguments (PyTorch's test
  of the same name);
* ``test_wrong_expectation_fails`` fails on purpose (its report carries distviz's section).
"""

import os
import threading

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp

WORLD = 2
HANG_WAIT = float(os.environ.get("SUITE_HANG_WAIT", "6"))


def scale(x):
    return x * 2


def _start(rank, folder):
    options = rpc.TensorPipeRpcBackendOptions(init_method=f"file://{folder}/rendezvous",
                                              rpc_timeout=20)
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=WORLD, rpc_backend_options=options)


def _spawn(fn, folder):
    mp.spawn(fn, args=(folder,), nprocs=WORLD, join=True)


def _agrees(rank, folder):
    _start(rank, folder)
    if rank == 0:
        x = torch.ones(3, requires_grad=True)
        with dist_autograd.context() as context_id:
            y = rpc.rpc_sync("worker1", scale, args=(x * 3,))
            dist_autograd.backward(context_id, [y.sum()])
            grads = dist_autograd.get_gradients(context_id)
        assert torch.equal(grads[x], torch.full((3,), 6.0))
    rpc.shutdown()


def test_gradient_through_a_remote_call(tmp_path):
    _spawn(_agrees, str(tmp_path))


def _unused_send_in_thread():
    x = torch.ones(3, requires_grad=True)
    with dist_autograd.context() as context_id:
        unused = rpc.rpc_sync("worker1", scale, args=(x,))  # noqa: F841 - never used
        dist_autograd.backward(context_id, [(x * 2).sum()])


def _hangs(rank, folder):
    _start(rank, folder)
    if rank == 0:
        t = threading.Thread(target=_unused_send_in_thread, daemon=True)
        t.start()
        t.join(HANG_WAIT)
        assert t.is_alive(), "the backward returned, but FAST mode waits for the unused send"
    rpc.shutdown()


def test_backward_unused_send_function(tmp_path):
    _spawn(_hangs, str(tmp_path))


def _raises(kind, text, fn, *args):
    try:
        fn(*args)
    except kind as exc:
        assert text in str(exc), str(exc)
    else:
        raise AssertionError(f"dist_autograd.backward{args!r} did not raise")


def _invalid(rank, folder):
    _start(rank, folder)
    if rank == 0:
        with dist_autograd.context() as context_id:
            _raises(TypeError, "incompatible function arguments", dist_autograd.backward,
                    context_id, None)
            _raises(RuntimeError, "No tensors provided", dist_autograd.backward, context_id, [])
            _raises(RuntimeError, "requires_grad not set on", dist_autograd.backward,
                    context_id, [torch.ones(2).sum()])
    rpc.shutdown()


def test_backward_invalid_args(tmp_path):
    _spawn(_invalid, str(tmp_path))


def _wrong(rank, folder):
    _start(rank, folder)
    if rank == 0:
        x = torch.ones(2, requires_grad=True)
        with dist_autograd.context() as context_id:
            y = rpc.rpc_sync("worker1", torch.add, args=(x, 1))
            dist_autograd.backward(context_id, [y.sum()])
            grads = dist_autograd.get_gradients(context_id)
        assert torch.equal(grads[x], torch.full((2,), 5.0)), "expected 5 on purpose"
    rpc.shutdown()


def test_wrong_expectation_fails(tmp_path):
    _spawn(_wrong, str(tmp_path))
